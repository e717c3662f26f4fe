import type { EntityManager } from 'typeorm';
import { readMinor } from '../../../db/columns.js';
import { inTransaction } from '../../../db/transaction.js';
import type { Posting } from '../../billing/ledger.service.js';
import { Deployment } from '../deployment.entity.js';
import { METERED_BILLING_MODELS, METERED_STATUSES, type TerminationReason } from '../rental-state.js';
import { usageRef } from './labels.js';
import type { LifecycleDeps } from './lifecycle-deps.js';

/** Usage owed from metered_until to `untilMs`, whole seconds since start, priced cumulatively so rounding never drifts. */
export function accrual(d: Deployment, untilMs: number): { amount: number; untilMs: number } {
  const start = d.startedAt!.getTime();
  const secs = Math.max(0, Math.floor((untilMs - start) / 1000));
  const end = start + secs * 1000;
  let total = Math.floor((secs * d.hourlyPriceMinor) / 3600);
  if (d.spendCapMinor !== null) total = Math.min(total, d.spendCapMinor);
  return { amount: Math.max(0, total - d.usageMinor), untilMs: Math.max(end, d.meteredUntil!.getTime()) };
}

function usagePosting(d: Deployment, amount: number, untilMs: number): Posting {
  return { accountId: d.accountId, kind: 'USAGE', amountMinor: -amount, externalRef: usageRef(d.id, untilMs), description: `Usage of deployment ${d.id}`, keyId: d.keyId, rentalId: d.orderId };
}

/**
 * Metered billing: the periodic sweep posts usage of every ACTIVE or TERMINATING metered
 * deployment (one ledger batch), then ends rentals at a limit; termination settles the rest.
 */
export class Metering {
  constructor(
    private readonly deps: Pick<LifecycleDeps, 'ds' | 'clock' | 'ledger'>,
    /** Starts termination for a limit reached (the termination part's `request`). */
    private readonly requestTermination: (deploymentId: string, reason: TerminationReason) => Promise<void>,
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
   * One sweep: usage up to now (or up to the termination request) in a handful of statements,
   * then terminates rentals at a limit. Returns the number of ledger entries posted.
   */
  async meter(): Promise<number> {
    const nowMs = this.deps.clock.now().getTime();
    const posted = await inTransaction(this.deps.ds, async (m) => {
      const rows: Deployment[] = await m
        .getRepository(Deployment)
        .createQueryBuilder('d')
        .setLock('pessimistic_write')
        .where('d.billing_model IN (:...models) AND d.status IN (:...st) AND d.metered_until IS NOT NULL AND d.started_at IS NOT NULL', {
          models: METERED_BILLING_MODELS,
          st: METERED_STATUSES,
        })
        .orderBy('d.id')
        .getMany();
      const due = rows
        .map((d) => ({ d, ...accrual(d, d.terminateRequestedAt ? Math.min(nowMs, d.terminateRequestedAt.getTime()) : nowMs) }))
        .filter((x) => x.untilMs > x.d.meteredUntil!.getTime());
      if (due.length === 0) return 0;
      const count = await this.deps.ledger.postBatch(
        m,
        due.filter((x) => x.amount > 0).map((x) => usagePosting(x.d, x.amount, x.untilMs)),
      );
      await m.query(
        `UPDATE deployments SET
           usage_minor = usage_minor + CASE id ${due.map(() => 'WHEN ? THEN ?').join(' ')} END,
           metered_until = CASE id ${due.map(() => 'WHEN ? THEN ?').join(' ')} END
         WHERE id IN (?)`,
        [...due.flatMap((x) => [x.d.id, x.amount]), ...due.flatMap((x) => [x.d.id, new Date(x.untilMs)]), due.map((x) => x.d.id)],
      );
      return count;
    });
    await this.enforceLimits();
    return posted;
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
