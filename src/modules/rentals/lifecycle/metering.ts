import { sweepTimer } from '../../../metrics/outcomes.js';
import type { Posting, UsageAccrual } from '../../billing/ledger.service.js';
import type { Deployment } from '../store/deployment.entity.js';
import { isOneOf, METERED_BILLING_MODELS, METERED_STATUSES, type TerminationReason } from '../state/rental-status.js';
import type { MeteredLimits, MeteringState, SweptDeployment } from '../store/rentals.repository.js';
import { usageRef } from './labels.js';
import { trafficAccrual, trafficPosting } from './traffic.js';
import {
  METER_BUDGET_SHARE,
  meterPauseMs,
  type LifecycleDeps,
  type LifecycleRepos,
  type LifecycleTiming,
} from './lifecycle-deps.js';

/** What charging usage in a transaction writes through: the rental's row, the ledger and the account locks. */
export type UsageRepos = Pick<LifecycleRepos, 'rentals' | 'ledger' | 'accounts'>;

/** What accrual needs of a deployment; its traffic charged so far (`trafficMinor`) takes its share of the cap. */
type Accruing = Pick<
  Deployment,
  'startedAt' | 'hourlyPriceMinor' | 'spendCapMinor' | 'usageMinor' | 'meteredUntil' | 'endsAt' | 'terminateRequestedAt'
> &
  Partial<Pick<Deployment, 'trafficMinor'>>;

/**
 * THE end of what a rental is charged for, as of `untilMs`: never past its termination request,
 * nor past its end (`endsAt`, a lease or a purchase), however late the job that ends it runs.
 */
export function chargeEnd(d: Pick<Deployment, 'endsAt' | 'terminateRequestedAt'>, untilMs: number): number {
  return Math.min(untilMs, d.terminateRequestedAt?.getTime() ?? Infinity, d.endsAt?.getTime() ?? Infinity);
}

/**
 * Usage owed from metered_until to `untilMs` (cut at {@link chargeEnd}), whole seconds since start,
 * priced cumulatively so rounding never drifts.
 */
export function accrual(d: Accruing, untilMs: number): { amount: number; untilMs: number } {
  const start = d.startedAt!.getTime();
  const secs = Math.max(0, Math.floor((chargeEnd(d, untilMs) - start) / 1000));
  const end = start + secs * 1000;
  let total = Math.floor((secs * d.hourlyPriceMinor) / 3600);
  if (d.spendCapMinor !== null) total = Math.min(total, Math.max(0, d.spendCapMinor - (d.trafficMinor ?? 0)));
  return { amount: Math.max(0, total - d.usageMinor), untilMs: Math.max(end, d.meteredUntil!.getTime()) };
}

/** One rental-hour: usage reaches the ledger once per hour of a rental's time (docs/rentals-and-money.md). */
export const USAGE_POSTING_MS = 3600_000;

/** A rental's usage going into one ledger entry: `amount` cents of its time from `fromMs` to `toMs`. */
export interface UsagePost {
  amount: number;
  fromMs: number;
  toMs: number;
}

/** What the posting rule needs of a deployment. */
type Posted = Accruing & Pick<Deployment, 'postedUsageMinor' | 'postedUntil'>;

/**
 * THE hourly posting rule: once a rental's metering has passed the end of a rental-hour (counted
 * from its start), its usage up to that end, priced by {@link accrual}, goes into one entry (the
 * hours since the last entry together, if sweeps were missed); the part of the hour begun stays
 * unposted. Null while no hour has ended since the last entry.
 */
export function hourlyPost(d: Posted, meteredToMs: number): UsagePost | null {
  const start = d.startedAt!.getTime();
  const fromMs = (d.postedUntil ?? d.startedAt!).getTime();
  const toMs = start + Math.floor((meteredToMs - start) / USAGE_POSTING_MS) * USAGE_POSTING_MS;
  if (toMs <= fromMs) return null;
  const { amount } = accrual({ ...d, usageMinor: d.postedUsageMinor, meteredUntil: new Date(fromMs) }, toMs);
  return { amount, fromMs, toMs };
}

/** How an instant reads in a usage entry: UTC to the second, the date left out when `sameDayAs` shares it. */
function clockTime(ms: number, sameDayAs?: number): string {
  const iso = new Date(ms).toISOString();
  const time = iso.slice(11, 19);
  return sameDayAs !== undefined && new Date(sameDayAs).toISOString().slice(0, 10) === iso.slice(0, 10)
    ? time
    : `${iso.slice(0, 10)} ${time}`;
}

/** The ledger entry of `post`: its reference names the deployment and the instant it runs to, so a retried posting is refused. */
export function usagePosting(
  d: Pick<Deployment, 'id' | 'accountId' | 'keyId' | 'orderId'>,
  post: UsagePost,
  note?: string,
): Posting {
  return {
    accountId: d.accountId,
    kind: 'USAGE',
    amountMinor: -post.amount,
    externalRef: usageRef(d.id, post.toMs),
    description: `Usage of rental ${d.orderId}${note ? ` ${note}` : ''}, ${clockTime(post.fromMs)}–${clockTime(post.toMs, post.fromMs)} UTC`,
    keyId: d.keyId,
    rentalId: d.orderId,
  };
}

function usageAccrual(d: Pick<Deployment, 'accountId' | 'keyId'>, amount: number): UsageAccrual {
  return { accountId: d.accountId, keyId: d.keyId, amountMinor: amount };
}

/** What one sweep did: the rentals it charged, and the ledger entries it wrote (hourly postings). */
export interface SweepResult {
  charged: number;
  posted: number;
}

/**
 * Metered billing: the periodic sweep charges usage of every ACTIVE or TERMINATING metered
 * deployment to the second, account by account in short transactions, posts it to the ledger once
 * per rental-hour, then ends rentals at a limit; termination settles and posts the rest.
 */
export class Metering {
  constructor(
    private readonly deps: Pick<LifecycleDeps, 'store' | 'clock' | 'ledger'>,
    /** Starts termination for a limit reached (the termination part's `request`). */
    private readonly requestTermination: (deploymentId: string, reason: TerminationReason) => Promise<void>,
    private readonly timing: Pick<
      LifecycleTiming,
      'meterChunkRentals' | 'meterConcurrency' | 'meterPeriodMs' | 'meterBusyShare'
    >,
  ) {}

  /**
   * Charges usage from metered_until to `until` (capped at spend_cap) and posts everything the
   * ledger does not hold yet in one entry, in the caller's transaction, which holds the
   * deployment's lock. Returns the usage charged now.
   */
  async settleUsage(r: UsageRepos, d: Deployment, until: Date): Promise<number> {
    const x = accrual(d, until.getTime());
    const moved = x.untilMs > d.meteredUntil!.getTime();
    const amount = moved ? x.amount : 0;
    const usage = d.usageMinor + amount;
    const toMs = moved ? x.untilMs : d.meteredUntil!.getTime();
    const owed = usage - d.postedUsageMinor;
    const traffic = trafficAccrual(d, usage);
    const trafficTotal = d.trafficMinor + traffic;
    const trafficOwed = trafficTotal - d.postedTrafficMinor;
    if (!moved && owed === 0 && trafficOwed === 0) return 0;
    const posts = [
      ...(owed > 0 ? [usagePosting(d, { amount: owed, fromMs: (d.postedUntil ?? d.startedAt!).getTime(), toMs })] : []),
      ...(trafficOwed > 0 ? [trafficPosting(d, trafficOwed, toMs)] : []),
    ];
    const accruals = [
      ...(amount > 0 ? [usageAccrual(d, amount)] : []),
      ...(traffic > 0 ? [usageAccrual(d, traffic)] : []),
    ];
    await this.deps.ledger.accrueUsage(r, accruals, posts);
    await r.rentals.deployments.setMeteredUsage(
      d.id,
      {
        usageMinor: usage,
        meteredUntil: new Date(toMs),
        postedUsageMinor: usage,
        postedUntil: new Date(toMs),
        trafficMinor: trafficTotal,
        postedTrafficMinor: trafficTotal,
      },
      this.deps.clock.now(),
    );
    return amount + traffic;
  }

  /**
   * One sweep: reads the metered rentals without locking, charges them in chunks of whole
   * accounts (about `meterChunkRentals` rentals per transaction, so no lock is held for long and
   * the work grows linearly), `meterConcurrency` chunks at a time, then terminates rentals at a
   * limit. Chunks never share an account, so those in flight lock disjoint rows. A chunk that
   * fails stops the sweep: the chunks in flight finish, no new one starts, and the error is thrown.
   */
  async meter(): Promise<SweepResult> {
    const sweep = sweepTimer();
    const nowMs = this.deps.clock.now().getTime();
    const rows = await this.deps.store.read((r) =>
      r.rentals.metering.deployments(METERED_BILLING_MODELS, METERED_STATUSES),
    );
    const out: SweepResult = { charged: 0, posted: 0 };
    const chunks = chunksByAccount(rows, this.timing.meterChunkRentals);
    let failed: { err: unknown } | null = null;
    const lanes = Math.max(1, this.timing.meterConcurrency);
    const started = performance.now();
    let busyMs = 0;
    let done = 0;
    const lane = async () => {
      for (let next = chunks.next(); !next.done && !failed; next = chunks.next()) {
        const t0 = performance.now();
        try {
          const r = await this.meterChunk(next.value, nowMs);
          out.charged += r.charged;
          out.posted += r.posted;
        } catch (err) {
          failed ??= { err };
        }
        // Paced: the machine it shares with admissions is left to them between chunks.
        const chunkMs = performance.now() - t0;
        busyMs += chunkMs;
        done += next.value.length;
        const pause = meterPauseMs({
          chunkMs,
          busyShare: this.timing.meterBusyShare,
          elapsedMs: performance.now() - started,
          busyMs,
          done,
          total: rows.length,
          budgetMs: this.timing.meterPeriodMs * METER_BUDGET_SHARE,
          lanes,
          chunkRentals: this.timing.meterChunkRentals,
        });
        if (pause >= 1 && !failed) await new Promise((resolve) => setTimeout(resolve, pause));
      }
    };
    await Promise.all(Array.from({ length: lanes }, lane));
    if (failed) throw (failed as { err: unknown }).err;
    await this.enforceLimits();
    sweep(rows.length);
    return out;
  }

  /**
   * One short transaction over a few accounts' rentals, in three round trips: the rentals' and
   * accounts' row locks with what they hold; every write (one statement per table, the hourly
   * entries in one insert); COMMIT. A `credits.low` event adds two round trips for its account.
   * Each rental is charged from the metering moment read under its lock to the sweep's instant:
   * usage is priced cumulatively from the start, so a concurrent sweep or a termination that
   * metered it since the first read leaves nothing or only the rest to charge (a rental that
   * ended is skipped by its status). The set-based UPDATE charges a row only if that moment is
   * still the one read under lock, and the ledger's unique `usage:<deployment>:<untilMs>`
   * reference is the last guard.
   */
  private meterChunk(chunk: SweptDeployment[], nowMs: number): Promise<SweepResult> {
    return this.deps.store.pipelined(async (r) => {
      // Issued in one tick: one request, deployments locked before accounts (termination's order too).
      const [fresh, money] = await Promise.all([
        r.rentals.metering.lock(chunk.map((d) => d.id)),
        r.accounts.lockAccountBalances(chunk.map((d) => d.accountId)),
      ]);
      const due: {
        d: MeteringState;
        amount: number;
        untilMs: number;
        post: UsagePost | null;
        traffic: number;
        /** Traffic posted with this sweep's hourly entry: all the rental's traffic charged by then. */
        trafficPost: number;
      }[] = [];
      for (const d of fresh) {
        if (!isOneOf(METERED_STATUSES, d.status) || !d.meteredUntil || !d.startedAt) continue;
        const x = accrual(d, nowMs);
        // Traffic read since the last sweep is charged even when no time has passed.
        const moved = x.untilMs > d.meteredUntil.getTime();
        const amount = moved ? x.amount : 0;
        const traffic = trafficAccrual(d, d.usageMinor + amount);
        if (!moved && traffic === 0) continue;
        const untilMs = moved ? x.untilMs : d.meteredUntil.getTime();
        const post = moved ? hourlyPost(d, untilMs) : null;
        const trafficPost = post ? d.trafficMinor + traffic - d.postedTrafficMinor : 0;
        due.push({ d, amount, untilMs, post, traffic, trafficPost });
      }
      if (due.length === 0) return { charged: 0, posted: 0 };
      // Not awaited before the ledger's writes are issued: all of them travel in one request.
      const charging = r.rentals.metering.charge(
        due.map(({ d, amount, untilMs, post, traffic, trafficPost }) => ({
          id: d.id,
          prevUntil: d.meteredUntil!,
          amount,
          newUntil: new Date(untilMs),
          postedUsage: d.postedUsageMinor + (post?.amount ?? 0),
          postedUntil: post ? new Date(post.toMs) : d.postedUntil,
          traffic,
          postedTraffic: d.postedTrafficMinor + trafficPost,
        })),
      );
      const posting = this.deps.ledger.accrueUsage(
        r,
        due.filter((x) => x.amount + x.traffic > 0).map((x) => usageAccrual(x.d, x.amount + x.traffic)),
        [
          ...due.filter((x) => x.post && x.post.amount > 0).map((x) => usagePosting(x.d, x.post!)),
          ...due.filter((x) => x.trafficPost > 0).map((x) => trafficPosting(x.d, x.trafficPost, x.post!.toMs)),
        ],
        money,
      );
      const [charged, posted] = await Promise.all([charging, posting]);
      // The rows are locked since the re-read, so every guard holds; anything else is a bug, not a race.
      if (charged !== due.length) throw new Error(`metering guard: ${charged} of ${due.length} deployments updated`);
      return { charged, posted };
    });
  }

  /**
   * Terminates metered rentals at their spend cap, their key's budget, or the end of the account's
   * credits. One plain read (no locks) of the limits' counters: the key's net spend and the
   * account's balance, each a single column kept in step by LedgerService, whatever the ledger's size.
   */
  private async enforceLimits(): Promise<void> {
    const rows = await this.deps.store.read((r) => r.rentals.metering.activeLimits(METERED_BILLING_MODELS));
    for (const r of rows) {
      const reason = limitReached(r);
      if (reason) await this.requestTermination(r.id, reason);
    }
    // Rentals past their end (a lease on any billing model, a prepaid purchase) end within one
    // metering period even if their own expiry job was lost.
    const overdue = await this.deps.store.read((r) => r.rentals.deployments.overdue(this.deps.clock.now()));
    for (const id of overdue) await this.requestTermination(id, 'EXPIRED');
  }
}

/** THE metered limits, in the order they are reported: the rental's cap, its key's budget, the account's credits. */
function limitReached(r: MeteredLimits): TerminationReason | null {
  if (r.spendCapMinor !== null && r.usageMinor + r.trafficMinor >= r.spendCapMinor) return 'SPEND_CAP';
  if (r.budgetLimitMinor <= r.netSpentMinor) return 'KEY_BUDGET';
  if (r.balanceMinor <= 0) return 'CREDITS';
  return null;
}

/**
 * Rentals sorted by account, cut into chunks of whole accounts of about `size` rentals (an
 * account with more rentals than that is a chunk of its own), so each account's balance moves
 * in exactly one transaction per sweep.
 */
export function* chunksByAccount<T extends { accountId: string }>(
  rows: readonly T[],
  size: number,
): Generator<T[], void, undefined> {
  let chunk: T[] = [];
  for (let i = 0; i < rows.length;) {
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
