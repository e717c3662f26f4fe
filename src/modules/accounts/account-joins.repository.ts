// The accounts aggregate's part of other aggregates' single-statement reads: the joins to a
// rental's key (`k`) and account (`a`), and the columns of theirs those reads take. A sweep that
// reads a rental with its key's and account's figures does so in one statement (the metering
// sweep's limits read is one request: test/rentals/metering-round-trips.test.ts); splitting it
// by aggregate would add a round trip. So the joining aggregate names its own table, always as
// `d` with `key_id` and `account_id`, and splices these in, and the accounts' tables and columns
// stay named in the accounts aggregate alone. Their text is part of the statements they join
// (statement texts are pinned by tests): keep it as it is.

/** Joins the key, as `k`, that the row `d` names in its `key_id`. */
export const KEY_OF_ROW = 'JOIN api_keys k ON k.id = d.key_id';

/** Joins the account, as `a`, that the row `d` names in its `account_id`. */
export const ACCOUNT_OF_ROW = 'JOIN accounts a ON a.id = d.account_id';

/**
 * The counters a metered rental's limits are checked against, with {@link KEY_OF_ROW} and
 * {@link ACCOUNT_OF_ROW}: the key's `budget_limit_minor` and `net_spent_minor` and the account's
 * `balance_minor`, each a single column kept in step by the ledger's postings.
 */
export const KEY_AND_ACCOUNT_LIMITS = 'k.budget_limit_minor, k.net_spent_minor, a.balance_minor';

/** The key's `idle_terminate_minutes` (null: its rentals are never ended for idling), with {@link KEY_OF_ROW}. */
export const KEY_IDLE_MINUTES = 'k.idle_terminate_minutes';
