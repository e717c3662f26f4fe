import { ApiKey } from '../../../src/modules/keys/api-key.entity.js';
import type { Viewer } from '../../../src/modules/keys/visibility.js';
import type {
  DeliveryOfAccount,
  DeliveryTarget,
  NewDelivery,
  StoredAttempt,
  StoredDelivery,
  TryOutcome,
  WebhookDeliveriesRepository,
} from '../../../src/modules/webhooks/webhook-deliveries.repository.js';
import type {
  ListedEndpoint,
  StoredEndpoint,
  WebhookEndpointsRepository,
} from '../../../src/modules/webhooks/webhook-endpoints.repository.js';
import {
  checkSlotCount,
  MAX_SLOTS,
  type TakeResult,
  type TryToTake,
  type WebhookSlotsRepository,
} from '../../../src/modules/webhooks/webhook-slots.repository.js';
import type {
  WebhookSealedColumnsRepository,
  WebhooksRepository,
} from '../../../src/modules/webhooks/webhooks.repository.js';
import type { MemoryTables } from './memory-store.js';
import { MemorySealedColumn } from './sealed-column.js';

/*
 * The webhooks aggregate in memory, with what its SQL does: one delivery per endpoint and event,
 * the conditional updates of tries, claims and slots, and the orders of the listings. Rows are
 * keyed by id (a slot by account and number). An endpoint's maker is looked up among the
 * `api_keys` rows by id, as the MySQL side reads it from the accounts aggregate: a key with
 * `revokedAt` set stops it.
 */

type EndpointRow = StoredEndpoint & { deletedAt: Date | null };
type DeliveryRow = StoredDelivery & { claimedUntil: Date | null };
type AttemptRow = StoredAttempt & { id: string };
interface SlotRow {
  accountId: string;
  slot: number;
  deliveryId: string | null;
  heldUntil: Date | null;
}
interface KeyRow {
  id: string;
  revokedAt?: Date | null;
}

/** A stored ciphertext as a Buffer (a memory row's copy holds a plain Uint8Array). */
const bytes = (v: Uint8Array): Buffer => Buffer.from(v);

/** Ids in the byte order of the utf8mb4_bin collation (code order for ASCII ids). */
const byCode = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

const endpointOf = ({ deletedAt: _deleted, ...e }: EndpointRow): StoredEndpoint => ({
  ...e,
  secretSealed: bytes(e.secretSealed),
});

const deliveryOf = ({ claimedUntil: _claimed, ...d }: DeliveryRow): StoredDelivery => d;

const time = (d: Date | null): number | null => (d === null ? null : d.getTime());

class MemoryWebhookEndpoints implements WebhookEndpointsRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get rows() {
    return this.tables.table<EndpointRow>('webhook_endpoints');
  }

  /** Whether the key that made the endpoint (or, without a maker, the key it belongs to) is revoked. */
  makerRevoked(e: Pick<StoredEndpoint, 'makerKeyId' | 'keyId'>): boolean {
    const maker = e.makerKeyId ?? e.keyId;
    if (maker === null) return false;
    const key = this.tables.table<KeyRow>('api_keys').first((k) => k.id === maker);
    return key?.revokedAt !== undefined && key.revokedAt !== null;
  }

  /** The endpoint rule of webhook-endpoints.repository.ts: live and its maker not revoked. */
  receives(e: EndpointRow): boolean {
    return e.deletedAt === null && !this.makerRevoked(e);
  }

  async insert(e: StoredEndpoint): Promise<void> {
    if (!this.rows.insert(e.id, { ...e, deletedAt: null }))
      throw Object.assign(new Error(`Duplicate entry '${e.id}' for key 'PRIMARY'`), { code: 'ER_DUP_ENTRY' });
  }

  async lockMadeBy(makerKeyId: string): Promise<number> {
    return this.rows.where((e) => e.makerKeyId === makerKeyId && e.deletedAt === null).length;
  }

  private listed(viewer: Viewer, extra: (e: EndpointRow) => boolean): ListedEndpoint[] {
    return this.rows
      .where(
        (e) =>
          e.accountId === viewer.accountId &&
          (viewer.kind === 'OWNER' || e.keyId === viewer.keyId) &&
          e.deletedAt === null &&
          extra(e),
      )
      .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || byCode(a.id, b.id))
      .map((e) => ({ ...endpointOf(e), makerRevoked: this.makerRevoked(e) }));
  }

  async visible(viewer: Viewer): Promise<ListedEndpoint[]> {
    return this.listed(viewer, () => true);
  }

  async visibleOne(viewer: Viewer, id: string): Promise<ListedEndpoint | null> {
    return this.listed(viewer, (e) => e.id === id)[0] ?? null;
  }

  async markDeleted(id: string, at: Date): Promise<void> {
    const e = this.rows.get(id);
    if (e && e.deletedAt === null) this.rows.update(id, { deletedAt: at });
  }

  async receiving(accountIds: readonly string[]): Promise<StoredEndpoint[]> {
    return this.rows.where((e) => accountIds.includes(e.accountId) && this.receives(e)).map(endpointOf);
  }

  async earliestStart(): Promise<string | null> {
    const live = this.rows.where((e) => e.deletedAt === null).map((e) => BigInt(e.afterEventId));
    return live.length === 0 ? null : String(live.reduce((min, id) => (id < min ? id : min)));
  }
}

class MemoryWebhookDeliveries implements WebhookDeliveriesRepository {
  constructor(
    private readonly tables: MemoryTables,
    private readonly endpoints: MemoryWebhookEndpoints,
    private readonly slots: MemoryWebhookSlots,
  ) {}

  private get rows() {
    return this.tables.table<DeliveryRow>('webhook_deliveries');
  }

  private get attempts() {
    return this.tables.table<AttemptRow>('webhook_delivery_attempts');
  }

  async record(d: NewDelivery): Promise<boolean> {
    // INSERT IGNORE: the primary key and the unique (endpoint, event) both leave the row out.
    if (this.rows.has(d.id) || this.rows.first((r) => r.endpointId === d.endpointId && r.eventId === d.eventId))
      return false;
    return this.rows.insert(d.id, {
      id: d.id,
      endpointId: d.endpointId,
      accountId: d.accountId,
      eventId: d.eventId,
      status: 'PENDING',
      attempts: 0,
      firstAttemptAt: null,
      nextAttemptAt: d.at,
      createdAt: d.at,
      completedAt: null,
      claimedUntil: null,
    });
  }

  async pendingAccount(id: string): Promise<string | null> {
    const d = this.rows.get(id);
    return d?.status === 'PENDING' ? d.accountId : null;
  }

  async target(id: string): Promise<DeliveryTarget | null> {
    const d = this.rows.get(id);
    if (!d) return null;
    const e = this.tables.table<EndpointRow>('webhook_endpoints').get(d.endpointId);
    if (!e) return null;
    return { delivery: deliveryOf(d), endpoint: endpointOf(e), receiving: this.endpoints.receives(e) };
  }

  async recordTry(d: DeliveryOfAccount, t: TryOutcome): Promise<void> {
    this.slots.release(d.accountId, d.id);
    const id = this.attempts.nextId();
    this.attempts.insert(id, {
      id,
      deliveryId: d.id,
      attemptedAt: t.attemptedAt,
      statusCode: t.statusCode,
      error: t.error === null ? null : t.error.slice(0, 300),
      durationMs: t.durationMs,
    });
    const row = this.rows.get(d.id);
    if (!row) return;
    this.rows.update(d.id, {
      attempts: row.attempts + 1,
      firstAttemptAt: row.firstAttemptAt ?? t.attemptedAt,
      status: t.status,
      nextAttemptAt: t.nextAttemptAt,
      completedAt: t.status === 'PENDING' ? null : t.attemptedAt,
      claimedUntil: null,
    });
  }

  async close(d: DeliveryOfAccount, at: Date): Promise<void> {
    this.slots.release(d.accountId, d.id);
    if (this.rows.get(d.id)?.status !== 'PENDING') return;
    this.rows.update(d.id, { status: 'FAILED', completedAt: at, nextAttemptAt: null, claimedUntil: null });
  }

  async reopen(id: string, at: Date): Promise<void> {
    this.rows.update(id, { status: 'PENDING', firstAttemptAt: null, completedAt: null, nextAttemptAt: at });
  }

  async ofEndpoint(endpointId: string, limit: number): Promise<StoredDelivery[]> {
    return this.rows
      .where((d) => d.endpointId === endpointId)
      .sort((a, b) => (BigInt(b.eventId) > BigInt(a.eventId) ? 1 : -1))
      .slice(0, limit)
      .map(deliveryOf);
  }

  async one(endpointId: string, deliveryId: string): Promise<StoredDelivery | null> {
    const d = this.rows.get(deliveryId);
    return d && d.endpointId === endpointId ? deliveryOf(d) : null;
  }

  async attemptsOf(deliveryIds: readonly string[]): Promise<StoredAttempt[]> {
    return this.attempts
      .where((a) => deliveryIds.includes(a.deliveryId))
      .sort((a, b) => Number(a.id) - Number(b.id))
      .map(({ id: _id, ...a }) => a);
  }

  async accountsWithOverdue(dueBefore: Date, afterAccount: string, limit: number): Promise<string[]> {
    const due = this.rows.where(
      (d) =>
        d.status === 'PENDING' &&
        d.accountId > afterAccount &&
        d.nextAttemptAt !== null &&
        d.nextAttemptAt.getTime() < dueBefore.getTime(),
    );
    return [...new Set(due.map((d) => d.accountId))].sort(byCode).slice(0, limit);
  }

  async dueOf(accountId: string, dueBy: Date, wallNow: Date, limit: number): Promise<string[]> {
    return this.rows
      .where(
        (d) =>
          d.status === 'PENDING' &&
          d.accountId === accountId &&
          d.nextAttemptAt !== null &&
          d.nextAttemptAt.getTime() <= dueBy.getTime() &&
          (d.claimedUntil === null || d.claimedUntil.getTime() < wallNow.getTime()),
      )
      .sort((a, b) => a.nextAttemptAt!.getTime() - b.nextAttemptAt!.getTime())
      .slice(0, limit)
      .map((d) => d.id);
  }
}

class MemoryWebhookSlots implements WebhookSlotsRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get rows() {
    return this.tables.table<SlotRow>('webhook_delivery_slots');
  }

  /** Frees the slot `deliveryId` holds, if it holds one. */
  release(accountId: string, deliveryId: string): void {
    for (const k of this.rows.keysWhere((s) => s.accountId === accountId && s.deliveryId === deliveryId))
      this.rows.update(k, { deliveryId: null, heldUntil: null });
  }

  async take(t: TryToTake): Promise<TakeResult> {
    checkSlotCount(t.slots);
    const free = this.rows
      .where(
        (s) =>
          s.accountId === t.accountId &&
          s.slot < t.slots &&
          (s.heldUntil === null || s.heldUntil.getTime() < t.now.getTime()),
      )
      .sort((a, b) => a.slot - b.slot)[0];
    if (!free) return 'no-slot';
    this.rows.update(`${t.accountId}\u0000${free.slot}`, { deliveryId: t.deliveryId, heldUntil: t.until });
    const deliveries = this.tables.table<DeliveryRow>('webhook_deliveries');
    const d = deliveries.get(t.deliveryId);
    if (d && d.status === 'PENDING' && (time(d.claimedUntil) ?? -Infinity) < t.now.getTime()) {
      deliveries.update(t.deliveryId, { claimedUntil: t.until });
      return 'taken';
    }
    this.release(t.accountId, t.deliveryId);
    return 'busy';
  }

  async make(accountId: string, slots: number): Promise<void> {
    for (let slot = 0; slot < Math.min(slots, MAX_SLOTS); slot++)
      this.rows.insert(`${accountId}\u0000${slot}`, { accountId, slot, deliveryId: null, heldUntil: null });
  }

  async held(accountId: string, now: Date): Promise<number> {
    return this.rows.where(
      (s) => s.accountId === accountId && s.heldUntil !== null && s.heldUntil.getTime() >= now.getTime(),
    ).length;
  }
}

/** The webhooks aggregate in memory. */
export class MemoryWebhooksRepository implements WebhooksRepository {
  readonly endpoints: MemoryWebhookEndpoints;
  readonly deliveries: WebhookDeliveriesRepository;
  readonly slots: MemoryWebhookSlots;
  readonly sealed: WebhookSealedColumnsRepository;

  constructor(tables: MemoryTables) {
    this.endpoints = new MemoryWebhookEndpoints(tables);
    this.slots = new MemoryWebhookSlots(tables);
    this.deliveries = new MemoryWebhookDeliveries(tables, this.endpoints, this.slots);
    this.sealed = {
      signingSecrets: new MemorySealedColumn(tables, {
        table: 'webhook_endpoints',
        sealed: 'secretSealed',
        keyId: 'secretKeyId',
      }),
    };
  }
}

/**
 * Writes `api_keys` rows as the accounts aggregate keeps them (keyed by id), for what the
 * webhooks read of them: whether an endpoint's maker is revoked.
 */
export function memoryWebhooksSeed(tables: MemoryTables) {
  return {
    key(k: { id: string; accountId: string; kind?: 'OWNER' | 'AGENT'; revokedAt?: Date | null }): void {
      tables
        .table<ApiKey>('api_keys')
        .put(k.id, Object.assign(new ApiKey(), { kind: 'AGENT', revokedAt: null, createdAt: new Date(0), ...k }));
    },
    revoke(keyId: string, at: Date): void {
      const keys = tables.table<KeyRow>('api_keys');
      for (const k of keys.keysWhere((r) => r.id === keyId)) keys.update(k, { revokedAt: at });
    },
  };
}
