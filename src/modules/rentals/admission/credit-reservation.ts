import type { ReservingRow } from '../store/deployments.repository.js';

/**
 * How much of its first run a metered rental holds in reserve, in minutes of its hourly price.
 *
 * One hour, the same amount admission has always demanded of a metered rental ("its first hour,
 * or its whole cap if that is less"): a rental is admitted when the credits nobody has reserved
 * yet cover its own reservation, so N parallel rentals need N reservations. A shorter reservation
 * (a few minutes, or one metering period) would let an account with one hour of credit start
 * dozens of rentals at once; their combined accrual in one metering period, which is what an
 * account can overdraw by, would grow with each. With an hour per rental the combined price of
 * the live rentals an account can start is bounded by its credits per hour.
 */
export const RESERVATION_MINUTES = 60;

export interface ReservingRental {
  hourlyPriceMinor: number;
  /** The rental's spend cap (cents), or null when uncapped. */
  spendCapMinor: number | null;
  /** Usage already charged, posted to the ledger or not yet (cents): the balance no longer holds it. */
  usageMinor: number;
}

/**
 * THE reservation rule (docs/rentals-and-money.md, Credit reservations): a live metered rental holds its first
 * RESERVATION_MINUTES at its price, or its spend cap if that is smaller; usage already charged
 * counts against it, so what is still outstanding never double-counts money the balance has lost.
 * A new rental (no usage yet) needs exactly this much unreserved credit to be admitted.
 */
export function outstandingReservationMinor(r: ReservingRental): number {
  const firstRun = Math.ceil((r.hourlyPriceMinor * RESERVATION_MINUTES) / 60);
  const reserved = r.spendCapMinor === null ? firstRun : Math.min(firstRun, r.spendCapMinor);
  return Math.max(0, reserved - r.usageMinor);
}

/** What live metered rentals hold back, in cents: the account's in total, and the admitting key's share. */
export interface Reserved {
  /** Outstanding reservations of every live metered rental of the account. */
  accountMinor: number;
  /** The part of `accountMinor` held by rentals of one key. */
  keyMinor: number;
}

/**
 * The credit already committed to an account's live metered rentals (`rows`, read by
 * `reservingRentals`), and how much of it one key's rentals hold: admission takes both out of
 * what is left (the account's credits, the key's lifetime budget), so parallel rentals of one key
 * cannot overspend its budget any more than parallel rentals of one account can overdraw its
 * credits. Read the rows inside the admission transaction after locking the account row:
 * admissions of one account then run one after another and each sees the rentals the previous
 * one wrote. One statement for both sums.
 */
export function reservedOf(rows: readonly ReservingRow[], keyId: string): Reserved {
  const out: Reserved = { accountMinor: 0, keyMinor: 0 };
  for (const r of rows) {
    const outstanding = outstandingReservationMinor(r);
    out.accountMinor += outstanding;
    if (r.keyId === keyId) out.keyMinor += outstanding;
  }
  return out;
}
