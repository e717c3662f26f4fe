/**
 * The smallest budgetMinor of any rental, whatever the billing model (docs/api.md, Limits). It
 * lives in the vocabulary the clients share, so the API, the docs and the clients say one number.
 */
export { MIN_BUDGET_MINOR } from '../../../vocabulary/limits.js';
/** GPU-intent rentals try at most this many candidates, one create attempt each (docs/api.md, Limits). */
export const MAX_CANDIDATES = 3;
/**
 * A key whose rentals FAILED this many times within {@link FAILED_AFTER_USE_WINDOW_MS} after their
 * machines worked for it (ran its settings and let the check in, but never passed the check) may
 * start no rental until the oldest of them leaves the window (docs/rentals-and-money.md, Time before ACTIVE).
 */
export const FAILED_AFTER_USE_LIMIT = 3;
export const FAILED_AFTER_USE_WINDOW_MS = 24 * 3600_000;
/**
 * Admission refuses credit-funded rentals while one of the account's running metered rentals has
 * gone uncharged for longer than this many metering periods (at least {@link METERING_LAG_MIN_MS}):
 * its balance is then older than what the rentals have used (docs/rentals-and-money.md, Worker outages).
 */
export const METERING_LAG_PERIODS = 4;
export const METERING_LAG_MIN_MS = 60_000;
