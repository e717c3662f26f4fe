import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Internet traffic billed as used. An offer keeps what the provider charges us per GB and the
 * customer's price with the markup (millionths of a USD; NULL: traffic is free). A deployment keeps
 * the customer's per-GB prices of the offer it runs, the highest cumulative counters read from its
 * instance (bytes), when they were read, the traffic charged so far (cents, taken from the balance)
 * and the part of it posted to the ledger.
 */
export class TrafficBilling1763800021000 implements MigrationInterface {
  name = 'TrafficBilling1763800021000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE offers
         ADD COLUMN traffic_up_cost_micro INT NULL, ADD COLUMN traffic_down_cost_micro INT NULL,
         ADD COLUMN traffic_up_price_micro INT NULL, ADD COLUMN traffic_down_price_micro INT NULL`,
    );
    await q.query(
      `ALTER TABLE deployments
         ADD COLUMN traffic_up_price_micro INT NULL, ADD COLUMN traffic_down_price_micro INT NULL,
         ADD COLUMN traffic_up_bytes BIGINT NOT NULL DEFAULT 0, ADD COLUMN traffic_down_bytes BIGINT NOT NULL DEFAULT 0,
         ADD COLUMN traffic_read_at DATETIME(3) NULL,
         ADD COLUMN traffic_minor BIGINT NOT NULL DEFAULT 0, ADD COLUMN posted_traffic_minor BIGINT NOT NULL DEFAULT 0`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE deployments DROP COLUMN traffic_up_price_micro, DROP COLUMN traffic_down_price_micro,
         DROP COLUMN traffic_up_bytes, DROP COLUMN traffic_down_bytes, DROP COLUMN traffic_read_at,
         DROP COLUMN traffic_minor, DROP COLUMN posted_traffic_minor`,
    );
    await q.query(
      `ALTER TABLE offers DROP COLUMN traffic_up_cost_micro, DROP COLUMN traffic_down_cost_micro,
         DROP COLUMN traffic_up_price_micro, DROP COLUMN traffic_down_price_micro`,
    );
  }
}
