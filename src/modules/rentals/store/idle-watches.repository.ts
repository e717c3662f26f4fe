import type { Executor } from '../../../db/mysql-store.js';
import { KEY_IDLE_MINUTES, KEY_OF_ROW } from '../../accounts/account-joins.repository.js';
import type { Sql } from '../../../db/sql.js';

// The reads and writes of idle watching (`idle_watches`: per rental, how its GPU samples stand)
// and of the one `rental.expiring` moment of a rental with an end (`deployments.expiring_event_at`).
// Which rentals are idle, and when to warn or end them, is idle.ts's rule; this file only stores it.

/** Where a watched rental's samples stand; `idleSince` null: the last sample was busy, failed, or there was none. */
export interface IdleWatchState {
  sampledAt: Date;
  idleSince: Date | null;
  idleSamples: number;
  warnedAt: Date | null;
}

/** An ACTIVE rental whose key ends idle machines, with how to log in to it and its watch (null before the first sample). */
export interface WatchedRental {
  id: string;
  /** The rental's account: one account's machines may hold only its share of the sweep's samples. */
  accountId: string;
  idleTerminateMinutes: number;
  sshHost: string;
  sshPort: number;
  sshUser: string;
  sshPrivateKeyEnc: Buffer;
  sshKeyKid: string;
  /** Fingerprint of the host key pinned for the machine; null: none yet (the first sample that gets in pins it). */
  sshHostKey: string | null;
  watch: IdleWatchState | null;
}

interface WatchedRow {
  id: string;
  account_id: string;
  idle_terminate_minutes: number;
  ssh_host: string;
  ssh_port: number;
  ssh_user: string;
  ssh_private_key_enc: Buffer;
  ssh_key_kid: string;
  ssh_host_key: string | null;
  sampled_at: Date | null;
  idle_since: Date | null;
  idle_samples: number | null;
  warned_at: Date | null;
}

/**
 * ACTIVE rentals not being ended whose key carries `idle_terminate_minutes` and whose machine has
 * an SSH address, in one statement: the key's part is the accounts aggregate's (account-joins.repository.ts).
 */
export async function watchedRentals(ds: Executor): Promise<WatchedRental[]> {
  const rows: WatchedRow[] = await ds.query(
    `SELECT d.id, d.account_id, ${KEY_IDLE_MINUTES}, d.ssh_host, d.ssh_port, d.ssh_user, d.ssh_private_key_enc, d.ssh_key_kid, d.ssh_host_key,
            w.sampled_at, w.idle_since, w.idle_samples, w.warned_at
       FROM deployments d
       ${KEY_OF_ROW}
       LEFT JOIN idle_watches w ON w.deployment_id = d.id
      WHERE d.status = 'ACTIVE' AND d.terminate_requested_at IS NULL AND ${KEY_IDLE_MINUTES} IS NOT NULL
        AND d.ssh_host IS NOT NULL AND d.ssh_private_key_enc IS NOT NULL
      ORDER BY d.id`,
  );
  return rows.map((r) => ({
    id: r.id,
    accountId: r.account_id,
    idleTerminateMinutes: Number(r.idle_terminate_minutes),
    sshHost: r.ssh_host,
    sshPort: Number(r.ssh_port),
    sshUser: r.ssh_user,
    sshPrivateKeyEnc: r.ssh_private_key_enc,
    sshKeyKid: r.ssh_key_kid,
    sshHostKey: r.ssh_host_key,
    watch:
      r.sampled_at === null
        ? null
        : {
            sampledAt: r.sampled_at,
            idleSince: r.idle_since,
            idleSamples: Number(r.idle_samples),
            warnedAt: r.warned_at,
          },
  }));
}

/**
 * Stores a rental's watch after a sample, only if it is still the one read before sampling
 * (`prevSampledAt`, null: none stored): a concurrent sweep that sampled meanwhile wins, and this
 * sample is dropped. True when stored.
 */
export async function saveIdleWatch(
  m: Executor,
  deploymentId: string,
  prevSampledAt: Date | null,
  next: IdleWatchState,
): Promise<boolean> {
  const values = [next.sampledAt, next.idleSince, next.idleSamples, next.warnedAt];
  if (prevSampledAt === null) {
    const res: { affectedRows: number } = await m.query(
      `INSERT IGNORE INTO idle_watches (deployment_id, sampled_at, idle_since, idle_samples, warned_at) VALUES (?, ?, ?, ?, ?)`,
      [deploymentId, ...values],
    );
    return res.affectedRows === 1;
  }
  const res: { affectedRows: number } = await m.query(
    `UPDATE idle_watches SET sampled_at = ?, idle_since = ?, idle_samples = ?, warned_at = ? WHERE deployment_id = ? AND sampled_at = ?`,
    [...values, deploymentId, prevSampledAt],
  );
  return res.affectedRows === 1;
}

/** Drops the watches of rentals no longer ACTIVE (ended, or never to be sampled again). */
export async function forgetFinishedWatches(ds: Executor): Promise<void> {
  await ds.query(
    `DELETE w FROM idle_watches w JOIN deployments d ON d.id = w.deployment_id WHERE d.status <> 'ACTIVE'`,
  );
}

/** An ACTIVE rental with an end still ahead and no `rental.expiring` yet. */
export interface EndingRental {
  id: string;
  startedAt: Date;
  endsAt: Date;
}

/** ACTIVE rentals without their `rental.expiring` whose end lies after `now` and at or before `horizon`. */
export async function endingWithoutNotice(ds: Executor, now: Date, horizon: Date): Promise<EndingRental[]> {
  const rows: { id: string; started_at: Date; ends_at: Date }[] = await ds.query(
    `SELECT id, started_at, ends_at FROM deployments
      WHERE status = 'ACTIVE' AND ends_at IS NOT NULL AND started_at IS NOT NULL AND expiring_event_at IS NULL AND ends_at > ? AND ends_at <= ?`,
    [now, horizon],
  );
  return rows.map((r) => ({ id: r.id, startedAt: r.started_at, endsAt: r.ends_at }));
}

/**
 * Claims the rental's one `rental.expiring` in the caller's transaction: true only for the first
 * caller while the rental is ACTIVE (the row stays locked until the event is written with it).
 */
export async function claimExpiringNotice(m: Sql, deploymentId: string, at: Date): Promise<boolean> {
  const res: { affectedRows: number } = await m.query(
    // `status IN (...)`: this statement only reads the status (rental-state.ts alone writes it).
    `UPDATE deployments SET expiring_event_at = ? WHERE id = ? AND status IN ('ACTIVE') AND expiring_event_at IS NULL`,
    [at, deploymentId],
  );
  return res.affectedRows === 1;
}
