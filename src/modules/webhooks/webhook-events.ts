import type { JobOutboxRepository } from '../../jobs/job-outbox.repository.js';
import type { StoredEvent } from '../events/events.repository.js';
import type { WebhooksRepository } from './webhooks.repository.js';

/** The repositories a fan-out batch writes through: its deliveries, and the jobs that try them. */
export interface FanOutRepositories {
  webhooks: WebhooksRepository;
  jobs: JobOutboxRepository;
}

/** What to do once a batch's writes have committed (wake this process's job processor, count). */
export type AfterFanOut = () => void | Promise<void>;

/**
 * Handles a batch of events (in id order, each once): reads what it needs, with no lock held, and
 * answers the writes to make in the transaction that moves the dispatcher's cursor past the batch.
 * Those writes may run more than once (a transaction lost and run again), so they must start from
 * what they were given each time.
 */
export type FanOutHandler = (
  events: readonly StoredEvent[],
) => Promise<(repos: FanOutRepositories) => Promise<AfterFanOut | void>>;

/**
 * The event log as the webhooks read it. The log and the dispatcher's cursor are the events
 * aggregate's (events/event-tail.ts keeps the cursor's rules: late commits, retries, skipping an
 * event that fails every try); the MySQL side is webhook-dispatch.repository.ts.
 */
export interface WebhookEventLog {
  /** The newest log-wide id, or '0' when there is none: where a new endpoint starts. */
  latestEventId(): Promise<string>;
  /** One event by its log-wide id, or null. */
  eventById(id: string): Promise<StoredEvent | null>;
  /** The account numbers of events by log-wide id (absent for an event without one). */
  accountSeqsOf(ids: readonly string[]): Promise<Map<string, string>>;
  /**
   * Hands every event after the dispatcher's cursor to `handler`, a batch at a time, moving the
   * cursor with each batch's writes, until none is left or a batch fails (tried again by a later
   * call); answers how many events were handled. A cursor that does not exist yet starts before
   * the oldest live endpoint's first event, or at the newest event when there is no endpoint.
   */
  drainDispatch(handler: FanOutHandler): Promise<number>;
}
