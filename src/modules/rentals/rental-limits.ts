/** Legacy prepaid purchases start at this many cents (docs/api.md, Limits). */
export const LEGACY_MIN_BUDGET_MINOR = 500;
/** GPU-intent rentals try at most this many candidates, one create attempt each (docs/api.md, Limits). */
export const MAX_CANDIDATES = 3;
