/*
 * The yardstick for `bench:rentals`: a metered admission by offer id written by hand with mysql2,
 * with no HTTP, no authentication, no validation and no ORM, sending what the service sends (the
 * statements test/api/rentals-admission.test.ts pins, recorded with test/helpers/sql-requests.ts)
 * in the same three round trips:
 *
 *   1. START TRANSACTION; the account row's lock_version write (so admissions on two nodes of a
 *      cluster conflict); the account row lock with the key's counters and revocation; the
 *      idempotency claim (INSERT IGNORE, with the request's SHA-256 and the rental's id); the
 *      account's live metered rentals, for the reservations
 *   2. the order row; the deployment row; the key's slot counter; the provision job row
 *   3. COMMIT
 *
 * The order, deployment and job rows carry every column the service writes, with the same values,
 * and values are escaped into the text on the client as the service's are (mysql2's format). The
 * checks between the first and second round trip (claim, frozen, revoked, credits against the
 * reservations, the key's budget and slots) are the ones admission makes, written inline.
 */
import { createHash, randomUUID } from 'node:crypto';
import mysql from 'mysql2/promise';
import type { Offer } from '../src/modules/inventory/offer.entity.js';
import type { Client } from './bench-types.js';

/** Statements per admission, BEGIN and COMMIT included, as the service sends them. */
export const RAW_STATEMENTS_PER_ADMISSION = 10;
/** Requests to the server per admission. */
export const RAW_ROUND_TRIPS_PER_ADMISSION = 3;

/** The pool the raw side runs on: the service's pool settings, multi-statement requests included. */
export function rawPool(databaseUrl: string, connectionLimit: number): mysql.Pool {
  return mysql.createPool({
    uri: databaseUrl,
    connectionLimit,
    timezone: 'Z',
    supportBigNumbers: true,
    bigNumberStrings: false,
    multipleStatements: true,
    trace: false,
  });
}

/** The limits of the bench's keys (bench/support.ts, makeClients). */
const KEY_BUDGET_MINOR = 100_000_000;
const KEY_MAX_CONCURRENT = 100_000;

/** One admission (of rental `rentalId`); resolves to a failure label or null. Retries a deadlock as the service does. */
export async function rawAdmission(
  pool: mysql.Pool,
  c: Client,
  offer: Offer,
  counter: { deadlocks: number },
  rentalId: string = randomUUID(),
): Promise<string | null> {
  for (let attempt = 1; ; attempt++) {
    const conn = await pool.getConnection();
    try {
      return await admitOnce(conn, c, offer, rentalId);
    } catch (err) {
      await conn.query('ROLLBACK');
      if ((err as { code?: string }).code !== 'ER_LOCK_DEADLOCK' || attempt >= 8)
        return `raw ${(err as { code?: string }).code ?? 'error'}`;
      counter.deadlocks++;
    } finally {
      conn.release();
    }
  }
}

const WRITE_LOCK = `UPDATE accounts SET lock_version = lock_version + 1 WHERE id = ?`;
const LOCK = `SELECT a.id, a.billing_model, a.balance_minor, a.frozen, k.net_spent_minor, k.active_deployments, k.revoked_at
         FROM accounts a STRAIGHT_JOIN api_keys k ON k.id = ? AND k.account_id = a.id
        WHERE a.id = ? FOR UPDATE`;
const CLAIM = `INSERT IGNORE INTO idempotency_records (scope, idem_key, request_hash, resource_id, created_at) VALUES (?, ?, ?, ?, ?)`;
const RESERVING = `SELECT hourly_price_minor, spend_cap_minor, usage_minor, key_id FROM deployments
      WHERE account_id = ? AND billing_model IN ('ACCOUNT_BALANCE', 'MAX_SPEND_METERED') AND status IN ('PENDING', 'PROVISIONING', 'ACTIVE', 'TERMINATING')`;
const ORDER = `INSERT INTO \`orders\` (\`id\`, \`account_id\`, \`key_id\`, \`funding\`, \`billing_model\`, \`status\`, \`request_kind\`, \`offer_id\`, \`gpu_model\`, \`gpu_slug\`, \`gpu_count\`, \`max_hourly_price_minor\`, \`match_note\`, \`candidate_offer_ids\`, \`budget_minor\`, \`hourly_price_minor\`, \`duration_seconds\`, \`total_minor\`, \`currency\`, \`failure_code\`, \`failure_reason\`, \`reversal_status\`, \`created_at\`, \`updated_at\`, \`machine_image\`, \`machine_env_names\`, \`machine_ports\`, \`machine_disk_gb\`, \`machine_secrets_enc\`, \`machine_secrets_kid\`, \`startup_script_sha256\`, \`terminate_after_seconds\`, \`wait_for_capacity_until\`) VALUES (?, ?, ?, 'CREDITS', 'ACCOUNT_BALANCE', 'PENDING', 'OFFER', ?, NULL, NULL, NULL, NULL, NULL, ?, NULL, ?, NULL, 0, ?, NULL, NULL, NULL, ?, ?, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`;
const DEPLOYMENT = `INSERT INTO \`deployments\` (\`id\`, \`order_id\`, \`account_id\`, \`key_id\`, \`status\`, \`billing_model\`, \`hours_purchased\`, \`duration_seconds\`, \`started_at\`, \`ends_at\`, \`ended_at\`, \`provider_id\`, \`offer_id\`, \`hourly_price_minor\`, \`spend_cap_minor\`, \`attempt\`, \`label\`, \`instance_id\`, \`ssh_host\`, \`ssh_port\`, \`ssh_user\`, \`ssh_public_key\`, \`ssh_private_key_enc\`, \`ssh_key_kid\`, \`metered_until\`, \`usage_minor\`, \`terminate_requested_at\`, \`termination_reason\`, \`verify_attempts\`, \`last_check_detail\`, \`status_changed_at\`, \`created_at\`, \`updated_at\`, \`phase\`, \`phase_since\`, \`endpoints\`, \`lease_seconds\`) VALUES (?, ?, ?, ?, 'PENDING', 'ACCOUNT_BALANCE', NULL, NULL, NULL, NULL, NULL, ?, ?, ?, ?, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, 0, NULL, ?, ?, ?, NULL, NULL, NULL, NULL)`;
const SLOT = `UPDATE api_keys SET active_deployments = active_deployments + 1 WHERE id = ?`;
const JOB = `INSERT INTO agenda_jobs (name, priority, next_run_at, type, repeat_timezone, repeat_interval, data, repeat_at,
       disabled, fork, last_modified_by, debounce_started_at, start_date, end_date, skip_days, unique_key)
     VALUES ('rental.provision', 0, ?, 'normal', NULL, NULL, ?, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, ?)`;

/** A request of several statements, its values escaped on the client as the service's are. */
function batch(conn: mysql.PoolConnection, parts: [string, unknown[]][]): string {
  return parts.map(([sql, values]) => conn.format(sql, values)).join(';\n');
}

/** The hash the service stores with a claim: SHA-256 of the request's canonical JSON (keys sorted). */
function requestHash(offerId: string, keyId: string): string {
  return createHash('sha256')
    .update(JSON.stringify({ keyId, kind: 'OFFER', offerId }), 'utf8')
    .digest('hex');
}

async function admitOnce(
  conn: mysql.PoolConnection,
  c: Client,
  offer: Offer,
  rentalId: string,
): Promise<string | null> {
  const now = new Date();
  const deploymentId = randomUUID();
  const price = offer.pricePerHourMinor;
  const spendCap = 1_000_000;
  const [results] = await conn.query(
    batch(conn, [
      ['START TRANSACTION', []],
      [WRITE_LOCK, [c.accountId]],
      [LOCK, [c.keyId, c.accountId]],
      [CLAIM, [`rental:${c.accountId}`, randomUUID(), requestHash(offer.id, c.keyId), rentalId, now]],
      [RESERVING, [c.accountId]],
    ]),
  );
  const [, , [account], claim, live] = results as unknown as [
    mysql.ResultSetHeader,
    mysql.ResultSetHeader,
    mysql.RowDataPacket[],
    mysql.ResultSetHeader,
    mysql.RowDataPacket[],
  ];
  if (!account) throw Object.assign(new Error('no account'), { code: 'NO_ACCOUNT' });
  if (claim.affectedRows !== 1) return rollback(conn, 'raw replay');
  if (account.frozen || account.revoked_at !== null) return rollback(conn, 'raw refused');
  let accountReserved = 0;
  let keyReserved = 0;
  for (const r of live) {
    const outstanding = Math.max(
      0,
      Math.min(Number(r.hourly_price_minor), r.spend_cap_minor === null ? Infinity : Number(r.spend_cap_minor)) -
        Number(r.usage_minor),
    );
    accountReserved += outstanding;
    if (r.key_id === c.keyId) keyReserved += outstanding;
  }
  const needed = Math.min(price, spendCap);
  if (Number(account.balance_minor) - accountReserved < needed) return rollback(conn, 'raw INSUFFICIENT_CREDITS');
  // The key's limits, as the service holds them from authentication: the ones makeClients gives.
  if (Number(account.net_spent_minor) + keyReserved + needed > KEY_BUDGET_MINOR) return rollback(conn, 'raw BUDGET');
  if (Number(account.active_deployments) >= KEY_MAX_CONCURRENT) return rollback(conn, 'raw SLOTS');
  await conn.query(
    batch(conn, [
      [ORDER, [rentalId, c.accountId, c.keyId, offer.id, JSON.stringify([offer.id]), price, offer.currency, now, now]],
      [
        DEPLOYMENT,
        [deploymentId, rentalId, c.accountId, c.keyId, offer.provider, offer.id, price, spendCap, now, now, now],
      ],
      [SLOT, [c.keyId]],
      [JOB, [now, JSON.stringify({ deploymentId }), deploymentId]],
    ]),
  );
  await conn.query('COMMIT');
  return null;
}

async function rollback(conn: mysql.PoolConnection, label: string): Promise<string> {
  await conn.query('ROLLBACK');
  return label;
}
