import type { DataSource, EntityManager } from 'typeorm';
import { MysqlJobOutboxRepository } from '../../jobs/job-outbox.repository.js';
import type { Logger } from '../../logger.js';
import { DurableCursor, EventTail } from '../events/event-tail.js';
import { accountSeqsOf, eventById, latestEventId, type StoredEvent } from '../events/events.repository.js';
import type { FanOutHandler, FanOutRepositories, WebhookEventLog } from './webhook-events.js';
import { MysqlWebhooksRepository } from './webhooks.repository.js';

// The webhooks' reads of the event log on MySQL, and the dispatcher's tail of it: the cursor
// `webhooks` is the event log's own (events/event-tail.ts), moved in a TypeORM transaction whose
// manager the fan-out's repositories are bound to.

const CURSOR = 'webhooks';
/** Events fanned out per read. */
const BATCH = 200;

const fanOutRepositories = (m: EntityManager): FanOutRepositories => ({
  webhooks: new MysqlWebhooksRepository(m),
  jobs: new MysqlJobOutboxRepository(m),
});

/** {@link WebhookEventLog} on the DataSource; one per dispatcher (its tail keeps its retry state in memory). */
export class MysqlWebhookEventLog implements WebhookEventLog {
  private readonly tail: EventTail<EntityManager>;

  constructor(
    private readonly ds: DataSource,
    logger?: Logger,
  ) {
    // A first pass starts before the oldest endpoint's first event, or from now.
    const start = async () =>
      (await new MysqlWebhooksRepository(ds).endpoints.earliestStart()) ?? (await latestEventId(ds));
    this.tail = new EventTail(ds, new DurableCursor(ds, CURSOR, start), { name: CURSOR, batch: BATCH, logger });
  }

  latestEventId(): Promise<string> {
    return latestEventId(this.ds);
  }

  eventById(id: string): Promise<StoredEvent | null> {
    return eventById(this.ds, id);
  }

  accountSeqsOf(ids: readonly string[]): Promise<Map<string, string>> {
    return accountSeqsOf(this.ds, ids);
  }

  drainDispatch(handler: FanOutHandler): Promise<number> {
    return this.tail.drain(async (events) => {
      const writes = await handler(events);
      return (m) => writes(fanOutRepositories(m));
    });
  }
}
