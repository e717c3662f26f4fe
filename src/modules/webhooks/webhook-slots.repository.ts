import type { DataSource } from 'typeorm';
import type { Sql } from '../../db/sql.js';
import { inTransaction } from '../../db/transaction.js';

/*
 * The only code that reads or writes `webhook_delivery_slots`: each account's tries in flight,
 * one row per slot (created on first use), shared by every worker. A try holds a slot until it is
 * recorded, or until `held_until` should its worker die first.
 */

type Db = Sql | DataSource;

/** The most slots an account can be given (the numbers below). */
export const MAX_SLOTS = 16;

/** Slot numbers 0 to 15, as a derived table of one column `n`. */
const SLOT_NUMBERS =
  '(SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9 UNION ALL SELECT 10 UNION ALL SELECT 11 UNION ALL SELECT 12 UNION ALL SELECT 13 UNION ALL SELECT 14 UNION ALL SELECT 15) AS numbers';

/** What {@link takeTry} got: the delivery with a slot, no free slot of its account, or the delivery is done or held by another run. */
export type TakeResult = 'taken' | 'no-slot' | 'busy';

/**
 * Takes one of the account's `slots` and the pending delivery for one try until `until` (wall
 * time), together or not at all: the slot caps the account's tries in flight across workers, the
 * delivery's claim keeps two runs of its job (a retry and a redelivery) from sending at once.
 * Locks the account's slot rows, then the delivery row (the order every writer here keeps).
 */
export async function takeTry(
  ds: DataSource,
  t: { deliveryId: string; accountId: string; slots: number; now: Date; until: Date },
): Promise<TakeResult> {
  if (t.slots < 1 || t.slots > MAX_SLOTS) throw new Error(`an account's delivery slots must be 1 to ${MAX_SLOTS}`);
  for (let round = 0; ; round++) {
    const got = await inTransaction(ds, async (m): Promise<TakeResult> => {
      const slot = (await m.query(
        `UPDATE webhook_delivery_slots SET delivery_id = ?, held_until = ? WHERE account_id = ? AND slot < ? AND (held_until IS NULL OR held_until < ?) ORDER BY slot LIMIT 1`,
        [t.deliveryId, t.until, t.accountId, t.slots, t.now],
      )) as { affectedRows: number };
      if (slot.affectedRows !== 1) return 'no-slot';
      const claim = (await m.query(
        `UPDATE webhook_deliveries SET claimed_until = ? WHERE id = ? AND status = 'PENDING' AND (claimed_until IS NULL OR claimed_until < ?)`,
        [t.until, t.deliveryId, t.now],
      )) as { affectedRows: number };
      if (claim.affectedRows === 1) return 'taken';
      await releaseSlot(m, t.accountId, t.deliveryId);
      return 'busy';
    });
    if (got !== 'no-slot' || round > 0) return got;
    // The account's first tries (or a raised count): its rows may not exist yet. Another run may
    // make them at the same moment, so the second round is taken whoever made them.
    await ds.query(
      `INSERT IGNORE INTO webhook_delivery_slots (account_id, slot) SELECT ?, n FROM ${SLOT_NUMBERS} WHERE n < ?`,
      [t.accountId, t.slots],
    );
  }
}

/** Frees the slot `deliveryId` holds, if it holds one, in the caller's transaction. */
export async function releaseSlot(m: Sql, accountId: string, deliveryId: string): Promise<void> {
  await m.query(
    `UPDATE webhook_delivery_slots SET delivery_id = NULL, held_until = NULL WHERE account_id = ? AND delivery_id = ?`,
    [accountId, deliveryId],
  );
}

/** How many of the account's slots are held at `now` (wall time). */
export async function heldSlots(m: Db, accountId: string, now: Date): Promise<number> {
  const [row] = (await m.query(
    `SELECT COUNT(*) AS n FROM webhook_delivery_slots WHERE account_id = ? AND held_until >= ?`,
    [accountId, now],
  )) as { n: number | string }[];
  return Number(row?.n ?? 0);
}
