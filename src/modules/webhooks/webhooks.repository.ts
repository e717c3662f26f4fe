import type { Executor } from '../../db/mysql-store.js';
import { MysqlSealedColumn, type SealedColumn } from '../../db/sealed-column.js';
import { MysqlWebhookDeliveriesRepository, type WebhookDeliveriesRepository } from './webhook-deliveries.repository.js';
import {
  MysqlWebhookEndpointsRepository,
  SIGNING_SECRETS,
  type WebhookEndpointsRepository,
} from './webhook-endpoints.repository.js';
import { MysqlWebhookSlotsRepository, type WebhookSlotsRepository } from './webhook-slots.repository.js';

export type { ListedEndpoint, StoredEndpoint } from './webhook-endpoints.repository.js';
export type {
  DeliveryStatus,
  DeliveryTarget,
  StoredAttempt,
  StoredDelivery,
  TryOutcome,
} from './webhook-deliveries.repository.js';

/**
 * The webhooks aggregate: the endpoints keys made (`webhook_endpoints`), the deliveries of events
 * to them with their tries (`webhook_deliveries`, `webhook_delivery_attempts`) and each account's
 * tries in flight (`webhook_delivery_slots`). The dispatcher's place in the event log is the
 * event log's own cursor (webhook-dispatch.repository.ts).
 */
export interface WebhooksRepository {
  readonly endpoints: WebhookEndpointsRepository;
  readonly deliveries: WebhookDeliveriesRepository;
  readonly slots: WebhookSlotsRepository;
  /** The endpoints' sealed column, as re-sealing after a SECRETS_KEY rotation walks it. */
  readonly sealed: WebhookSealedColumnsRepository;
}

/** The webhooks aggregate's sealed columns. Each call stands alone. */
export interface WebhookSealedColumnsRepository {
  /** The endpoints' signing secrets, deleted endpoints' included, bound by `secretBinding` (webhooks.service.ts). */
  readonly signingSecrets: SealedColumn;
}

/** The webhooks aggregate on MySQL; each part is made on first use. */
export class MysqlWebhooksRepository implements WebhooksRepository {
  private ends?: WebhookEndpointsRepository;
  private sent?: WebhookDeliveriesRepository;
  private held?: WebhookSlotsRepository;
  private secrets?: WebhookSealedColumnsRepository;

  constructor(private readonly sql: Executor) {}

  get endpoints(): WebhookEndpointsRepository {
    return (this.ends ??= new MysqlWebhookEndpointsRepository(this.sql));
  }

  get deliveries(): WebhookDeliveriesRepository {
    return (this.sent ??= new MysqlWebhookDeliveriesRepository(this.sql));
  }

  get slots(): WebhookSlotsRepository {
    return (this.held ??= new MysqlWebhookSlotsRepository(this.sql));
  }

  get sealed(): WebhookSealedColumnsRepository {
    return (this.secrets ??= { signingSecrets: new MysqlSealedColumn(this.sql, SIGNING_SECRETS) });
  }
}
