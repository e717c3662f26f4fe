/*
 * The yardstick for `bench:rentals`: a metered admission by offer id written by hand with
 * mysql2, the same transaction shape the service runs (account and key counters locked in one
 * read, idempotency claim with its resource, the account's live metered rentals for the
 * reservation, order, deployment, slot counter, provision job row, one commit), with no HTTP,
 * no authentication and no ORM.
 */
import { createHash, randomUUID } from 'node:crypto';
import mysql from 'mysql2/promise';
import type { Offer } from '../src/modules/inventory/offer.entity.js';
import type { Client } from './support.js';

export const RAW_STATEMENTS_PER_ADMISSION = 9;

export function rawPool(databaseUrl: string, connectionLimit: number): mysql.Pool {
  return mysql.createPool({ uri: databaseUrl, connectionLimit, timezone: 'Z', supportBigNumbers: true, trace: false });
}

/** One admission; resolves to a failure label or null. Retries a deadlock as the service does. */
export async function rawAdmission(pool: mysql.Pool, c: Client, offer: Offer, counter: { deadlocks: number }): Promise<string | null> {
  for (let attempt = 1; ; attempt++) {
    const conn = await pool.getConnection();
    try {
      return await admitOnce(conn, c, offer);
    } catch (err) {
      await conn.query('ROLLBACK');
      if ((err as { code?: string }).code !== 'ER_LOCK_DEADLOCK' || attempt >= 4) return `raw ${(err as { code?: string }).code ?? 'error'}`;
      counter.deadlocks++;
    } finally {
      conn.release();
    }
  }
}

async function admitOnce(conn: mysql.PoolConnection, c: Client, offer: Offer): Promise<string | null> {
  const now = new Date();
  const rentalId = randomUUID();
  const deploymentId = randomUUID();
  await conn.query('START TRANSACTION');
  const [accounts] = await conn.query<mysql.RowDataPacket[]>(
    `SELECT a.id, a.billing_model, a.balance_minor, a.frozen, k.net_spent_minor, k.active_deployments
       FROM accounts a INNER JOIN api_keys k ON k.id = ? WHERE a.id = ? FOR UPDATE`,
    [c.keyId, c.accountId],
  );
  if (accounts.length !== 1) throw Object.assign(new Error('no account'), { code: 'NO_ACCOUNT' });
  const hash = createHash('sha256').update(`${offer.id}:${c.keyId}`).digest('hex');
  await conn.query(`INSERT IGNORE INTO idempotency_records (scope, idem_key, request_hash, resource_id, created_at) VALUES (?, ?, ?, ?, ?)`, [
    `rental:${c.accountId}`, randomUUID(), hash, rentalId, now,
  ]);
  const [live] = await conn.query<mysql.RowDataPacket[]>(
    `SELECT hourly_price_minor, spend_cap_minor, usage_minor FROM deployments WHERE account_id = ? AND billing_model IN (?) AND status IN (?)`,
    [c.accountId, ['ACCOUNT_BALANCE', 'MAX_SPEND_METERED'], ['PENDING', 'PROVISIONING', 'ACTIVE', 'TERMINATING']],
  );
  const reserved = live.reduce((n, r) => n + Math.max(0, Number(r.hourly_price_minor) - Number(r.usage_minor)), 0);
  if (Number(accounts[0].balance_minor) - reserved < offer.pricePerHourMinor) {
    await conn.query('ROLLBACK');
    return 'raw INSUFFICIENT_CREDITS';
  }
  await conn.query(
    `INSERT INTO orders (id, account_id, key_id, funding, billing_model, status, request_kind, offer_id, candidate_offer_ids, hourly_price_minor, total_minor, currency, created_at, updated_at)
     VALUES (?, ?, ?, 'CREDITS', 'ACCOUNT_BALANCE', 'PENDING', 'OFFER', ?, ?, ?, 0, ?, ?, ?)`,
    [rentalId, c.accountId, c.keyId, offer.id, JSON.stringify([offer.id]), offer.pricePerHourMinor, offer.currency, now, now],
  );
  await conn.query(
    `INSERT INTO deployments (id, order_id, account_id, key_id, status, billing_model, provider_id, offer_id, hourly_price_minor, spend_cap_minor, usage_minor, status_changed_at, created_at, updated_at)
     VALUES (?, ?, ?, ?, 'PENDING', 'ACCOUNT_BALANCE', ?, ?, ?, 1000000, 0, ?, ?, ?)`,
    [deploymentId, rentalId, c.accountId, c.keyId, offer.provider, offer.id, offer.pricePerHourMinor, now, now, now],
  );
  await conn.query(`UPDATE api_keys SET active_deployments = active_deployments + 1 WHERE id = ?`, [c.keyId]);
  await conn.query(
    `INSERT INTO agenda_jobs (name, priority, next_run_at, type, data, disabled, fork, unique_key) VALUES ('rental.provision', 0, ?, 'normal', ?, 0, 0, ?)`,
    [now, JSON.stringify({ deploymentId }), deploymentId],
  );
  await conn.query('COMMIT');
  return null;
}
