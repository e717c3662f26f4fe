import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The durable event log: every change an agent or owner cares about, written once in the
 * transaction of the change, with the view a read returned at that moment. Ids grow with time, so
 * a reader resumes after the last id it saw (the stream's Last-Event-ID, paging's `after`).
 * `key_id` is the key whose rental it concerns (agent keys see those), null for account events.
 */
export class Events1763800013000 implements MigrationInterface {
  name = 'Events1763800013000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE events (
      id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
      type VARCHAR(40) NOT NULL,
      account_id CHAR(36) NOT NULL,
      key_id CHAR(36) NULL,
      rental_id CHAR(36) NULL,
      data JSON NOT NULL,
      created_at DATETIME(3) NOT NULL,
      PRIMARY KEY (id),
      KEY ix_events_account (account_id, id),
      KEY ix_events_key (key_id, id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE events`);
  }
}
