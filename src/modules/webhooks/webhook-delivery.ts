import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import type { Clock } from '../../clock.js';
import { inTransaction } from '../../db/transaction.js';
import type { JobQueue, JobWakeUp } from '../../jobs/job-queue.js';
import type { Logger } from '../../logger.js';
import type { SecretBox } from '../credentials/secret-box.js';
import { allEventsAfter, latestEventId, visibleEvent, type StoredEvent } from '../events/events.repository.js';
import { toEventDto } from '../events/events.service.js';
import { DestinationRefused, postPinned, POST_LIMITS, type PostLimits } from './destination.js';
import { signedHeaders } from './webhook-signing.js';
import { secretBinding, viewerOfEndpoint } from './webhooks.service.js';
import {
  advanceDispatchCursor,
  claimDelivery,
  deliveredPairs,
  closeDelivery,
  deliveryToSend,
  dispatchCursor,
  earliestEndpointStart,
  overdueDeliveries,
  receivingEndpoints,
  recordDelivery,
  recordTry,
  type StoredEndpoint,
  type TryOutcome,
} from './webhooks.repository.js';

const CURSOR = 'webhooks';
/** Events fanned out per read. */
const BATCH = 200;
const HOUR_MS = 3600_000;
/** Retries stop this long after the first try. */
const GIVE_UP_AFTER_MS = 24 * HOUR_MS;
/** A pending delivery this late past its next try has its job enqueued again by the dispatcher. */
const OVERDUE_MS = 5 * 60_000;

export interface WebhookDeliveryOptions {
  allowPrivateDestinations: boolean;
  /** Wait before the first retry; each later wait doubles, up to an hour. */
  firstRetryMs: number;
  limits?: PostLimits;
}

/** Ids before the cursor looked at again for events that committed late. */
const LOOKBACK = 200n;

/** The endpoints that receive `event`: made before it, asking for its type, and allowed to see it. */
function targetsOf(endpoints: StoredEndpoint[], event: StoredEvent): StoredEndpoint[] {
  return endpoints.filter((e) => BigInt(event.id) > BigInt(e.afterEventId) && e.eventTypes.includes(event.type) && visibleEvent(viewerOfEndpoint(e), event));
}

/** What one run of a delivery job did. */
export type DeliveryRun = 'succeeded' | 'retrying' | 'failed' | 'skipped';

/**
 * Sending events to webhook endpoints, as jobs of the worker role: `dispatch` (repeating) fans
 * each new event out to the endpoints that may see it and asked for its type, writing one
 * delivery and its `webhooks.deliver` job per endpoint in one transaction with the cursor;
 * `deliver` makes one signed try and schedules the next after a failure. Every try of a delivery
 * carries the event id as `webhook-id`, so a receiver can drop what it already has.
 */
export class WebhookDeliveries {
  private readonly limits: PostLimits;

  constructor(
    private readonly ds: DataSource,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly jobs: JobQueue,
    private readonly box: SecretBox,
    private readonly opts: WebhookDeliveryOptions,
  ) {
    this.limits = opts.limits ?? POST_LIMITS;
  }

  /**
   * Fans out every event after the cursor, and those of the last {@link LOOKBACK} ids before it
   * that no delivery was made for (ids are taken at insert, so an event can commit after a later
   * one was fanned out); revives overdue deliveries. Answers how many deliveries it made.
   */
  async dispatch(): Promise<number> {
    await this.revive();
    let cursor = (await dispatchCursor(this.ds, CURSOR)) ?? (await earliestEndpointStart(this.ds)) ?? (await latestEventId(this.ds));
    let made = await this.catchUp(cursor);
    for (;;) {
      const events = await allEventsAfter(this.ds, cursor, BATCH);
      if (events.length === 0) return made;
      // Read after the events: an endpoint made since starts after every one of them.
      const endpoints = await receivingEndpoints(this.ds);
      for (const event of events) made += await this.fanOut(event, targetsOf(endpoints, event), true);
      cursor = events[events.length - 1].id;
      await advanceDispatchCursor(this.ds, CURSOR, cursor);
    }
  }

  /** Deliveries missing for events at or before the cursor that committed late. */
  private async catchUp(cursor: string): Promise<number> {
    const from = BigInt(cursor) > LOOKBACK ? String(BigInt(cursor) - LOOKBACK) : '0';
    const events = (await allEventsAfter(this.ds, from, Number(LOOKBACK))).filter((e) => BigInt(e.id) <= BigInt(cursor));
    if (events.length === 0) return 0;
    const endpoints = await receivingEndpoints(this.ds);
    const made = new Set(await deliveredPairs(this.ds, from, cursor));
    let count = 0;
    for (const event of events) {
      const missing = targetsOf(endpoints, event).filter((e) => !made.has(`${e.id}:${event.id}`));
      if (missing.length) count += await this.fanOut(event, missing, false);
    }
    return count;
  }

  /** One delivery and its job per target, in one transaction (with the cursor, when it moves). */
  private async fanOut(event: StoredEvent, targets: StoredEndpoint[], moveCursor: boolean): Promise<number> {
    if (targets.length === 0) return 0;
    const wakes = await inTransaction(this.ds, async (m) => {
      const out: JobWakeUp[] = [];
      for (const endpoint of targets) {
        const id = randomUUID();
        if (await recordDelivery(m, { id, endpointId: endpoint.id, eventId: event.id, at: this.clock.now() })) {
          out.push(await this.jobs.nowIn(m, 'webhooks.deliver', { deliveryId: id }, { uniqueKey: id }));
        }
      }
      if (moveCursor) await advanceDispatchCursor(m, CURSOR, event.id);
      return out;
    });
    for (const wake of wakes) await wake();
    return wakes.length;
  }

  /**
   * Enqueues again the deliveries whose next try is long overdue. The unique key is the
   * delivery's, so a job still waiting for one is moved, never doubled.
   */
  async revive(): Promise<number> {
    const now = this.clock.now();
    const ids = await overdueDeliveries(this.ds, new Date(now.getTime() - OVERDUE_MS), new Date(), BATCH);
    for (const id of ids) await this.jobs.now('webhooks.deliver', { deliveryId: id }, { uniqueKey: id });
    return ids.length;
  }

  /** One try of delivery `id` (the deliver job's handler); safe to run twice. */
  async deliver(id: string): Promise<DeliveryRun> {
    const wallNow = Date.now();
    // Held past the try's own time limit, so two runs of its job never send at once.
    if (!(await claimDelivery(this.ds, id, new Date(wallNow), new Date(wallNow + this.limits.totalMs + 30_000)))) return 'skipped';
    const found = await deliveryToSend(this.ds, id);
    if (!found || !found.receiving || !visibleEvent(viewerOfEndpoint(found.endpoint), found.event)) {
      await closeDelivery(this.ds, id, this.clock.now());
      return 'skipped';
    }
    const { delivery, endpoint, event } = found;
    const secret = this.box.open(endpoint.secretSealed, endpoint.secretKeyId, secretBinding(endpoint.id));
    const body = JSON.stringify(toEventDto(event));
    const started = this.clock.now();
    const headers = signedHeaders(secret, event.id, Math.floor(started.getTime() / 1000), body);
    let statusCode: number | null = null;
    let error: string | null = null;
    const t0 = Date.now();
    try {
      statusCode = await postPinned(new URL(endpoint.url), body, { ...headers, 'user-agent': 'gpu-rental-webhooks/1' }, this.opts.allowPrivateDestinations, this.limits);
    } catch (err) {
      error = err instanceof DestinationRefused ? `refused: ${err.message}` : String((err as Error)?.message ?? err);
    }
    const durationMs = Date.now() - t0;
    const ok = statusCode !== null && statusCode >= 200 && statusCode < 300;
    if (!ok && statusCode !== null) error = statusCode >= 300 && statusCode < 400 ? 'redirect not followed' : null;
    const outcome = this.outcome(delivery.firstAttemptAt, started, ok);
    const attempt: TryOutcome = { attemptedAt: started, statusCode, error, durationMs, status: outcome.status, nextAttemptAt: outcome.nextAttemptAt };
    await inTransaction(this.ds, (m) => recordTry(m, id, attempt));
    if (outcome.status === 'PENDING') {
      // Agenda runs on the wall clock.
      await this.jobs.schedule(new Date(Date.now() + outcome.delayMs), 'webhooks.deliver', { deliveryId: id }, { uniqueKey: id });
    }
    if (!ok) this.logger.info({ deliveryId: id, endpointId: endpoint.id, eventId: event.id, statusCode, error, status: outcome.status }, 'webhook delivery failed');
    return ok ? 'succeeded' : outcome.status === 'PENDING' ? 'retrying' : 'failed';
  }

  /**
   * After a failure the wait is the time since the first try (so it doubles from the first
   * retry's), at least `firstRetryMs` and at most an hour; none is left 24 hours after the first try.
   */
  private outcome(firstAttemptAt: Date | null, now: Date, ok: boolean): { status: TryOutcome['status']; nextAttemptAt: Date | null; delayMs: number } {
    if (ok) return { status: 'SUCCEEDED', nextAttemptAt: null, delayMs: 0 };
    const first = firstAttemptAt ?? now;
    const delayMs = Math.min(HOUR_MS, Math.max(this.opts.firstRetryMs, now.getTime() - first.getTime()));
    if (now.getTime() + delayMs > first.getTime() + GIVE_UP_AFTER_MS) return { status: 'FAILED', nextAttemptAt: null, delayMs: 0 };
    return { status: 'PENDING', nextAttemptAt: new Date(now.getTime() + delayMs), delayMs };
  }
}
