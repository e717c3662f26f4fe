import type { EntityManager } from 'typeorm';
import { readMinor } from '../../../db/columns.js';
import { derivedTable } from '../../../db/derived-table.js';
import { inTransaction } from '../../../db/transaction.js';
import type { Posting } from '../../billing/ledger.service.js';
import { Deployment } from '../deployment.entity.js';
import { isOneOf, METERED_BILLING_MODELS, METERED_STATUSES, type TerminationReason } from '../rental-status.js';
import { usageRef } from './labels.js';
import type { LifecycleDeps, LifecycleTiming } from './lifecycle-deps.js';

/** What accrual needs of a deployment. */
type Accruing = Pick<Deployment, 'startedAt' | 'hourlyPriceMinor' | 'spendCapMinor' | 'usageMinor' | 'meteredUntil'>;
/** A metered deployment as the sweep reads it. */
type Metered = Accruing & Pick<Deployment, 'id' | 'accountId' | 'keyId' | 'orderId' | 'terminateRequestedAt'>;

/** Usage owed from metered_until to `untilMs`, whole seconds since start, priced cumulatively so rounding never drifts. */
export function accrual(d: Accruing, untilMs: number): { amount: number; untilMs: number } {
  const start = d.startedAt!.getTime();
  const secs = Math.max(0, Math.floor((untilMs - start) / 1000));
  const end = start + secs * 1000;
  let total = Math.floor((secs * d.hourlyPriceMinor) / 3600);
  if (d.spendCapMinor !== null) total = Math.min(total, d.spendCapMinor);
  return { amount: Math.max(0, total - d.usageMinor), untilMs: Math.max(end, d.meteredUntil!.getTime()) };
}

function usagePosting(d: Metered, amount: number, untilMs: number): Posting {
  return { accountId: d.accountId, kind: 'USAGE', amountMinor: -amount, externalRef: usageRef(d.id, untilMs), description: `Usage of deployment ${d.id}`, keyId: d.keyId, rentalId: d.orderId };
}

/**
 * Metered billing: the periodic sweep posts usage of every ACTIVE or TERMINATING metered
 * deployment, account by account in short transactions, then ends rentals at a limit;
 * termination settles the rest.
 */
export class Metering {
  constructor(
    private readonly deps: Pick<LifecycleDeps, 'ds' | 'clock' | 'ledger'>,
    /** Starts termination for a limit reached (the termination part's `request`). */
    private readonly requestTermination: (deploymentId: string, reason: TerminationReason) => Promise<void>,
    private readonly timing: Pick<LifecycleTiming, 'meterChunkRentals'>,
  ) {}

  /** Usage from metered_until to `until` (capped at spend_cap), one ledger entry, in the caller's transaction. */
  async settleUsage(m: EntityManager, d: Deployment, until: Date): Promise<number> {
    const { amount, untilMs } = accrual(d, until.getTime());
    if (untilMs <= d.meteredUntil!.getTime()) return 0;
    if (amount > 0) await this.deps.ledger.post(m, usagePosting(d, amount, untilMs));
    await m.update(Deployment, { id: d.id }, { usageMinor: d.usageMinor + amount, meteredUntil: new Date(untilMs), updatedAt: this.deps.clock.now() });
    return amount;
  }

  /**
   * One sweep: reads the metered rentals without locking, charges them in chunks of whole
   * accounts (about `meterChunkRentals` rentals per transaction, so no lock is held for long and
   * the work grows linearly), then terminates rentals at a limit. Returns the ledger entries posted.
   */
  async meter(): Promise<number> {
    const nowMs = this.deps.clock.now().getTime();
    const rows: MeteredRow[] = await this.deps.ds.query(
      `SELECT id, account_id, key_id, order_id, hourly_price_minor, spend_cap_minor, usage_minor, started_at, metered_until, terminate_requested_at
         FROM deployments
        WHERE billing_model IN (?) AND status IN (?) AND metered_until IS NOT NULL AND started_at IS NOT NULL
        ORDER BY account_id, id`,
      [METERED_BILLING_MODELS, METERED_STATUSES],
    );
    let posted = 0;
    for (const chunk of chunksByAccount(rows.map(toMetered), this.timing.meterChunkRentals)) posted += await this.meterChunk(chunk, nowMs);
    await this.enforceLimits();
    return posted;
  }

  /**
   * One short transaction over a few accounts' rentals. Each rental is charged only if its
   * `metered_until` is still the one the sweep read (a concurrent sweep or a termination that
   * metered it since is left alone), re-read under lock and guarded again in the set-based
   * UPDATE; the ledger's unique `usage:<deployment>:<untilMs>` reference is the last guard.
   */
  private async meterChunk(chunk: Metered[], nowMs: number): Promise<number> {
    return inTransaction(this.deps.ds, async (m) => {
      const fresh: { id: string; status: string; usage_minor: string | number; metered_until: Date | null; terminate_requested_at: Date | null }[] = await m.query(
        `SELECT id, status, usage_minor, metered_until, terminate_requested_at FROM deployments WHERE id IN (?) ORDER BY id FOR UPDATE`,
        [chunk.map((d) => d.id)],
      );
      const byId = new Map(fresh.map((f) => [f.id, f]));
      const due: { d: Metered; amount: number; untilMs: number }[] = [];
      for (const read of chunk) {
        const f = byId.get(read.id);
        if (!f || !isOneOf(METERED_STATUSES, f.status) || f.metered_until?.getTime() !== read.meteredUntil!.getTime()) continue;
        const d: Metered = { ...read, usageMinor: readMinor(f.usage_minor), terminateRequestedAt: f.terminate_requested_at };
        const x = accrual(d, d.terminateRequestedAt ? Math.min(nowMs, d.terminateRequestedAt.getTime()) : nowMs);
        if (x.untilMs > d.meteredUntil!.getTime()) due.push({ d, ...x });
      }
      if (due.length === 0) return 0;
      const t = derivedTable(
        ['id', 'prev_until', 'amount', 'new_until'],
        due.map((x) => [x.d.id, x.d.meteredUntil, x.amount, new Date(x.untilMs)]),
      );
      const res: { affectedRows: number } = await m.query(
        `UPDATE deployments d JOIN (${t.sql}) v ON v.id = d.id
            SET d.usage_minor = d.usage_minor + v.amount, d.metered_until = CAST(v.new_until AS DATETIME(3)), d.updated_at = ?
          WHERE d.metered_until = CAST(v.prev_until AS DATETIME(3))`,
        [...t.params, this.deps.clock.now()],
      );
      // The rows are locked since the re-read, so every guard holds; anything else is a bug, not a race.
      if (res.affectedRows !== due.length) throw new Error(`metering guard: ${res.affectedRows} of ${due.length} deployments updated`);
      return this.deps.ledger.postBatch(m, due.filter((x) => x.amount > 0).map((x) => usagePosting(x.d, x.amount, x.untilMs)));
    });
  }

  /**
   * Terminates metered rentals at their spend cap, their key's budget, or the end of the account's
   * credits. One plain read (no locks) of the limits' counters: the key's net spend and the
   * account's balance, each a single column kept in step by LedgerService, whatever the ledger's size.
   */
  private async enforceLimits(): Promise<void> {
    const rows: LimitRow[] = await this.deps.ds.query(
      `SELECT d.id, d.spend_cap_minor, d.usage_minor, k.budget_limit_minor, k.net_spent_minor, a.balance_minor
         FROM deployments d JOIN api_keys k ON k.id = d.key_id JOIN accounts a ON a.id = d.account_id
        WHERE d.status = 'ACTIVE' AND d.billing_model IN (?)`,
      [METERED_BILLING_MODELS],
    );
    for (const r of rows) {
      const reason = limitReached(r);
      if (reason) await this.requestTermination(r.id, reason);
    }
  }
}

interface LimitRow {
  id: string;
  spend_cap_minor: string | number | null;
  usage_minor: string | number;
  budget_limit_minor: string | number;
  net_spent_minor: string | number;
  balance_minor: string | number;
}

/** THE metered limits, in the order they are reported: the rental's cap, its key's budget, the account's credits. */
function limitReached(r: LimitRow): TerminationReason | null {
  if (r.spend_cap_minor !== null && readMinor(r.usage_minor) >= readMinor(r.spend_cap_minor)) return 'SPEND_CAP';
  if (readMinor(r.budget_limit_minor) <= readMinor(r.net_spent_minor)) return 'KEY_BUDGET';
  if (readMinor(r.balance_minor) <= 0) return 'CREDITS';
  return null;
}

interface MeteredRow {
  id: string;
  account_id: string;
  key_id: string;
  order_id: string;
  hourly_price_minor: string | number;
  spend_cap_minor: string | number | null;
  usage_minor: string | number;
  started_at: Date;
  metered_until: Date;
  terminate_requested_at: Date | null;
}

function toMetered(r: MeteredRow): Metered {
  return {
    id: r.id,
    accountId: r.account_id,
    keyId: r.key_id,
    orderId: r.order_id,
    hourlyPriceMinor: readMinor(r.hourly_price_minor),
    spendCapMinor: r.spend_cap_minor === null ? null : readMinor(r.spend_cap_minor),
    usageMinor: readMinor(r.usage_minor),
    startedAt: r.started_at,
    meteredUntil: r.metered_until,
    terminateRequestedAt: r.terminate_requested_at,
  };
}

/**
 * Rentals sorted by account, cut into chunks of whole accounts of about `size` rentals (an
 * account with more rentals than that is a chunk of its own), so each account's balance moves
 * in exactly one transaction per sweep.
 */
export function* chunksByAccount<T extends { accountId: string }>(rows: readonly T[], size: number): Generator<T[]> {
  let chunk: T[] = [];
  for (let i = 0; i < rows.length; ) {
    let j = i;
    while (j < rows.length && rows[j].accountId === rows[i].accountId) j++;
    if (chunk.length > 0 && chunk.length + (j - i) > size) {
      yield chunk;
      chunk = [];
    }
    chunk.push(...rows.slice(i, j));
    i = j;
  }
  if (chunk.length > 0) yield chunk;
}
