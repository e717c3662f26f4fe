import type { InventoryRepository } from '../../../src/modules/inventory/inventory.repository.js';
import { Offer } from '../../../src/modules/inventory/offer.entity.js';
import type {
  CachedOfferState,
  IntentShape,
  InventoryStamp,
  ListedOffer,
  OfferCacheRepository,
} from '../../../src/modules/inventory/offers.repository.js';
import { ProviderStatus } from '../../../src/modules/inventory/provider-status.entity.js';
import type { ProviderStatusRepository } from '../../../src/modules/inventory/provider-status.repository.js';
import type { ProviderErrorClass } from '../../../src/providers/provider.js';
import type { MemoryTables } from './memory-store.js';

/** The one row of `inventory_state`, as the migration starts it: version 0, never refreshed. */
interface InventoryStateRow {
  version: number;
  refreshedAt: Date | null;
}

const STATE_KEY = '1';

/** Ids compared as the utf8mb4_bin collation of `offers.id` does (byte order, which is code order for ASCII). */
const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** `offers` and `inventory_state` in memory: offers keyed by id, the state by its one id. */
export class MemoryOfferCache implements OfferCacheRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get offers() {
    return this.tables.table<Offer>('offers');
  }

  private get state() {
    return this.tables.table<InventoryStateRow>('inventory_state');
  }

  private currentState(): InventoryStateRow {
    return this.state.get(STATE_KEY) ?? { version: 0, refreshedAt: null };
  }

  async stamp(): Promise<InventoryStamp> {
    const s = this.currentState();
    return { version: s.version, refreshedAt: s.refreshedAt?.getTime() ?? null };
  }

  async listedPastAge(now: Date): Promise<boolean> {
    return this.offers.first((o) => o.available && o.staleAt.getTime() <= now.getTime()) !== undefined;
  }

  async liveByPrice(now: Date): Promise<Offer[]> {
    return this.offers
      .where((o) => o.available && o.staleAt.getTime() > now.getTime())
      .sort((a, b) => a.pricePerHourMinor - b.pricePerHourMinor || a.gpuCount - b.gpuCount || byId(a, b));
  }

  async cached(id: string): Promise<Offer | null> {
    return this.offers.get(id) ?? null;
  }

  async byIds(ids: readonly string[]): Promise<Offer[]> {
    const wanted = new Set(ids);
    return this.offers.where((o) => wanted.has(o.id));
  }

  async cheapestOfShape(shape: IntentShape, limit: number): Promise<Offer[]> {
    // `= NULL` and `<= NULL` match nothing in SQL.
    const { gpuCount, maxHourlyPriceMinor: max } = shape;
    if (gpuCount === null || max === null) return [];
    return this.offers
      .where((o) => shape.slugs.includes(o.slug) && o.gpuCount === gpuCount && o.pricePerHourMinor <= max)
      .sort((a, b) => a.pricePerHourMinor - b.pricePerHourMinor || byId(a, b))
      .slice(0, limit);
  }

  async lockVersion(): Promise<void> {
    // Memory transactions run one at a time: holding the row is implied.
  }

  async markRefreshed(now: Date, changed: boolean): Promise<void> {
    const s = this.currentState();
    this.state.put(STATE_KEY, { version: s.version + (changed ? 1 : 0), refreshedAt: now });
  }

  async statesOf(provider: string): Promise<CachedOfferState[]> {
    return this.offers
      .where((o) => o.provider === provider)
      .map((o) => ({
        id: o.id,
        available: o.available,
        slug: o.slug,
        name: o.name,
        category: o.category,
        region: o.region,
        capCustomImage: o.capCustomImage,
        capStartupScript: o.capStartupScript,
        capPorts: o.capPorts,
        capMaxDiskGb: o.capMaxDiskGb,
      }));
  }

  async upsertListed(listed: readonly ListedOffer[]): Promise<void> {
    for (const { seenAt, ...o } of listed) {
      const renewed = {
        available: true,
        name: o.name,
        slug: o.slug,
        category: o.category,
        region: o.region,
        costPerHourMinor: o.costPerHourMinor,
        lastSeenAt: seenAt,
        staleAt: o.staleAt,
        capCustomImage: o.capCustomImage,
        capStartupScript: o.capStartupScript,
        capPorts: o.capPorts,
        capMaxDiskGb: o.capMaxDiskGb,
        trafficUpCostMicro: o.trafficUpCostMicro,
        trafficDownCostMicro: o.trafficDownCostMicro,
      };
      if (!this.offers.update(o.id, renewed))
        this.offers.insert(o.id, Object.assign(new Offer(), o, renewed, { firstSeenAt: seenAt }));
    }
  }

  async withdraw(ids: readonly string[]): Promise<void> {
    for (const id of ids) this.offers.update(id, { available: false });
  }

  async withdrawStale(provider: string, now: Date): Promise<number> {
    return this.withdrawWhere((o) => o.provider === provider && o.staleAt.getTime() <= now.getTime());
  }

  async withdrawNotOf(configured: readonly string[]): Promise<number> {
    if (configured.length === 0) throw new Error('withdrawNotOf: `NOT IN ()` is not SQL');
    return this.withdrawWhere((o) => !configured.includes(o.provider));
  }

  private withdrawWhere(pred: (o: Offer) => boolean): number {
    const keys = this.offers.keysWhere((o) => o.available && pred(o));
    for (const k of keys) this.offers.update(k, { available: false });
    return keys.length;
  }
}

/** `provider_status` in memory, keyed by provider id. */
export class MemoryProviderStatus implements ProviderStatusRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get rows() {
    return this.tables.table<ProviderStatus>('provider_status');
  }

  async all(): Promise<ProviderStatus[]> {
    return this.rows.all();
  }

  /** Inserts `fresh` when the provider has no row, else applies `patch` (INSERT … ON DUPLICATE KEY UPDATE). */
  private upsert(providerId: string, fresh: Omit<ProviderStatus, 'providerId'>, patch: Partial<ProviderStatus>): void {
    if (!this.rows.update(providerId, patch))
      this.rows.insert(providerId, Object.assign(new ProviderStatus(), { providerId, ...fresh }));
  }

  async recordRefreshSuccess(provider: string, now: Date, offerCount: number): Promise<void> {
    const success = { lastRefreshAt: now, lastRefreshOk: true, lastSuccessAt: now, offerCount };
    this.upsert(provider, { ...success, lastErrorClass: null, lastErrorAt: null }, success);
  }

  async recordRefreshFailure(provider: string, now: Date, errorClass: ProviderErrorClass): Promise<void> {
    const failure = { lastRefreshAt: now, lastRefreshOk: false, lastErrorClass: errorClass, lastErrorAt: now };
    this.upsert(provider, { ...failure, lastSuccessAt: null, offerCount: 0 }, failure);
  }

  async recordError(provider: string, errorClass: ProviderErrorClass, at: Date): Promise<void> {
    const error = { lastErrorClass: errorClass, lastErrorAt: at };
    this.upsert(
      provider,
      { ...error, lastRefreshAt: null, lastRefreshOk: false, lastSuccessAt: null, offerCount: 0 },
      error,
    );
  }
}

/** The inventory aggregate in memory. */
export class MemoryInventoryRepository implements InventoryRepository {
  readonly offers: OfferCacheRepository;
  readonly providerStatus: ProviderStatusRepository;

  constructor(tables: MemoryTables) {
    this.offers = new MemoryOfferCache(tables);
    this.providerStatus = new MemoryProviderStatus(tables);
  }
}
