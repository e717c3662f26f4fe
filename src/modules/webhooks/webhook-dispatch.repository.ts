import type { Store } from '../../db/store.js';
import type { Logger } from '../../logger.js';
import { DurableCursor, EventTail, type EventLogRepositories } from '../events/event-tail.js';
import type { StoredEvent } from '../events/events.repository.js';
import type { FanOutHandler, FanOutRepositories, WebhookEventLog } from './webhook-events.js';

// The webhooks' reads of the event log, and the dispatcher's tail of it: the cursor `webhooks` is
// the event log's own (events/event-tail.ts), moved in the store's transaction whose repositories
// the fan-out writes through.

const CURSOR = 'webhooks';
/** Events fanned out per read. */
const BATCH = 200;

/** What the dispatcher's log reads and writes through: the event log and cursor, and the fan-out's writes. */
export type DispatchRepositories = FanOutRepositories & EventLogRepositories;

/** {@link WebhookEventLog} on the store; one per dispatcher (its tail keeps its retry state in memory). */
export class MysqlWebhookEventLog implements WebhookEventLog {
  private readonly tail: EventTail<DispatchRepositories>;

  constructor(
    private readonly store: Store<DispatchRepositories>,
    logger?: Logger,
  ) {
    // A first pass starts before the oldest endpoint's first event, or from now.
    const start = () =>
      store.read(async (r) => (await r.webhooks.endpoints.earliestStart()) ?? (await r.events.latestId()));
    this.tail = new EventTail(store, new DurableCursor(store, CURSOR, start), { name: CURSOR, batch: BATCH, logger });
  }

  latestEventId(): Promise<string> {
    return this.store.read((r) => r.events.latestId());
  }

  eventById(id: string): Promise<StoredEvent | null> {
    return this.store.read((r) => r.events.byId(id));
  }

  accountSeqsOf(ids: readonly string[]): Promise<Map<string, string>> {
    return this.store.read((r) => r.events.accountSeqsOf(ids));
  }

  drainDispatch(handler: FanOutHandler): Promise<number> {
    return this.tail.drain(async (events) => {
      const writes = await handler(events);
      return (r) => writes(r);
    });
  }
}
