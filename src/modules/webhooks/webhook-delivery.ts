import { randomUUID } from 'node:crypto';
import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import type { JobQueue, JobWakeUp } from '../../jobs/job-queue.js';
import type { Logger } from '../../logger.js';
import type { SecretBox } from '../credentials/secret-box.js';
import { visibleEvent, type StoredEvent } from '../events/events.repository.js';
import { shownEventId, toEventDto } from '../events/events.service.js';
import {
  DestinationRefused,
  postPinned,
  POST_LIMITS,
  systemResolver,
  type PostLimits,
  type Resolver,
} from './destination.js';
import type { FanOutRepositories, WebhookEventLog } from './webhook-events.js';
import { signedHeaders } from './webhook-signing.js';
import type { TakeResult, TryToTake } from './webhook-slots.repository.js';
import { secretBinding, viewerOfEndpoint } from './webhooks.service.js';
import type { StoredEndpoint, TryOutcome } from './webhooks.repository.js';

/** Accounts a revival pass looks at. */
const BATCH = 200;
const HOUR_MS = 3600_000;
/** Retries stop this long after the first try. */
const GIVE_UP_AFTER_MS = 24 * HOUR_MS;
/** A pending delivery this late past its next try has its job enqueued again by the dispatcher (a worker died holding it). */
const OVERDUE_MS = 60_000;

/**
 * Tries one account may have in flight at once, across every worker (each worker runs 10): an
 * account whose receivers never answer holds at most these for their 10 seconds, and the other
 * slots stay free for every other account. The account's other deliveries wait their turn.
 */
export const TRIES_IN_FLIGHT_PER_ACCOUNT = 3;

export interface WebhookDeliveryOptions {
  allowPrivateDestinations: boolean;
  /** Wait before the first retry; each later wait doubles, up to an hour. */
  firstRetryMs: number;
  limits?: PostLimits;
  /** How hosts are resolved (tests answer from a table; the system resolver otherwise). */
  resolve?: Resolver;
  /** How a try is sent (the unit tier records them; {@link postPinned} otherwise). */
  post?: typeof postPinned;
}

/** The endpoints that receive `event`: made before it, asking for its type, and allowed to see it. */
function targetsOf(endpoints: StoredEndpoint[], event: StoredEvent): StoredEndpoint[] {
  return endpoints.filter(
    (e) =>
      BigInt(event.id) > BigInt(e.afterEventId) &&
      e.eventTypes.includes(event.type) &&
      visibleEvent(viewerOfEndpoint(e), event),
  );
}

const accountsOf = (events: readonly StoredEvent[]): string[] => [...new Set(events.map((e) => e.accountId))];

/** One dispatch pass: the deliveries it made, and the jobs each account may still be given in it. */
interface DispatchPass {
  made: number;
  jobsLeft: Map<string, number>;
}

/** What one run of a delivery job did; `deferred`: its account had every slot in flight, so it waits its turn. */
export type DeliveryRun = 'succeeded' | 'retrying' | 'failed' | 'skipped' | 'deferred';

/**
 * Sending events to webhook endpoints, as jobs of the worker role: `dispatch` (repeating) fans
 * each new event out to the endpoints that may see it and asked for its type, as a consumer of the
 * event log (events/event-tail.ts, cursor `webhooks`), writing one delivery per endpoint in the
 * transaction that moves the cursor past its batch, and a `webhooks.deliver` job for
 * as many of each account's as it may have in flight; `deliver` makes one signed try, schedules
 * the next after a failure, and hands its account's slot to the account's next waiting delivery.
 * Every try of a delivery carries the event id as `webhook-id`, so a receiver can drop what it
 * already has.
 */
export class WebhookDeliveries {
  private readonly limits: PostLimits;
  private readonly resolve: Resolver;
  /** Where the next revival pass starts in account order, so each pass looks at other accounts. */
  private reviveAfter = '';
  private readonly post: typeof postPinned;

  constructor(
    private readonly store: Store<FanOutRepositories>,
    /** The event log: its events, and the dispatcher's cursor in it. */
    private readonly events: WebhookEventLog,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly jobs: JobQueue,
    private readonly box: SecretBox,
    private readonly opts: WebhookDeliveryOptions,
  ) {
    this.limits = opts.limits ?? POST_LIMITS;
    this.resolve = opts.resolve ?? systemResolver;
    this.post = opts.post ?? postPinned;
  }

  /**
   * Fans out every event after the cursor (and those that committed late below it, by the tail's
   * rule); revives overdue deliveries first. Reads only the endpoints of the accounts whose events
   * it fans out. Answers how many deliveries it made.
   */
  async dispatch(): Promise<number> {
    await this.revive();
    const pass: DispatchPass = { made: 0, jobsLeft: new Map() };
    await this.events.drainDispatch((events) => this.fanOut(events, pass));
    return pass.made;
  }

  /**
   * One delivery per target of each event, and a job for each while its account has jobs left in
   * this pass, in the transaction that moves the cursor. A delivery without a job is due and waits
   * for its account's next free slot (see {@link deliver}).
   */
  private async fanOut(events: readonly StoredEvent[], pass: DispatchPass) {
    // Read after the events: an endpoint made since starts after every one of them.
    const endpoints = await this.store.read((r) => r.webhooks.endpoints.receiving(accountsOf(events)));
    return async (r: FanOutRepositories) => {
      // Counted on a copy: a transaction run again (a deadlock victim) starts from the same counts.
      const jobsLeft = new Map(pass.jobsLeft);
      const wakes: JobWakeUp[] = [];
      let made = 0;
      for (const event of events) {
        let left = jobsLeft.get(event.accountId) ?? TRIES_IN_FLIGHT_PER_ACCOUNT;
        for (const endpoint of targetsOf(endpoints, event)) {
          const id = randomUUID();
          const delivery = { id, endpointId: endpoint.id, accountId: endpoint.accountId, eventId: event.id };
          if (!(await r.webhooks.deliveries.record({ ...delivery, at: this.clock.now() }))) continue;
          made++;
          if (left > 0) {
            left--;
            wakes.push(await this.jobs.nowIn(r.jobs, 'webhooks.deliver', { deliveryId: id }, { uniqueKey: id }));
          }
        }
        jobsLeft.set(event.accountId, left);
      }
      return async () => {
        pass.made += made;
        pass.jobsLeft = jobsLeft;
        for (const wake of wakes) await wake();
      };
    };
  }

  /**
   * Enqueues again, for accounts with a slot free, the deliveries whose next try is long overdue
   * (their worker died holding them, or their turn was handed to no one): at most an account's
   * free slots each, and a bounded number of accounts per pass, taken in turn. The unique key is
   * the delivery's, so a job still waiting for one is moved, never doubled.
   */
  async revive(): Promise<number> {
    const dueBefore = new Date(this.clock.now().getTime() - OVERDUE_MS);
    const overdue = (after: string) =>
      this.store.read((r) => r.webhooks.deliveries.accountsWithOverdue(dueBefore, after, BATCH));
    let accounts = await overdue(this.reviveAfter);
    if (accounts.length === 0 && this.reviveAfter !== '') accounts = await overdue('');
    this.reviveAfter = accounts.length < BATCH ? '' : accounts[accounts.length - 1];
    let count = 0;
    for (const accountId of accounts) count += await this.wake(accountId, dueBefore);
    return count;
  }

  /** Enqueues the account's longest-waiting deliveries due by `dueBy`, as many as it has slots free. */
  private async wake(accountId: string, dueBy: Date): Promise<number> {
    const wallNow = new Date();
    const ids = await this.store.read(async (r) => {
      const free = TRIES_IN_FLIGHT_PER_ACCOUNT - (await r.webhooks.slots.held(accountId, wallNow));
      return free <= 0 ? [] : r.webhooks.deliveries.dueOf(accountId, dueBy, wallNow, free);
    });
    for (const id of ids) await this.jobs.now('webhooks.deliver', { deliveryId: id }, { uniqueKey: id });
    return ids.length;
  }

  /** One try of delivery `id` (the deliver job's handler); safe to run twice. */
  async deliver(id: string): Promise<DeliveryRun> {
    const accountId = await this.store.read((r) => r.webhooks.deliveries.pendingAccount(id));
    if (accountId === null) return 'skipped';
    const wallNow = Date.now();
    // Held past the try's own time limit, so two runs of its job never send at once.
    const until = new Date(wallNow + this.limits.totalMs + 30_000);
    const taken = await this.takeTry({
      deliveryId: id,
      accountId,
      slots: TRIES_IN_FLIGHT_PER_ACCOUNT,
      now: new Date(wallNow),
      until,
    });
    // Every slot of the account is held: each holder hands its slot on when its try is recorded.
    if (taken === 'no-slot') return 'deferred';
    if (taken === 'busy') return 'skipped';
    try {
      return await this.tryOnce(id, accountId);
    } finally {
      // Jobs run on the wall clock, which a test's clock may lag: a delivery is due by the later of the two.
      await this.wake(accountId, new Date(Math.max(Date.now(), this.clock.now().getTime())));
    }
  }

  /**
   * Takes a slot of the account and the delivery's claim together; the account's first tries (or
   * a raised count) find no slot rows, which are made, and taken in a second round whoever made them.
   */
  private async takeTry(t: TryToTake): Promise<TakeResult> {
    for (let round = 0; ; round++) {
      const got = await this.store.transaction((r) => r.webhooks.slots.take(t));
      if (got !== 'no-slot' || round > 0) return got;
      await this.store.read((r) => r.webhooks.slots.make(t.accountId, t.slots));
    }
  }

  /** The try itself, with the slot and the claim held; recording it frees the slot (should it throw first, both lapse at their `until`). */
  private async tryOnce(id: string, accountId: string): Promise<DeliveryRun> {
    const found = await this.store.read((r) => r.webhooks.deliveries.target(id));
    const event = found && (await this.events.eventById(found.delivery.eventId));
    if (!found || !event || !found.receiving || !visibleEvent(viewerOfEndpoint(found.endpoint), event)) {
      await this.store.transaction((r) => r.webhooks.deliveries.close({ id, accountId }, this.clock.now()));
      return 'skipped';
    }
    const { delivery, endpoint } = found;
    const secret = this.box.open(endpoint.secretSealed, endpoint.secretKeyId, secretBinding(endpoint.id));
    const body = JSON.stringify(toEventDto(event));
    const started = this.clock.now();
    const headers = signedHeaders(secret, shownEventId(event), Math.floor(started.getTime() / 1000), body);
    let statusCode: number | null = null;
    let error: string | null = null;
    const t0 = Date.now();
    try {
      statusCode = await this.post(
        new URL(endpoint.url),
        body,
        { ...headers, 'user-agent': 'gpu-rental-webhooks/1' },
        this.opts.allowPrivateDestinations,
        this.limits,
        this.resolve,
      );
    } catch (err) {
      error = err instanceof DestinationRefused ? `refused: ${err.message}` : String((err as Error)?.message ?? err);
    }
    const durationMs = Date.now() - t0;
    const ok = statusCode !== null && statusCode >= 200 && statusCode < 300;
    if (!ok && statusCode !== null) error = statusCode >= 300 && statusCode < 400 ? 'redirect not followed' : null;
    const outcome = this.outcome(delivery.firstAttemptAt, started, ok);
    const attempt: TryOutcome = {
      attemptedAt: started,
      statusCode,
      error,
      durationMs,
      status: outcome.status,
      nextAttemptAt: outcome.nextAttemptAt,
    };
    await this.store.transaction((r) => r.webhooks.deliveries.recordTry({ id, accountId }, attempt));
    if (outcome.status === 'PENDING') {
      // Agenda runs on the wall clock.
      await this.jobs.schedule(
        new Date(Date.now() + outcome.delayMs),
        'webhooks.deliver',
        { deliveryId: id },
        { uniqueKey: id },
      );
    }
    if (!ok)
      this.logger.info(
        { deliveryId: id, endpointId: endpoint.id, eventId: event.id, statusCode, error, status: outcome.status },
        'webhook delivery failed',
      );
    return ok ? 'succeeded' : outcome.status === 'PENDING' ? 'retrying' : 'failed';
  }

  /**
   * After a failure the wait is the time since the first try (so it doubles from the first
   * retry's), at least `firstRetryMs` and at most an hour; none is left 24 hours after the first try.
   */
  private outcome(
    firstAttemptAt: Date | null,
    now: Date,
    ok: boolean,
  ): { status: TryOutcome['status']; nextAttemptAt: Date | null; delayMs: number } {
    if (ok) return { status: 'SUCCEEDED', nextAttemptAt: null, delayMs: 0 };
    const first = firstAttemptAt ?? now;
    const delayMs = Math.min(HOUR_MS, Math.max(this.opts.firstRetryMs, now.getTime() - first.getTime()));
    if (now.getTime() + delayMs > first.getTime() + GIVE_UP_AFTER_MS)
      return { status: 'FAILED', nextAttemptAt: null, delayMs: 0 };
    return { status: 'PENDING', nextAttemptAt: new Date(now.getTime() + delayMs), delayMs };
  }
}
