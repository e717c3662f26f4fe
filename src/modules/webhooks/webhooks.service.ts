import { randomUUID } from 'node:crypto';
import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import { AppError } from '../../errors/app-error.js';
import type { RateLimiter } from '../../http/rate-limiter.js';
import type { JobQueue } from '../../jobs/job-queue.js';
import type { SecretBox } from '../credentials/secret-box.js';
import { EVENT_TYPES, type EventType } from '../events/event-types.js';
import { claimOrReplay, idempotentRequest, requireIdempotencyKey } from '../idempotency/idempotency.js';
import type { IdempotencyRepository } from '../idempotency/idempotency.repository.js';
import type { Principal } from '../keys/principal.js';
import type { Viewer } from '../keys/visibility.js';
import { DestinationRefused, systemResolver, urlProblem, vettedAddress, type Resolver } from './destination.js';
import type {
  CreateWebhookEndpointRequest,
  WebhookDeliveryDto,
  WebhookEndpointCreated,
  WebhookEndpointDto,
} from './webhooks.dto.js';
import type { WebhookEventLog } from './webhook-events.js';
import { newSigningSecret } from './webhook-signing.js';
import type { ListedEndpoint, StoredEndpoint, WebhooksRepository } from './webhooks.repository.js';

/** Deliveries an endpoint's listing shows, newest first. */
const DELIVERIES_LISTED = 100;

/** Live endpoints one key may have made (an owner key's and an agent key's alike). */
export const ENDPOINTS_PER_KEY = 10;

/** Redeliveries of one delivery, and by one key, per window. */
export const REDELIVERY_LIMITS = {
  perDelivery: { limit: 5, windowSeconds: 3600 },
  perKey: { limit: 100, windowSeconds: 3600 },
} as const;

/** The viewer an endpoint receives as: its agent key, or the account holder. */
export function viewerOfEndpoint(e: Pick<StoredEndpoint, 'accountId' | 'keyId'>): Viewer {
  return e.keyId === null
    ? { kind: 'OWNER', accountId: e.accountId }
    : { kind: 'AGENT', accountId: e.accountId, keyId: e.keyId };
}

export function toEndpointDto(e: ListedEndpoint): WebhookEndpointDto {
  return {
    id: e.id,
    url: e.url,
    eventTypes: e.eventTypes,
    keyId: e.keyId,
    makerKeyId: e.makerKeyId,
    status: e.makerRevoked ? 'STOPPED' : 'ACTIVE',
    stoppedReason: e.makerRevoked ? 'MAKER_KEY_REVOKED' : null,
    createdAt: e.createdAt.toISOString(),
  };
}

/** The seal's additional data: a sealed secret copied onto another endpoint fails to open. */
export const secretBinding = (endpointId: string): string => `webhook-endpoint:${endpointId}`;

/** What the endpoints' service reads and writes: the webhooks and the Idempotency-Key records of their creates. */
export type WebhooksStore = Store<{ webhooks: WebhooksRepository; idempotency: IdempotencyRepository }>;

/** Webhook endpoints: made, listed and deleted by keys, each seeing what the one visibility rule lets it. */
export class WebhooksService {
  constructor(
    private readonly store: WebhooksStore,
    private readonly events: Pick<WebhookEventLog, 'latestEventId' | 'accountSeqsOf'>,
    private readonly clock: Clock,
    private readonly box: SecretBox,
    private readonly jobs: JobQueue,
    private readonly rateLimiter: Pick<RateLimiter, 'hit'>,
    private readonly opts: { allowPrivateDestinations: boolean; resolve?: Resolver },
  ) {}

  /**
   * Makes an endpoint for the caller: an agent key's receives what that key may see, an owner
   * key's what the account holder may. Idempotent per key: a replay answers the same endpoint
   * with `secret: null` (the secret is shown once). The URL is kept as parsed; a key may have
   * made at most {@link ENDPOINTS_PER_KEY} live endpoints.
   */
  async create(
    principal: Principal,
    idempotencyKeyHeader: string | undefined,
    body: CreateWebhookEndpointRequest,
  ): Promise<{ endpoint: WebhookEndpointCreated; created: boolean }> {
    const idemKey = requireIdempotencyKey(idempotencyKeyHeader);
    const eventTypes = [...new Set(body.eventTypes)].sort() as EventType[];
    const unknown = eventTypes.filter((t) => !EVENT_TYPES.includes(t));
    if (eventTypes.length === 0 || unknown.length) {
      throw new AppError(
        'VALIDATION_FAILED',
        `Invalid request: eventTypes must be one or more of ${EVENT_TYPES.join(', ')}.`,
      );
    }
    const url = await this.destination(body.url);
    // A key belongs to one account, so its id alone keeps keys (and accounts) apart.
    const request = idempotentRequest(`webhook-endpoints:${principal.keyId}`, idemKey, { url, eventTypes });
    const after = await this.events.latestEventId();
    const { endpointId, secret } = await this.store.transaction((r) =>
      claimOrReplay<{ endpointId: string; secret: string | null }>(r.idempotency, this.clock, request, {
        replay: (id) => ({ endpointId: id, secret: null }),
        create: async () => {
          if ((await r.webhooks.endpoints.lockMadeBy(principal.keyId)) >= ENDPOINTS_PER_KEY) {
            throw new AppError(
              'VALIDATION_FAILED',
              `Invalid request: this key already has ${ENDPOINTS_PER_KEY} webhook endpoints, the most one key may have: delete one first (DELETE /api/v1/webhook-endpoints/{id}).`,
            );
          }
          const id = randomUUID();
          const secret = newSigningSecret();
          const sealed = this.box.seal(secret, secretBinding(id));
          await r.webhooks.endpoints.insert({
            id,
            accountId: principal.accountId,
            keyId: principal.kind === 'AGENT' ? principal.keyId : null,
            makerKeyId: principal.keyId,
            url,
            eventTypes,
            secretSealed: sealed.ciphertext,
            secretKeyId: sealed.keyId,
            afterEventId: after,
            createdAt: this.clock.now(),
          });
          return { resourceId: id, result: { endpointId: id, secret } };
        },
      }),
    );
    const stored = await this.store.read((r) => r.webhooks.endpoints.visibleOne(principal, endpointId));
    if (!stored) throw new AppError('NOT_FOUND', 'This endpoint was deleted.');
    return { endpoint: { ...toEndpointDto(stored), secret }, created: secret !== null };
  }

  async list(viewer: Viewer): Promise<WebhookEndpointDto[]> {
    return (await this.store.read((r) => r.webhooks.endpoints.visible(viewer))).map(toEndpointDto);
  }

  /** Deletes an endpoint: nothing more is sent to it, pending retries included. */
  async delete(viewer: Viewer, id: string): Promise<void> {
    const endpoint = await this.endpoint(viewer, id);
    await this.store.read((r) => r.webhooks.endpoints.markDeleted(endpoint.id, this.clock.now()));
  }

  /** The endpoint's deliveries, newest event first, each with its tries. */
  async deliveries(viewer: Viewer, id: string): Promise<WebhookDeliveryDto[]> {
    const endpoint = await this.endpoint(viewer, id);
    const { deliveries, attempts } = await this.store.read(async (r) => {
      const deliveries = await r.webhooks.deliveries.ofEndpoint(endpoint.id, DELIVERIES_LISTED);
      return { deliveries, attempts: await r.webhooks.deliveries.attemptsOf(deliveries.map((d) => d.id)) };
    });
    // Shown as the deliveries carry them: the account's own event numbers.
    const shown = await this.events.accountSeqsOf(deliveries.map((d) => d.eventId));
    return deliveries.map((d) => ({
      id: d.id,
      eventId: shown.get(d.eventId) ?? d.eventId,
      status: d.status,
      createdAt: d.createdAt.toISOString(),
      nextAttemptAt: d.status === 'PENDING' && d.nextAttemptAt ? d.nextAttemptAt.toISOString() : null,
      completedAt: d.completedAt?.toISOString() ?? null,
      attempts: attempts
        .filter((a) => a.deliveryId === d.id)
        .map((a) => ({
          attemptedAt: a.attemptedAt.toISOString(),
          statusCode: a.statusCode,
          error: a.error,
          durationMs: a.durationMs,
        })),
    }));
  }

  /**
   * Sends a delivery again now (same `webhook-id`), with a fresh 24 hours of retries; at most
   * {@link REDELIVERY_LIMITS} (429 past them).
   */
  async redeliver(principal: Principal, id: string, deliveryId: string): Promise<void> {
    const endpoint = await this.endpoint(principal, id);
    const delivery = await this.store.read((r) => r.webhooks.deliveries.one(endpoint.id, deliveryId));
    if (!delivery) throw new AppError('NOT_FOUND', 'No delivery with this id on this endpoint.');
    const { perKey, perDelivery } = REDELIVERY_LIMITS;
    await this.rateLimiter.hit(
      `webhook-redeliver:key:${principal.keyId}`,
      perKey.limit,
      perKey.windowSeconds,
      `redeliveries by this key (${perKey.limit} an hour)`,
    );
    await this.rateLimiter.hit(
      `webhook-redeliver:delivery:${delivery.id}`,
      perDelivery.limit,
      perDelivery.windowSeconds,
      `redeliveries of this delivery (${perDelivery.limit} an hour)`,
    );
    await this.store.read((r) => r.webhooks.deliveries.reopen(delivery.id, this.clock.now()));
    // The same unique key as its retries: a retry waiting is moved to now rather than doubled.
    await this.jobs.now('webhooks.deliver', { deliveryId: delivery.id }, { uniqueKey: delivery.id });
  }

  private async endpoint(viewer: Viewer, id: string): Promise<ListedEndpoint> {
    const endpoint = await this.store.read((r) => r.webhooks.endpoints.visibleOne(viewer, id));
    if (!endpoint) throw new AppError('NOT_FOUND', 'No webhook endpoint with this id for this key.');
    return endpoint;
  }

  /**
   * The URL an endpoint may have, as parsed: the rules of its text and scheme, then (unless
   * private destinations are allowed) its addresses.
   */
  private async destination(raw: string): Promise<string> {
    const allow = this.opts.allowPrivateDestinations;
    const problem = urlProblem(raw, allow);
    if (problem) throw new AppError('VALIDATION_FAILED', `Invalid request: ${problem}.`);
    const url = new URL(raw);
    if (allow) return url.href;
    try {
      await vettedAddress(url, false, this.opts.resolve ?? systemResolver);
    } catch (err) {
      if (err instanceof DestinationRefused)
        throw new AppError('VALIDATION_FAILED', `Invalid request: url: ${err.message}.`);
      throw err;
    }
    return url.href;
  }
}
