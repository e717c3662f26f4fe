import { isConnectionError } from '../../db/connection-errors.js';
import type { Store } from '../../db/store.js';
import type { Logger } from '../../logger.js';
import type { StoredPosition, TailPosition } from './event-cursors.repository.js';
import type { EventsRepository, StoredEvent } from './events.repository.js';

export type { StoredPosition, TailPosition } from './event-cursors.repository.js';

/** What a tail reads the log and a durable cursor through: the events aggregate. */
export interface EventLogRepositories {
  events: EventsRepository;
}

// The one way the service's own readers consume the event log: webhook fan-out and owner
// notifications with a durable cursor each, the push hub with one in memory.
//
// The late-commit rule. An event's id is taken when its row is inserted, not when its
// transaction commits, so an event can become visible after a later id was handed out. A tail
// therefore keeps, with the newest id it handled, the ids below it that were missing when it passed
// them (still uncommitted, or rolled back), as long as they are within LATE_COMMIT_LOOKBACK ids of
// it, and reads "after the newest, or among the missing" in one statement. An event that commits
// late is handled once, when it appears; a missing id further behind than the lookback is given up
// on. One account's events are numbered under its counter's lock, so they commit in id order: a
// reader never sees one of them before an earlier one that is still within the lookback.

/** How far below the newest id it handled a tail still looks for ids that had not committed. */
export const LATE_COMMIT_LOOKBACK = 1000n;

/** How a tail tries a batch again after its handler failed, and when it gives up on an event. */
export interface TailRetry {
  /** Wait before the first retry; each later one doubles, up to {@link maxMs}. */
  firstMs: number;
  maxMs: number;
  /** Failures of one event (alone in its batch) before it is logged and skipped; lost connections are not counted. */
  tries: number;
}

export const TAIL_RETRY: TailRetry = { firstMs: 1000, maxMs: 60_000, tries: 5 };

/** What to do once a batch's writes have committed (wake job processors, count, fan out in memory). */
export type AfterCommit = () => void | Promise<void>;

/** The writes a batch makes, in the unit of work that moves the cursor past it (a transaction, for a durable cursor). */
export type BatchWrites<Tx> = (tx: Tx) => Promise<AfterCommit | void>;

/**
 * Handles a batch (events in id order, each once): reads what it needs, with no lock held, and
 * answers the writes to make with the cursor's move. Throwing, or failing its writes, leaves the
 * cursor where it was, and the batch is tried again.
 */
export type EventHandler<Tx> = (events: readonly StoredEvent[]) => Promise<BatchWrites<Tx>>;

/** Where a tail keeps its position, and the unit of work its batches' writes are made in. */
export interface CursorStore<Tx> {
  /** The position; null when there is nothing to tail (a memory cursor not started). */
  load(): Promise<StoredPosition | null>;
  /**
   * Moves the position from `from` to `to` together with `writes`, both or neither: false, with
   * nothing written, when another consumer of the same name moved it first.
   */
  move(from: StoredPosition, to: TailPosition, writes: BatchWrites<Tx>): Promise<AfterCommit | false>;
}

const nothing: AfterCommit = () => undefined;

/** The position after `events` were handled from `at` (the rule above). */
export function nextPosition(at: TailPosition, events: readonly StoredEvent[]): TailPosition {
  const last = BigInt(at.lastId);
  const top = events.reduce((max, e) => (BigInt(e.id) > max ? BigInt(e.id) : max), last);
  const floor = top - LATE_COMMIT_LOOKBACK;
  const got = new Set(events.map((e) => e.id));
  const unseen = at.unseen.filter((id) => !got.has(id) && BigInt(id) > floor);
  for (let id = (last > floor ? last : floor) + 1n; id < top; id++) if (!got.has(String(id))) unseen.push(String(id));
  return { lastId: String(top), unseen };
}

/**
 * A named cursor in `event_cursors`, one row per consumer. A batch's writes are made in the
 * transaction that moves it, after the cursor's row is claimed at the version read, with that
 * transaction's repositories: two processes tailing the same name take turns on that row, and the
 * one that finds it moved reads again, so each event is handled once whichever process runs it.
 * A transaction run again (a deadlock victim) claims and writes again from the start.
 */
export class DurableCursor<R extends EventLogRepositories> implements CursorStore<R> {
  constructor(
    private readonly store: Store<R>,
    readonly name: string,
    /** Where the consumer starts on its first pass: the id after which it takes every event. */
    private readonly start: () => Promise<string>,
  ) {}

  async load(): Promise<StoredPosition> {
    const found = await this.store.read((r) => r.events.readCursor(this.name));
    if (found) return found;
    const lastId = await this.start();
    await this.store.read((r) => r.events.createCursor(this.name, lastId));
    return (await this.store.read((r) => r.events.readCursor(this.name)))!;
  }

  move(from: StoredPosition, to: TailPosition, writes: BatchWrites<R>): Promise<AfterCommit | false> {
    return this.store.transaction(async (r) => {
      if (!(await r.events.claimCursor(this.name, from.version, to))) return false;
      return (await writes(r)) ?? nothing;
    });
  }
}

/** A cursor in memory, for a reader that starts from now whenever it starts (the push hub). */
export class MemoryCursor implements CursorStore<void> {
  private at: TailPosition | null = null;
  /** Moves with every change, so a pass begun before the cursor was forgotten (or begun again) moves nothing. */
  private version = 0;

  /** The position, or null before {@link begin} (or after {@link forget}). */
  get position(): TailPosition | null {
    return this.at;
  }

  /** Starts after `lastId`. */
  begin(lastId: string): void {
    this.at = { lastId, unseen: [] };
    this.version++;
  }

  /** Forgets the position: the tail stops until {@link begin}. */
  forget(): void {
    this.at = null;
    this.version++;
  }

  async load(): Promise<StoredPosition | null> {
    return this.at && { position: this.at, version: String(this.version) };
  }

  async move(from: StoredPosition, to: TailPosition, writes: BatchWrites<void>): Promise<AfterCommit | false> {
    if (!this.at || String(this.version) !== from.version) return false;
    const after = await writes();
    if (String(this.version) !== from.version) return false;
    this.at = to;
    this.version++;
    return after ?? nothing;
  }
}

export interface EventTailOptions {
  /** Names the consumer in logs. */
  name: string;
  /** Events per batch. */
  batch: number;
  retry?: Partial<TailRetry>;
  logger?: Logger;
  /** Milliseconds now, for the retry waits (the wall clock unless a test moves its own). */
  now?: () => number;
}

/**
 * One consumer of the event log: hands the events after its cursor to a handler a batch at a
 * time, moving the cursor with each batch's writes. A batch whose handler fails is tried again
 * from the cursor after a wait that doubles; meanwhile the tail takes one event at a time, so the
 * failing one is found, and an event that fails {@link TailRetry.tries} times alone is logged and
 * skipped. Failures are kept in memory: a process that restarts tries again from the start.
 */
export class EventTail<Tx> {
  private readonly retry: TailRetry;
  private readonly now: () => number;
  /** Failed tries in a row, for the wait before the next. */
  private failures = 0;
  /** Failed tries of the event at the cursor that count towards skipping it. */
  private counted = 0;
  /** Batches hold one event until the cursor passes this id (the last of a batch that failed). */
  private singlyUntil: bigint | null = null;
  private retryAt = 0;

  constructor(
    /** Where the log is read (each read on its own, outside any transaction). */
    private readonly log: Store<EventLogRepositories>,
    private readonly store: CursorStore<Tx>,
    private readonly options: EventTailOptions,
  ) {
    this.retry = { ...TAIL_RETRY, ...options.retry };
    this.now = options.now ?? Date.now;
  }

  /**
   * Hands every event after the cursor to `handler`, a batch at a time, until none is left or a
   * batch fails (it is tried again by a later call, once its wait is over); answers how many
   * events were handled. A failure to read the log or the cursor is thrown.
   */
  async drain(handler: EventHandler<Tx>): Promise<number> {
    if (this.now() < this.retryAt) return 0;
    let handled = 0;
    for (;;) {
      const from = await this.store.load();
      if (!from) return handled;
      const limit = this.singlyUntil === null ? this.options.batch : 1;
      const events = await this.log.read((r) => r.events.tail(from.position.lastId, from.position.unseen, limit));
      if (events.length === 0) {
        this.singlyUntil = null;
        return handled;
      }
      const to = nextPosition(from.position, events);
      let after: AfterCommit | false;
      try {
        after = await this.store.move(from, to, await handler(events));
      } catch (err) {
        await this.failed(from, to, events, err);
        return handled;
      }
      // Another process of the same name took this batch: read on from where it left the cursor.
      if (after === false) continue;
      this.failures = this.counted = 0;
      if (this.singlyUntil !== null && BigInt(to.lastId) >= this.singlyUntil) this.singlyUntil = null;
      handled += events.length;
      try {
        await after();
      } catch (err) {
        // Committed: what follows a commit (waking a job processor) has a backstop of its own.
        this.options.logger?.warn({ err, consumer: this.options.name }, 'work after handling events failed');
      }
      if (events.length < limit) return handled;
    }
  }

  private async failed(from: StoredPosition, to: TailPosition, events: readonly StoredEvent[], err: unknown) {
    const { logger, name } = this.options;
    this.failures++;
    if (!isConnectionError(err)) this.counted++;
    const head = events[0];
    if (events.length === 1 && this.counted >= this.retry.tries) {
      logger?.error(
        { err, consumer: name, eventId: head.id, type: head.type, tries: this.counted },
        'an event failed every try; it is skipped',
      );
      this.failures = this.counted = 0;
      await this.store.move(from, to, async () => undefined);
      return;
    }
    if (events.length > 1) this.singlyUntil = BigInt(events[events.length - 1].id);
    const waitMs = Math.min(this.retry.maxMs, this.retry.firstMs * 2 ** Math.min(this.failures - 1, 30));
    this.retryAt = this.now() + waitMs;
    logger?.warn(
      { err, consumer: name, fromEventId: head.id, events: events.length, failures: this.failures, waitMs },
      'handling events failed; they are tried again from the cursor',
    );
  }
}
