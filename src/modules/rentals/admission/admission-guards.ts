import { AppError } from '../../../errors/app-error.js';
import { outstandingReservationMinor, type Reserved } from './credit-reservation.js';
import { topUpAdvice } from '../../billing/top-up-advice.js';
import type { KeyUsage } from '../../keys/keys.service.js';
import { assertFreeSlot } from './concurrency-slot.js';
import type { Deployment } from '../store/deployment.entity.js';
import {
  FAILED_AFTER_USE_LIMIT,
  FAILED_AFTER_USE_WINDOW_MS,
  METERING_LAG_MIN_MS,
  METERING_LAG_PERIODS,
} from './rental-limits.js';
import { chargeEnd } from '../lifecycle/metering.js';

import type { AdmissionTerms, AdmittingKey, PayingAccount } from './admission-terms.js';

// The refusals of admission that depend on what was read under the locks: key and account
// limits, recent failures after use, and metering that lags.

/**
 * Key limits and credits of a credit-funded rental, from what was read under the account lock
 * (the key's counters and the reservations of the account's live metered rentals), so parallel
 * admissions cannot overshoot. Reservations count against the key's budget as they count against
 * the account's credits: a rental's unspent first hour is money its key may still spend.
 */
export function assertCreditLimits(
  account: PayingAccount,
  caller: AdmittingKey,
  usage: KeyUsage,
  reserved: Reserved,
  terms: AdmissionTerms,
): void {
  const key = caller.key;
  const remainingKeyBudget = key.budgetLimitMinor - usage.netSpentMinor - reserved.keyMinor;
  // A metered rental needs its own reservation (credit-reservation.ts) out of unreserved credits.
  const price = terms.hourlyPriceMinor;
  const needed =
    terms.billingModel === 'LEGACY_PREPAID'
      ? terms.totalMinor
      : outstandingReservationMinor({ hourlyPriceMinor: price, spendCapMinor: terms.spendCapMinor, usageMinor: 0 });

  if (terms.billingModel === 'LEGACY_PREPAID' && terms.totalMinor > key.maxPerRentalMinor) {
    throw new AppError(
      'KEY_LIMIT_EXCEEDED',
      `This rental costs ${terms.totalMinor} cents; this key may spend at most ${key.maxPerRentalMinor} cents per rental.`,
    );
  }
  if (needed > remainingKeyBudget) {
    throw new AppError(
      'KEY_LIMIT_EXCEEDED',
      `This rental needs ${needed} cents of this key's budget; ${Math.max(0, remainingKeyBudget)} cents of its ${key.budgetLimitMinor} remain` +
        (reserved.keyMinor > 0 ? ` (${reserved.keyMinor} reserved by its running metered rentals).` : '.'),
    );
  }
  assertFreeSlot(caller, usage);
  if (account.balanceMinor - reserved.accountMinor < needed) {
    const held =
      reserved.accountMinor > 0 ? ` (${reserved.accountMinor} of them reserved by its running metered rentals)` : '';
    throw new AppError(
      'INSUFFICIENT_CREDITS',
      `This rental needs ${needed} cents of credits; the account has ${account.balanceMinor}${held}. ${topUpAdvice(caller.scopes)}`,
    );
  }
}

/** Seconds until `ms` (at least one), as a `Retry-After` value. */
const secondsUntil = (ms: number, now: Date) => Math.max(1, Math.ceil((ms - now.getTime()) / 1000));

/**
 * THE limit on rentals whose machines worked for the key without ever passing the check
 * (`recent`: when each first let the check in, newest first, within the last
 * {@link FAILED_AFTER_USE_WINDOW_MS}): at {@link FAILED_AFTER_USE_LIMIT} the key starts nothing more
 * until the oldest of them leaves the window. Their time was charged; the limit keeps a key from
 * making a habit of it.
 */
export function assertFailedAfterUseUnderLimit(recent: readonly Date[], now: Date): void {
  if (recent.length < FAILED_AFTER_USE_LIMIT) return;
  const liftsAt = recent[FAILED_AFTER_USE_LIMIT - 1].getTime() + FAILED_AFTER_USE_WINDOW_MS;
  const wait = secondsUntil(liftsAt, now);
  throw new AppError(
    'RATE_LIMITED',
    `This key's last ${FAILED_AFTER_USE_LIMIT} rentals failed within ${FAILED_AFTER_USE_WINDOW_MS / 3600_000} hours after their machines ran its startup script or image without passing the service's check (the startup marker or the GPUs were missing, or the check was held up), so it can start rentals again at ${new Date(liftsAt).toISOString()}, in ${wait} s. ` +
      'A startup script must leave ~/.gpr/startup-started and nvidia-smi in place.',
    { 'Retry-After': String(wait) },
  );
}

/**
 * THE metering-lag rule: the account's credits are exact only up to where metering has charged
 * its running rentals. While one of them (`rentals`: its live metered rentals) has gone uncharged
 * for longer than {@link METERING_LAG_PERIODS} periods of `meteringEveryMs` (as while the worker
 * is away), the balance holds money those rentals have used, so no credit-funded rental is
 * admitted against it; the refusal lifts once metering catches up.
 */
export function assertMeteringCaughtUp(
  rentals: readonly Pick<Deployment, 'meteredUntil' | 'endsAt' | 'terminateRequestedAt'>[],
  now: Date,
  meteringEveryMs: number,
): void {
  const nowMs = now.getTime();
  const lagMs = Math.max(
    0,
    ...rentals.map((r) => (r.meteredUntil ? chargeEnd(r, nowMs) - r.meteredUntil.getTime() : 0)),
  );
  if (lagMs <= Math.max(METERING_LAG_PERIODS * meteringEveryMs, METERING_LAG_MIN_MS)) return;
  const wait = secondsUntil(nowMs + meteringEveryMs, now);
  throw new AppError(
    'UNAVAILABLE',
    `Billing is catching up: this account's running rentals have not been charged for the last ${Math.floor(lagMs / 1000)} s (the service's metering is behind, as while its worker restarts), so no new rental starts on credits they may have used. Retry in ${wait} s.`,
    { 'Retry-After': String(wait) },
  );
}
