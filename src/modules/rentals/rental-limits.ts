/**
 * The smallest budgetMinor of any rental, whatever the billing model (docs/api.md, Limits). It
 * lives with the hint texts that state it, so the API, the docs and the clients say one number.
 */
export { MIN_BUDGET_MINOR } from '../../../clients/sdk/src/hints.js';
/** GPU-intent rentals try at most this many candidates, one create attempt each (docs/api.md, Limits). */
export const MAX_CANDIDATES = 3;
