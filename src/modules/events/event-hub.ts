import type { Config } from '../../config.js';
import type { Store } from '../../db/store.js';
import { pushLimits, type PushLimits } from '../../http/push-limits.js';
import type { Logger } from '../../logger.js';
import type { AccountsRepository } from '../accounts/accounts.repository.js';
import { EventTail, MemoryCursor } from './event-tail.js';
import type { EventsRepository, StoredEvent } from './events.repository.js';

/** Events read per query of the tail; a fuller answer is followed at once by the next. */
const TAIL_BATCH = 500;
/** Events a subscriber may leave unread before it is cut off (a stream whose client stopped reading). */
const MAX_QUEUED = 10_000;
/** Keys per query of the revocation check. */
const REVOCATION_BATCH = 500;

/** What the hub reads: the event log, and the listening keys' revocation. */
export interface EventHubRepositories {
  events: EventsRepository;
  accounts: AccountsRepository;
}

export interface EventHubOptions {
  /** Milliseconds between reads of the tail (and checks of the listening keys' revocation) while anyone listens. */
  tailMs: number;
  /**
   * The bounds of streams and waiting reads (PUSH_MAX_*): the hub holds each key's places and
   * hands the rest to the HTTP layer ({@link EventHub.limits}). Unbounded when absent.
   */
  push?: Config['push'];
}

/** Why a subscription ended: its reader stopped it, it fell too far behind, its key was revoked, or the hub stopped. */
export type SubscriptionEnd = 'stopped' | 'behind' | 'revoked';

/** What a subscription is for. */
export interface SubscribeOptions {
  /**
   * The key it listens for: the key takes one of its places (429 RATE_LIMITED past its bound),
   * and the subscription ends within one tail period of the key's revocation, in any process.
   */
  keyId?: string;
}

/**
 * One listener of the hub: the events after {@link since} that pass its filter, queued until read.
 * Closed when its reader stops it, when it falls too far behind, or when the hub stops.
 */
export class Subscription {
  /**
   * Every event with a greater id reaches this subscription, and so may one below it that commits
   * late (event-tail.ts): a reader drops what it already has (a stream, by its account number).
   */
  since = '0';
  private readonly queue: StoredEvent[] = [];
  private wake: (() => void) | undefined;
  private end: SubscriptionEnd | undefined;
  /** @internal Gives back the key's place; set by the hub. */
  release: (() => void) | undefined;

  constructor(
    private readonly hub: EventHub,
    private readonly filter: (e: StoredEvent) => boolean,
    /** The key it listens for, if any. */
    readonly keyId: string | undefined,
  ) {}

  get closed(): boolean {
    return this.end !== undefined;
  }

  /** Whether it ended because its key was revoked: a waiting read then answers 401, a stream ends. */
  get revoked(): boolean {
    return this.end === 'revoked';
  }

  /** @internal The hub hands each new event to every subscription. */
  offer(e: StoredEvent): void {
    if (this.closed || !this.filter(e)) return;
    if (this.queue.length >= MAX_QUEUED) return this.stop('behind');
    this.queue.push(e);
    this.wake?.();
  }

  /** The next queued event, waiting at most `ms` for one; undefined when none came or the subscription closed. */
  next(ms: number): Promise<StoredEvent | undefined> {
    if (this.queue.length) return Promise.resolve(this.queue.shift());
    if (this.closed || ms <= 0) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve(this.queue.shift());
      };
      const timer = setTimeout(done, ms);
      this.wake = done;
    });
  }

  /** Stops listening; a pending {@link next} answers at once. */
  stop(why: SubscriptionEnd = 'stopped'): void {
    if (this.closed) return;
    this.end = why;
    this.hub.remove(this);
    this.wake?.();
  }
}

/**
 * The in-process fan-out of the durable event log: while anyone listens, ONE tail per process
 * (event-tail.ts, with its cursor in memory) reads `events` every `tailMs` and hands each new
 * event to the subscriptions, so a thousand waiting readers cost the database what one does.
 * Idle, it holds no timer and forgets its place (the next listener starts from the newest event).
 * An event that commits after a later one was read is handed out when it appears, as the tail's
 * late-commit rule has it.
 *
 * Each tick also asks, in one query per few hundred keys, which of the listening keys have been
 * revoked (by any process), and ends their subscriptions: no listener queries on its own.
 */
export class EventHub {
  private readonly subscriptions = new Set<Subscription>();
  /** The subscriptions of each listening key; a key leaves the map with its last subscription. */
  private readonly byKey = new Map<string, Set<Subscription>>();
  private readonly cursor = new MemoryCursor();
  private readonly tail: EventTail<void>;
  private starting: Promise<string> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private tick: Promise<void> | undefined;
  private stopped = false;
  /** The bounds of streams and waiting reads this process holds (the HTTP layer takes the address places). */
  readonly limits: PushLimits | undefined;

  constructor(
    private readonly store: Store<EventHubRepositories>,
    private readonly options: EventHubOptions,
    private readonly logger?: Logger,
  ) {
    this.limits = options.push && pushLimits(options.push, logger);
    this.tail = new EventTail(store, this.cursor, { name: 'event-hub', batch: TAIL_BATCH, logger });
  }

  /** How many subscriptions are listening (for tests and metrics). */
  get listeners(): number {
    return this.subscriptions.size;
  }

  /** How many keys have a subscription listening (for tests: none is left once they all end). */
  get listeningKeys(): number {
    return this.byKey.size;
  }

  /**
   * Starts listening to the events that pass `filter`. Resolved once the hub knows where it
   * stands: every event with an id above the subscription's `since` will be offered to it.
   * After {@link stop} the subscription comes back already closed. With `keyId`, throws 429
   * RATE_LIMITED when the key already holds its most.
   */
  async subscribe(
    filter: (e: StoredEvent) => boolean = () => true,
    options: SubscribeOptions = {},
  ): Promise<Subscription> {
    const sub = new Subscription(this, filter, options.keyId);
    if (this.stopped) {
      sub.stop();
      return sub;
    }
    if (sub.keyId !== undefined) {
      sub.release = this.limits?.enterKey(sub.keyId);
      const same = this.byKey.get(sub.keyId) ?? new Set<Subscription>();
      same.add(sub);
      this.byKey.set(sub.keyId, same);
    }
    this.subscriptions.add(sub);
    try {
      sub.since = await this.position();
    } catch (err) {
      sub.stop();
      throw err;
    }
    return sub;
  }

  /** Reads the tail now instead of at the next interval (after a commit this process made, say). */
  poke(): void {
    if (!this.timer) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.tick = this.read();
  }

  /** Closes every subscription (waiting reads answer, streams end) and waits for a read in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const sub of [...this.subscriptions]) sub.stop();
    await this.tick;
    await this.starting?.catch(() => undefined);
  }

  /** @internal */
  remove(sub: Subscription): void {
    this.subscriptions.delete(sub);
    sub.release?.();
    const same = sub.keyId === undefined ? undefined : this.byKey.get(sub.keyId);
    if (same?.delete(sub) && same.size === 0) this.byKey.delete(sub.keyId!);
    if (this.subscriptions.size || !this.timer) return;
    // The last listener left: no timer outlives it, and the next one starts from the newest event.
    clearTimeout(this.timer);
    this.timer = undefined;
    this.cursor.forget();
  }

  /** The newest event id the hub has seen; read from the log when it was idle. */
  private position(): Promise<string> {
    const at = this.cursor.position;
    if (at !== null) return Promise.resolve(at.lastId);
    this.starting ??= this.store
      .read((r) => r.events.latestId())
      .then(
        (id) => {
          this.starting = undefined;
          this.cursor.begin(id);
          this.schedule();
          return id;
        },
        (err: unknown) => {
          this.starting = undefined;
          throw err;
        },
      );
    return this.starting;
  }

  private schedule(): void {
    if (this.timer || this.tick || this.stopped || this.cursor.position === null) return;
    if (!this.subscriptions.size) {
      this.cursor.forget();
      return;
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.tick = this.read();
    }, this.options.tailMs);
  }

  /** Hands each event of a batch to every subscription, once the cursor has moved past it. */
  private readonly fanOut = async (events: readonly StoredEvent[]) => async () => () => {
    for (const e of events) for (const sub of [...this.subscriptions]) sub.offer(e);
  };

  private async read(): Promise<void> {
    try {
      // The last listener leaving forgets the cursor, which ends the pass.
      if (this.subscriptions.size) await this.tail.drain(this.fanOut);
    } catch (err) {
      this.logger?.warn({ err }, 'reading the event log tail failed; trying again at the next interval');
    }
    try {
      await this.endRevoked();
    } catch (err) {
      this.logger?.warn(
        { err },
        'checking the listening keys for revocation failed; trying again at the next interval',
      );
    } finally {
      this.tick = undefined;
      this.schedule();
    }
  }

  /** Ends the subscriptions of every listening key that has been revoked since it began. */
  private async endRevoked(): Promise<void> {
    const keys = [...this.byKey.keys()];
    for (let i = 0; i < keys.length; i += REVOCATION_BATCH) {
      const batch = keys.slice(i, i + REVOCATION_BATCH);
      for (const keyId of await this.store.read((r) => r.accounts.keys.revokedAmong(batch))) {
        for (const sub of [...(this.byKey.get(keyId) ?? [])]) sub.stop('revoked');
      }
    }
  }
}
