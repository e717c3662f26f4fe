import type { Executor } from '../../db/mysql-store.js';
import { inOpenTransaction } from '../../db/sql.js';

/*
 * The only code that reads or writes `webhook_delivery_slots`: each account's tries in flight,
 * one row per slot (created on first use), shared by every worker. A try holds a slot until it is
 * recorded, or until `held_until` should its worker die first.
 */

/** The most slots an account can be given (the numbers below). */
export const MAX_SLOTS = 16;

/** Slot numbers 0 to 15, as a derived table of one column `n`. */
const SLOT_NUMBERS =
  '(SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9 UNION ALL SELECT 10 UNION ALL SELECT 11 UNION ALL SELECT 12 UNION ALL SELECT 13 UNION ALL SELECT 14 UNION ALL SELECT 15) AS numbers';

/** What {@link WebhookSlotsRepository.take} got: the delivery with a slot, no free slot of its account, or the delivery is done or held by another run. */
export type TakeResult = 'taken' | 'no-slot' | 'busy';

/** One try to take: the delivery, its account and that account's slot count, and the wall times of now and of the hold's end. */
export interface TryToTake {
  deliveryId: string;
  accountId: string;
  /** How many slots the account has (1 to {@link MAX_SLOTS}). */
  slots: number;
  now: Date;
  until: Date;
}

/** The accounts' delivery slots, and a try's claim on its delivery, taken with a slot. */
export interface WebhookSlotsRepository {
  /**
   * Takes one of the account's free slots (the lowest) and the pending delivery for one try until
   * `until`, together or not at all: the slot caps the account's tries in flight across workers,
   * the delivery's claim keeps two runs of its job from sending at once. 'no-slot' also when the
   * account's slot rows do not exist yet ({@link make}). In a transaction: locks the account's
   * slot rows, then the delivery row (the order every writer here keeps). Throws when `slots` is
   * outside 1 to {@link MAX_SLOTS}.
   */
  take(t: TryToTake): Promise<TakeResult>;
  /** Makes the account's slots 0 to `slots` - 1 that do not exist yet (free); two runs may make them at once. */
  make(accountId: string, slots: number): Promise<void>;
  /** How many of the account's slots are held at `now` (wall time). */
  held(accountId: string, now: Date): Promise<number>;
}

/** Frees the slot `deliveryId` holds, if it holds one (with the writes of the caller's transaction). */
export async function releaseSlot(m: Executor, accountId: string, deliveryId: string): Promise<void> {
  await m.query(
    `UPDATE webhook_delivery_slots SET delivery_id = NULL, held_until = NULL WHERE account_id = ? AND delivery_id = ?`,
    [accountId, deliveryId],
  );
}

/** Refuses a slot count the slot numbers cannot hold. */
export function checkSlotCount(slots: number): void {
  if (slots < 1 || slots > MAX_SLOTS) throw new Error(`an account's delivery slots must be 1 to ${MAX_SLOTS}`);
}

export class MysqlWebhookSlotsRepository implements WebhookSlotsRepository {
  constructor(private readonly sql: Executor) {}

  async take(t: TryToTake): Promise<TakeResult> {
    checkSlotCount(t.slots);
    if (!inOpenTransaction(this.sql)) throw new Error('a try is taken only inside a transaction');
    const slot = (await this.sql.query(
      `UPDATE webhook_delivery_slots SET delivery_id = ?, held_until = ? WHERE account_id = ? AND slot < ? AND (held_until IS NULL OR held_until < ?) ORDER BY slot LIMIT 1`,
      [t.deliveryId, t.until, t.accountId, t.slots, t.now],
    )) as { affectedRows: number };
    if (slot.affectedRows !== 1) return 'no-slot';
    const claim = (await this.sql.query(
      `UPDATE webhook_deliveries SET claimed_until = ? WHERE id = ? AND status = 'PENDING' AND (claimed_until IS NULL OR claimed_until < ?)`,
      [t.until, t.deliveryId, t.now],
    )) as { affectedRows: number };
    if (claim.affectedRows === 1) return 'taken';
    await releaseSlot(this.sql, t.accountId, t.deliveryId);
    return 'busy';
  }

  async make(accountId: string, slots: number): Promise<void> {
    await this.sql.query(
      `INSERT IGNORE INTO webhook_delivery_slots (account_id, slot) SELECT ?, n FROM ${SLOT_NUMBERS} WHERE n < ?`,
      [accountId, slots],
    );
  }

  async held(accountId: string, now: Date): Promise<number> {
    const [row] = (await this.sql.query(
      `SELECT COUNT(*) AS n FROM webhook_delivery_slots WHERE account_id = ? AND held_until >= ?`,
      [accountId, now],
    )) as { n: number | string }[];
    return Number(row?.n ?? 0);
  }
}
