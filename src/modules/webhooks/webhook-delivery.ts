import { MysqlJobOutboxRepository } from '../../jobs/job-outbox.repository.js';
import { randomUUID } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import type { Clock } from '../../clock.js';
import { inTransaction } from '../../db/transaction.js';
import type { JobQueue, JobWakeUp } from '../../jobs/job-queue.js';
import type { Logger } from '../../logger.js';
import type { SecretBox } from '../credentials/secret-box.js';
import { DurableCursor, EventTail, type BatchWrites } from '../events/event-tail.js';
import { latestEventId, visibleEvent, type StoredEvent } from '../events/events.repository.js';
import { shownEventId, toEventDto } from '../events/events.service.js';
import {
  DestinationRefused,
  postPinned,
  POST_LIMITS,
  systemResolver,
  type PostLimits,
  type Resolver,
} from './destination.js';
import { signedHeaders } from './webhook-signing.js';
import { heldSlots, takeTry } from './webhook-slots.repository.js';
import { secretBinding, viewerOfEndpoint } from './webhooks.service.js';
import {
  accountsWithOverdue,
  closeDelivery,
  deliveryToSend,
  dueDeliveriesOf,
  pendingDeliveryAccount,
  receivingEndpoints,
  recordDelivery,
  recordTry,
  type StoredEndpoint,
  type TryOutcome,
} from './webhooks.repository.js';
import { earliestEndpointStart } from './webhook-dispatch.repository.js';

const CURSOR = 'webhooks';
/** Events fanned out per read. */
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
  private readonly tail: EventTail<EntityManager>;

  constructor(
    private readonly ds: DataSource,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly jobs: JobQueue,
    private readonly box: SecretBox,
    private readonly opts: WebhookDeliveryOptions,
  ) {
    this.limits = opts.limits ?? POST_LIMITS;
    this.resolve = opts.resolve ?? systemResolver;
    // A first pass starts before the oldest endpoint's first event, or from now.
    const start = async () => (await earliestEndpointStart(ds)) ?? (await latestEventId(ds));
    this.tail = new EventTail(ds, new DurableCursor(ds, CURSOR, start), { name: CURSOR, batch: BATCH, logger });
  }

  /**
   * Fans out every event after the cursor (and those that committed late below it, by the tail's
   * rule); revives overdue deliveries first. Reads only the endpoints of the accounts whose events
   * it fans out. Answers how many deliveries it made.
   */
  async dispatch(): Promise<number> {
    await this.revive();
    const pass: DispatchPass = { made: 0, jobsLeft: new Map() };
    await this.tail.drain((events) => this.fanOut(events, pass));
    return pass.made;
  }

  /**
   * One delivery per target of each event, and a job for each while its account has jobs left in
   * this pass, in the transaction that moves the cursor. A delivery without a job is due and waits
   * for its account's next free slot (see {@link deliver}).
   */
  private async fanOut(events: readonly StoredEvent[], pass: DispatchPass): Promise<BatchWrites<EntityManager>> {
    // Read after the events: an endpoint made since starts after every one of them.
    const endpoints = await receivingEndpoints(this.ds, accountsOf(events));
    return async (m) => {
      // Counted on a copy: a transaction run again (a deadlock victim) starts from the same counts.
      const jobsLeft = new Map(pass.jobsLeft);
      const wakes: JobWakeUp[] = [];
      let made = 0;
      for (const event of events) {
        let left = jobsLeft.get(event.accountId) ?? TRIES_IN_FLIGHT_PER_ACCOUNT;
        for (const endpoint of targetsOf(endpoints, event)) {
          const id = randomUUID();
          const delivery = { id, endpointId: endpoint.id, accountId: endpoint.accountId, eventId: event.id };
          if (!(await recordDelivery(m, { ...delivery, at: this.clock.now() }))) continue;
          made++;
          if (left > 0) {
            left--;
            wakes.push(
              await this.jobs.nowIn(
                new MysqlJobOutboxRepository(m),
                'webhooks.deliver',
                { deliveryId: id },
                { uniqueKey: id },
              ),
            );
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
    let accounts = await accountsWithOverdue(this.ds, dueBefore, this.reviveAfter, BATCH);
    if (accounts.length === 0 && this.reviveAfter !== '')
      accounts = await accountsWithOverdue(this.ds, dueBefore, '', BATCH);
    this.reviveAfter = accounts.length < BATCH ? '' : accounts[accounts.length - 1];
    let count = 0;
    for (const accountId of accounts) count += await this.wake(accountId, dueBefore);
    return count;
  }

  /** Enqueues the account's longest-waiting deliveries due by `dueBy`, as many as it has slots free. */
  private async wake(accountId: string, dueBy: Date): Promise<number> {
    const wallNow = new Date();
    const free = TRIES_IN_FLIGHT_PER_ACCOUNT - (await heldSlots(this.ds, accountId, wallNow));
    if (free <= 0) return 0;
    const ids = await dueDeliveriesOf(this.ds, accountId, dueBy, wallNow, free);
    for (const id of ids) await this.jobs.now('webhooks.deliver', { deliveryId: id }, { uniqueKey: id });
    return ids.length;
  }

  /** One try of delivery `id` (the deliver job's handler); safe to run twice. */
  async deliver(id: string): Promise<DeliveryRun> {
    const accountId = await pendingDeliveryAccount(this.ds, id);
    if (accountId === null) return 'skipped';
    const wallNow = Date.now();
    // Held past the try's own time limit, so two runs of its job never send at once.
    const until = new Date(wallNow + this.limits.totalMs + 30_000);
    const taken = await takeTry(this.ds, {
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

  /** The try itself, with the slot and the claim held; recording it frees the slot (should it throw first, both lapse at their `until`). */
  private async tryOnce(id: string, accountId: string): Promise<DeliveryRun> {
    const found = await deliveryToSend(this.ds, id);
    if (!found || !found.receiving || !visibleEvent(viewerOfEndpoint(found.endpoint), found.event)) {
      await inTransaction(this.ds, (m) => closeDelivery(m, { id, accountId }, this.clock.now()));
      return 'skipped';
    }
    const { delivery, endpoint, event } = found;
    const secret = this.box.open(endpoint.secretSealed, endpoint.secretKeyId, secretBinding(endpoint.id));
    const body = JSON.stringify(toEventDto(event));
    const started = this.clock.now();
    const headers = signedHeaders(secret, shownEventId(event), Math.floor(started.getTime() / 1000), body);
    let statusCode: number | null = null;
    let error: string | null = null;
    const t0 = Date.now();
    try {
      statusCode = await postPinned(
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
    await inTransaction(this.ds, (m) => recordTry(m, { id, accountId }, attempt));
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
