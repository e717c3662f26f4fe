/**
 * Who reads or acts on an account's rows: an agent key, or the account holder (an OWNER key, or
 * the owner in the Telegram bot, who holds no key there). An authenticated `Principal` is one.
 */
export type Viewer = { kind: 'AGENT'; accountId: string; keyId: string } | { kind: 'OWNER'; accountId: string };

/**
 * The one visibility rule for rows that carry an account and the key that made them (rentals,
 * deployments, top-ups, ledger entries): an agent key sees the rows it made, the account holder
 * every row of the account. The answer is a TypeORM `where` of entity properties, to spread into
 * a query's own conditions.
 */
export function visibleRows(viewer: Viewer): { accountId: string; keyId?: string } {
  return viewer.kind === 'AGENT'
    ? { accountId: viewer.accountId, keyId: viewer.keyId }
    : { accountId: viewer.accountId };
}
