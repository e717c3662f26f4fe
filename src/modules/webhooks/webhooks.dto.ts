import type { EventType } from '../events/event-types.js';

/** A URL to POST events to, and which events. */
export interface CreateWebhookEndpointRequest {
  /**
   * Where events are POSTed: `https`, on a public address (a development service also takes
   * loopback and private addresses, over `http` too). Kept and listed as parsed; one whose host
   * would read differently once parsed, or with control characters, is refused.
   * @maxLength 2048
   * @example "https://agent.example.com/hooks/gpu"
   */
  url: string;
  /**
   * The event types to receive, at least one.
   * @minItems 1
   * @maxItems 20
   */
  eventTypes: EventType[];
}

/** A webhook endpoint (never its secret, which only the create shows). */
export interface WebhookEndpointDto {
  id: string;
  url: string;
  eventTypes: EventType[];
  /** The agent key it belongs to (it receives what that key may see); null: the account's, made by an owner key. */
  keyId: string | null;
  /**
   * The key that made it (for an agent key's endpoint, that key): revoking that key stops the
   * endpoint. Null for an owner key's endpoint made before makers were recorded, which no key's
   * revocation stops (delete it to stop it).
   */
  makerKeyId: string | null;
  /** ACTIVE: it receives events; STOPPED: it receives nothing more and its pending deliveries are dropped (see `stoppedReason`). */
  status: 'ACTIVE' | 'STOPPED';
  /** Why it is STOPPED: MAKER_KEY_REVOKED, the key that made it was revoked (make another with a live key). Null while ACTIVE. */
  stoppedReason: 'MAKER_KEY_REVOKED' | null;
  /** @format date-time */
  createdAt: string;
}

/** The endpoint just made, with its signing secret. */
export interface WebhookEndpointCreated extends WebhookEndpointDto {
  /**
   * Verifies each delivery's `webhook-signature` (Standard Webhooks): shown on this answer only,
   * and `null` on a replay of the same Idempotency-Key. Keep it as a secret.
   * @example "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
   */
  secret: string | null;
}

/** One try of a delivery. */
export interface WebhookAttemptDto {
  /** @format date-time */
  attemptedAt: string;
  /** The receiver's HTTP status; null when there was no answer. */
  statusCode: number | null;
  /** Why the try failed without an answer (refused destination, timeout, connection error); null otherwise. */
  error: string | null;
  durationMs: number;
}

/** One event sent (or being sent) to one endpoint. */
export interface WebhookDeliveryDto {
  id: string;
  /** The event's id, sent as `webhook-id` on every try. */
  eventId: string;
  /** PENDING (waiting for its next try), SUCCEEDED (a 2xx answer), FAILED (24 hours of tries, or the endpoint is gone). */
  status: 'PENDING' | 'SUCCEEDED' | 'FAILED';
  /** @format date-time */
  createdAt: string;
  /** @format date-time */
  nextAttemptAt: string | null;
  /** @format date-time */
  completedAt: string | null;
  /** Tries, oldest first. */
  attempts: WebhookAttemptDto[];
}
