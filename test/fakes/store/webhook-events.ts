import type { Store } from '../../../src/db/store.js';
import type { EventType } from '../../../src/modules/events/event-types.js';
import type { StoredEvent } from '../../../src/modules/events/events.repository.js';
import type {
  FanOutHandler,
  FanOutRepositories,
  WebhookEventLog,
} from '../../../src/modules/webhooks/webhook-events.js';

/** An event as a test appends it: its account, type and key; the rest has defaults. */
export interface AppendedEvent {
  accountId: string;
  type: EventType;
  keyId?: string | null;
  rentalId?: string | null;
  data?: unknown;
  at?: Date;
  /** Written without an account number, as a process of an older version did. */
  unnumbered?: boolean;
}

/**
 * The event log of the unit tier, as the webhooks read it: events in an array, numbered log-wide
 * and per account, and a dispatcher cursor that moves only when a batch's writes commit in the
 * store (a commit lost and run again moves it once). The late-commit and retry rules of the real
 * tail are the events aggregate's, tested with it.
 */
export class MemoryWebhookEventLog implements WebhookEventLog {
  private readonly log: StoredEvent[] = [];
  private readonly seqs = new Map<string, number>();
  /** The last id the dispatcher handled. */
  cursor = 0n;
  /** Batches whose writes committed. */
  batches = 0;

  constructor(
    private readonly store: Store<FanOutRepositories>,
    private readonly batch = 200,
  ) {}

  /** Appends an event and answers it as stored. */
  append(e: AppendedEvent): StoredEvent {
    const seq = (this.seqs.get(e.accountId) ?? 0) + 1;
    if (!e.unnumbered) this.seqs.set(e.accountId, seq);
    const event: StoredEvent = {
      id: String(this.log.length + 1),
      seq: e.unnumbered ? null : String(seq),
      type: e.type,
      accountId: e.accountId,
      keyId: e.keyId ?? null,
      rentalId: e.rentalId ?? null,
      data: e.data ?? {},
      createdAt: e.at ?? new Date(),
    };
    this.log.push(event);
    return structuredClone(event);
  }

  /** Moves the dispatcher's cursor past every event so far, as a dispatcher that starts from now. */
  skipAll(): void {
    this.cursor = BigInt(this.log.length);
  }

  async latestEventId(): Promise<string> {
    return String(this.log.length);
  }

  async eventById(id: string): Promise<StoredEvent | null> {
    const found = this.log.find((e) => e.id === id);
    return found ? structuredClone(found) : null;
  }

  async accountSeqsOf(ids: readonly string[]): Promise<Map<string, string>> {
    return new Map(
      this.log.filter((e) => ids.includes(e.id) && e.seq !== null).map((e) => [e.id, e.seq as string] as const),
    );
  }

  async drainDispatch(handler: FanOutHandler): Promise<number> {
    let handled = 0;
    for (;;) {
      const events = this.log.filter((e) => BigInt(e.id) > this.cursor).slice(0, this.batch);
      if (events.length === 0) return handled;
      const writes = await handler(events.map((e) => structuredClone(e)));
      const after = await this.store.transaction((r) => writes(r));
      this.cursor = BigInt(events[events.length - 1].id);
      this.batches++;
      handled += events.length;
      if (after) await after();
      if (events.length < this.batch) return handled;
    }
  }
}
