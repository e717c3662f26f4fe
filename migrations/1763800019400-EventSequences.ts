import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Event ids per account. `events.id` is one count across every account, so the ids a reader
 * saw (and an empty page's `nextAfter`) told it how busy everyone else was. Each event now also
 * gets `seq`, its account's own count, taken from `event_sequences` in the transaction that
 * writes it; the API shows `seq` as the event's id, and the service's own readers keep `id`.
 *
 * Cursors handed out before this stay valid: existing events keep their id as their `seq`, and
 * every account's counter starts at the newest id of the whole log, so each new event is numbered
 * above any id a client could hold (an empty page's `nextAfter` was that newest id, whichever
 * account's it was). Accounts made later start at 1.
 *
 * `seq` may be null so that processes of the previous version, still running while an upgrade
 * rolls, can write events; theirs carry no number and are not shown by the API (webhooks and
 * notifications still see them). Replace the old api and worker processes promptly.
 */
export class EventSequences1763800019400 implements MigrationInterface {
  name = 'EventSequences1763800019400';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE event_sequences (
      account_id CHAR(36) NOT NULL,
      seq BIGINT UNSIGNED NOT NULL,
      PRIMARY KEY (account_id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
    await q.query(`ALTER TABLE events ADD COLUMN seq BIGINT UNSIGNED NULL`);
    await q.query(`UPDATE events SET seq = id`);
    await q.query(`ALTER TABLE events ADD UNIQUE KEY ux_events_account_seq (account_id, seq)`);
    await q.query(
      `INSERT INTO event_sequences (account_id, seq) SELECT a.id, m.newest FROM accounts a CROSS JOIN (SELECT COALESCE(MAX(id), 0) AS newest FROM events) m`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE events DROP KEY ux_events_account_seq, DROP COLUMN seq`);
    await q.query(`DROP TABLE event_sequences`);
  }
}
