import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Refused credential reveals are audited as one row per key, reason and minute with a count of
 * calls, so a key that keeps asking (for ids of its choosing) adds at most a few rows a minute.
 * Revealing calls keep a row each (their window is NULL, which a unique index never matches).
 */
export class RevealRefusalWindows1763800011000 implements MigrationInterface {
  name = 'RevealRefusalWindows1763800011000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE credential_reveals
      ADD COLUMN refusal_window DATETIME NULL AFTER refusal,
      ADD COLUMN refused_calls INT NOT NULL DEFAULT 1 AFTER refusal_window,
      ADD COLUMN last_called_at DATETIME(3) NULL AFTER called_at,
      ADD UNIQUE INDEX uq_reveals_refusal_window (key_id, refusal, refusal_window)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE credential_reveals
      DROP INDEX uq_reveals_refusal_window,
      DROP COLUMN last_called_at,
      DROP COLUMN refused_calls,
      DROP COLUMN refusal_window`);
  }
}
