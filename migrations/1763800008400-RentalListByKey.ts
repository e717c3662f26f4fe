import type { MigrationInterface, QueryRunner } from 'typeorm';

/** GET /api/v1/rentals for an agent key pages through its orders by (created_at, id), newest first. */
export class RentalListByKey1763800008400 implements MigrationInterface {
  name = 'RentalListByKey1763800008400';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE orders ADD KEY ix_orders_key_created (key_id, created_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE orders DROP KEY ix_orders_key_created`);
  }
}
