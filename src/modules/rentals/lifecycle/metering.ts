import type { EntityManager } from 'typeorm';
import { inTransaction } from '../../../db/transaction.js';
import type { Posting } from '../../billing/ledger.service.js';
import type { Deployment } from '../deployment.entity.js';
import { isOneOf, METERED_BILLING_MODELS, METERED_STATUSES, type TerminationReason } from '../rental-status.js';
import {
  activeMeteredLimits,
  chargeUsage,
  lockMeteringStates,
  meteredDeployments,
  setMeteredUsage,
  overdueDeployments,
  type MeteredDeployment as Metered,
  type MeteredLimits,
} from '../deployments.repository.js';
import { usageRef } from './labels.js';
import type { LifecycleDeps, LifecycleTiming } from './lifecycle-deps.js';

/** What accrual needs of a deployment. */
type Accruing = Pick<Deployment, 'startedAt' | 'hourlyPriceMinor' | 'spendCapMinor' | 'usageMinor' | 'meteredUntil'>;

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
    await setMeteredUsage(m, d.id, d.usageMinor + amount, new Date(untilMs), this.deps.clock.now());
    return amount;
  }

  /**
   * One sweep: reads the metered rentals without locking, charges them in chunks of whole
   * accounts (about `meterChunkRentals` rentals per transaction, so no lock is held for long and
   * the work grows linearly), then terminates rentals at a limit. Returns the ledger entries posted.
   */
  async meter(): Promise<number> {
    const nowMs = this.deps.clock.now().getTime();
    const rows = await meteredDeployments(this.deps.ds, METERED_BILLING_MODELS, METERED_STATUSES);
    let posted = 0;
    for (const chunk of chunksByAccount(rows, this.timing.meterChunkRentals)) posted += await this.meterChunk(chunk, nowMs);
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
      const fresh = await lockMeteringStates(m, chunk.map((d) => d.id));
      const byId = new Map(fresh.map((f) => [f.id, f]));
      const due: { d: Metered; amount: number; untilMs: number }[] = [];
      for (const read of chunk) {
        const f = byId.get(read.id);
        if (!f || !isOneOf(METERED_STATUSES, f.status) || f.meteredUntil?.getTime() !== read.meteredUntil!.getTime()) continue;
        const d: Metered = { ...read, usageMinor: f.usageMinor, terminateRequestedAt: f.terminateRequestedAt };
        const x = accrual(d, d.terminateRequestedAt ? Math.min(nowMs, d.terminateRequestedAt.getTime()) : nowMs);
        if (x.untilMs > d.meteredUntil!.getTime()) due.push({ d, ...x });
      }
      if (due.length === 0) return 0;
      const charged = await chargeUsage(
        m,
        due.map((x) => ({ id: x.d.id, prevUntil: x.d.meteredUntil!, amount: x.amount, newUntil: new Date(x.untilMs) })),
        this.deps.clock.now(),
      );
      // The rows are locked since the re-read, so every guard holds; anything else is a bug, not a race.
      if (charged !== due.length) throw new Error(`metering guard: ${charged} of ${due.length} deployments updated`);
      return this.deps.ledger.postBatch(m, due.filter((x) => x.amount > 0).map((x) => usagePosting(x.d, x.amount, x.untilMs)));
    });
  }

  /**
   * Terminates metered rentals at their spend cap, their key's budget, or the end of the account's
   * credits. One plain read (no locks) of the limits' counters: the key's net spend and the
   * account's balance, each a single column kept in step by LedgerService, whatever the ledger's size.
   */
  private async enforceLimits(): Promise<void> {
    const rows = await activeMeteredLimits(this.deps.ds, METERED_BILLING_MODELS);
    for (const r of rows) {
      const reason = limitReached(r);
      if (reason) await this.requestTermination(r.id, reason);
    }
    // Rentals past their end (a lease on any billing model, a prepaid purchase) end within one
    // metering period even if their own expiry job was lost.
    for (const id of await overdueDeployments(this.deps.ds, this.deps.clock.now())) await this.requestTermination(id, 'EXPIRED');
  }
}

/** THE metered limits, in the order they are reported: the rental's cap, its key's budget, the account's credits. */
function limitReached(r: MeteredLimits): TerminationReason | null {
  if (r.spendCapMinor !== null && r.usageMinor >= r.spendCapMinor) return 'SPEND_CAP';
  if (r.budgetLimitMinor <= r.netSpentMinor) return 'KEY_BUDGET';
  if (r.balanceMinor <= 0) return 'CREDITS';
  return null;
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
