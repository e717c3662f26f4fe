import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A GPU-intent rental keeps the match note decided at admission: it may suggest only models that
 * were on sale for the request then, which reads made later cannot know. Rentals admitted before
 * keep NULL, and their reads suggest no model.
 */
export class MatchNotes1763800020500 implements MigrationInterface {
  name = 'MatchNotes1763800020500';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE orders ADD COLUMN match_note VARCHAR(2000) NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE orders DROP COLUMN match_note`);
  }
}
