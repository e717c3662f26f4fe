import { randomBytes, randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';

export interface MeteredSeed {
  accountIds: string[];
  keyIds: string[];
  deploymentIds: string[];
}

/**
 * Seeds `accounts` accounts, each funded with `creditsMinor` (a TOPUP entry, so the ledger
 * invariant holds) and one owner key, and `perAccount` ACTIVE metered rentals of each at
 * `priceMinor`/h started at `startedAt`, in multi-row inserts: benchmarks and tests of the sweep
 * at sizes the API would take minutes to build. Key counters are written as the services keep them.
 */
export async function seedMeteredRentals(
  ds: DataSource,
  o: {
    accounts: number;
    perAccount: number;
    creditsMinor: number;
    priceMinor: number;
    startedAt: Date;
    batch?: number;
    /** Spreads the rentals' starts over this many ms before `startedAt` (so their hours end at different sweeps); 0 by default. */
    startSpreadMs?: number;
  },
): Promise<MeteredSeed> {
  const seed: MeteredSeed = { accountIds: [], keyIds: [], deploymentIds: [] };
  const batch = o.batch ?? 500;
  const at = o.startedAt;
  for (let from = 0; from < o.accounts; from += batch) {
    const n = Math.min(batch, o.accounts - from);
    const accounts: unknown[][] = [];
    const keys: unknown[][] = [];
    const ledger: unknown[][] = [];
    const orders: unknown[][] = [];
    const deployments: unknown[][] = [];
    for (let i = 0; i < n; i++) {
      const accountId = randomUUID();
      const keyId = randomUUID();
      seed.accountIds.push(accountId);
      seed.keyIds.push(keyId);
      accounts.push([accountId, 'ACCOUNT_BALANCE', o.creditsMinor, at]);
      keys.push([
        keyId,
        accountId,
        'OWNER',
        'seed',
        randomBytes(4).toString('hex'),
        randomBytes(32),
        'rent,read,billing',
        1_000_000_000,
        1_000_000_000,
        o.perAccount + 100,
        'seed',
        at,
        o.perAccount,
      ]);
      ledger.push([accountId, 'TOPUP', o.creditsMinor, o.creditsMinor, `seed:${accountId}`, 'seed credits', at]);
      for (let j = 0; j < o.perAccount; j++) {
        const orderId = randomUUID();
        const deploymentId = randomUUID();
        const started = o.startSpreadMs
          ? new Date(at.getTime() - ((seed.deploymentIds.length * 7919) % o.startSpreadMs))
          : at;
        seed.deploymentIds.push(deploymentId);
        orders.push([
          orderId,
          accountId,
          keyId,
          'CREDITS',
          'ACCOUNT_BALANCE',
          'ACTIVE',
          'OFFER',
          o.priceMinor,
          0,
          'USD',
          at,
          at,
        ]);
        deployments.push([
          deploymentId,
          orderId,
          accountId,
          keyId,
          'ACTIVE',
          'ACCOUNT_BALANCE',
          started,
          'local',
          o.priceMinor,
          started,
          0,
          at,
          at,
          at,
        ]);
      }
    }
    await ds.query(`INSERT INTO accounts (id, billing_model, balance_minor, created_at) VALUES ?`, [accounts]);
    await ds.query(
      `INSERT INTO api_keys (id, account_id, kind, name, prefix, secret_hash, scopes, max_per_rental_minor, budget_limit_minor, max_concurrent_deployments, origin, created_at, active_deployments) VALUES ?`,
      [keys],
    );
    await ds.query(
      `INSERT INTO ledger_entries (account_id, kind, amount_minor, balance_after_minor, external_ref, description, created_at) VALUES ?`,
      [ledger],
    );
    if (orders.length > 0) {
      await ds.query(
        `INSERT INTO orders (id, account_id, key_id, funding, billing_model, status, request_kind, hourly_price_minor, total_minor, currency, created_at, updated_at) VALUES ?`,
        [orders],
      );
      await ds.query(
        `INSERT INTO deployments (id, order_id, account_id, key_id, status, billing_model, started_at, provider_id, hourly_price_minor, metered_until, usage_minor, status_changed_at, created_at, updated_at) VALUES ?`,
        [deployments],
      );
    }
  }
  return seed;
}
