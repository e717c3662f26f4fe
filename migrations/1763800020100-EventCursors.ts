import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Ids below a cursor still looked for (events/event-tail.ts, LATE_COMMIT_LOOKBACK, as of this migration). */
const LOOKBACK = 1000n;
/** How far the owner notifications' time cursor re-read before its position. */
const TELEGRAM_OVERLAP_MS = 5 * 60_000;

/**
 * One cursor table for every consumer of the event log (events/event-tail.ts): a row per consumer
 * name, holding the newest log-wide id it handled, the ids below it (within the lookback) that
 * had not committed when it passed them, and a version that two processes of one name take turns
 * on. The webhook dispatcher's id cursor and the owner notifications' time cursor move here:
 *
 * - `webhooks` keeps its id; the ids of its old look-back window that have no delivery are to be
 *   looked at again (an event with no receiver among them is looked at, and sent nowhere, again).
 * - `owner-notifications` starts after the newest event written before its time minus the old
 *   overlap, which is what its next scan would have read again; the notifications' unique keys
 *   keep what was already told from being told twice.
 *
 * `webhook_cursor` and `telegram_cursors` stay for processes of the previous version while an
 * upgrade rolls (their deliveries and notifications are unique per cause, so both versions running
 * at once repeat nothing); this version reads neither.
 */
export class EventCursors1763800020100 implements MigrationInterface {
  name = 'EventCursors1763800020100';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE event_cursors (
      name VARCHAR(64) NOT NULL,
      last_event_id BIGINT UNSIGNED NOT NULL,
      unseen_ids TEXT NOT NULL,
      version BIGINT UNSIGNED NOT NULL DEFAULT 0,
      PRIMARY KEY (name)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);

    const [hooks] = (await q.query(`SELECT last_event_id FROM webhook_cursor WHERE name = 'webhooks'`)) as {
      last_event_id: string | number;
    }[];
    if (hooks) {
      const last = BigInt(hooks.last_event_id);
      const fannedOut = (await q.query(
        `SELECT DISTINCT event_id AS id FROM webhook_deliveries WHERE event_id > ? AND event_id <= ?`,
        [String(floorOf(last)), String(last)],
      )) as { id: string | number }[];
      await insertCursor(q, 'webhooks', last, fannedOut);
    }

    const [owners] = (await q.query(`SELECT position FROM telegram_cursors WHERE name = 'owner-notifications'`)) as {
      position: Date;
    }[];
    if (owners) {
      const before = new Date(new Date(owners.position).getTime() - TELEGRAM_OVERLAP_MS);
      const [newest] = (await q.query(`SELECT id FROM events WHERE created_at < ? ORDER BY id DESC LIMIT 1`, [
        before,
      ])) as { id: string | number }[];
      const last = newest ? BigInt(newest.id) : 0n;
      const present = (await q.query(`SELECT id FROM events WHERE id > ? AND id <= ?`, [
        String(floorOf(last)),
        String(last),
      ])) as { id: string | number }[];
      await insertCursor(q, 'owner-notifications', last, present);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE event_cursors`);
  }
}

const floorOf = (last: bigint): bigint => (last > LOOKBACK ? last - LOOKBACK : 0n);

/** A cursor after `last`, still looking for every id of its window but those of `seen`. */
async function insertCursor(q: QueryRunner, name: string, last: bigint, seen: { id: string | number }[]) {
  const done = new Set(seen.map((r) => String(r.id)));
  const unseen: string[] = [];
  for (let id = floorOf(last) + 1n; id <= last; id++) if (!done.has(String(id))) unseen.push(String(id));
  await q.query(`INSERT INTO event_cursors (name, last_event_id, unseen_ids, version) VALUES (?, ?, ?, 0)`, [
    name,
    String(last),
    unseen.join(','),
  ]);
}
