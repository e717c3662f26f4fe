import assert from 'node:assert/strict';
import type { TestContext } from './context.js';

/** Tables a rental's request, rows and jobs are written to. */
const RENTAL_TABLES = ['orders', 'deployments', 'deployment_attempts', 'idempotency_records', 'agenda_jobs'];

/**
 * Asserts that no secret appears in the API answers given, in any log line, or in the clear in any
 * row of the rental tables (binary columns read byte for byte, so a sealed value cannot hide one).
 */
export async function assertSecretsNowhere(
  ctx: TestContext,
  secrets: readonly string[],
  seen: { reads: unknown[]; logs: readonly string[] },
): Promise<void> {
  const reads = JSON.stringify(seen.reads);
  const rows: Record<string, string> = {};
  for (const table of RENTAL_TABLES) {
    rows[table] = JSON.stringify(await ctx.services.ds.query(`SELECT * FROM \`${table}\``), (_k, v) =>
      Buffer.isBuffer(v) ? v.toString('latin1') : v,
    );
  }
  for (const secret of secrets) {
    assert.ok(!reads.includes(secret), 'a read shows a secret');
    assert.ok(!seen.logs.some((l) => l.includes(secret)), 'a log line holds a secret');
    for (const table of RENTAL_TABLES) assert.ok(!rows[table].includes(secret), `${table} holds a secret in the clear`);
  }
}
