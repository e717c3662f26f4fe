import type { Executor } from '../../../db/mysql-store.js';
import { readMinor } from '../../../db/columns.js';
import { RENTAL_STATUSES, TERMINAL_STATUSES, isOneOf } from '../state/rental-status.js';

/** The statuses a rental passes through before it is finished: few rows each, whatever the history. */
export const UNFINISHED_STATUSES = RENTAL_STATUSES.filter((s) => !isOneOf(TERMINAL_STATUSES, s));

/**
 * Deployments per unfinished status, every such status listed (zeros included), for the metrics
 * scrape. One grouped query over a range of `ix_deployments_status`: finished rentals, which grow
 * without end, are never read.
 */
export async function unfinishedRentalCounts(ds: Executor): Promise<Record<string, number>> {
  const rows: { status: string; n: number | string }[] = await ds.query(
    `SELECT status, COUNT(*) AS n FROM deployments WHERE status IN (${UNFINISHED_STATUSES.map(() => '?').join(', ')}) GROUP BY status`,
    UNFINISHED_STATUSES,
  );
  const counts: Record<string, number> = Object.fromEntries(UNFINISHED_STATUSES.map((s) => [s, 0]));
  for (const r of rows) counts[r.status] = readMinor(r.n);
  return counts;
}
