import { v5 as uuidv5 } from 'uuid';
import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import type { Logger } from '../../logger.js';
import { customerPriceMinor, customerTrafficPrice } from '../../providers/pricing.js';
import {
  NO_MACHINE_CAPABILITIES,
  type MachineCapabilities,
  type ProviderErrorClass,
  type ProviderOffer,
  type TrafficPrice,
} from '../../providers/provider.js';
import { errorClassOf, ProviderApiError } from '../../providers/provider-http.js';
import { ProviderFailureLog } from '../../providers/provider-failures.js';
import type { ProviderRegistry, RegisteredProvider } from '../../providers/provider-registry.js';
import { resolveProviderGpu } from './gpu-match.js';
import type { InventoryRepository } from './inventory.repository.js';
import type { CachedOfferState, ListedOffer } from './offers.repository.js';

/** What the inventory's services stand on: the inventory aggregate alone. */
export type InventoryStore = Store<{ inventory: InventoryRepository }>;

/** Namespace for offer ids; changing it would change every offer id. */
const OFFER_NAMESPACE = '5f6b1c7e-3f0e-4a53-9d3e-2c8f0b7a9e11';
export const CURRENCY = 'USD';

export interface RefreshResult {
  provider: string;
  ok: boolean;
  offers: number;
  /** Offers new or changed (name, model, region, capabilities) since the previous refresh. */
  added: number;
  removed: number;
  /** For the worker's log only: never shown to customers (it may carry URLs). */
  error?: string;
  errorClass?: ProviderErrorClass;
}

/**
 * Deterministic id: the same provider offer at the same customer price and shape keeps its id;
 * a new markup or cost is a new offer, as a new price always was. The capabilities are not part of
 * it: a provider that learns to run images keeps its offers' ids (the change still moves the version).
 */
export function offerId(
  provider: string,
  o: ProviderOffer,
  customerPrice: number,
  customerTraffic: TrafficPrice | null = null,
): string {
  const shape = [
    provider,
    o.key,
    o.name,
    customerPrice,
    o.gpuCount,
    o.vramGb,
    o.cpuCores ?? '',
    o.memoryGb ?? '',
    o.storageGb ?? '',
    o.maximumDurationSeconds,
  ];
  if (o.region) shape.push(o.region);
  // Traffic terms are part of what is bought: a changed per-GB price is another offer.
  if (customerTraffic) shape.push(`traffic:${customerTraffic.upMicroUsdPerGb}/${customerTraffic.downMicroUsdPerGb}`);
  return uuidv5(shape.join('\u001f'), OFFER_NAMESPACE);
}

/** Largest port count an offer may declare: there are no more TCP ports. */
const MAX_PORTS = 65_535;

/** Largest disk an offer may declare, in GB: what the column holds. */
const MAX_DISK_GB = 2_147_483_647;

/**
 * What a listed offer's machine can be given, as the cache keeps it: absent is nothing, and a
 * value that cannot be true (a negative or fractional count) is nothing too, never a promise.
 */
export function declaredCapabilities(o: ProviderOffer): MachineCapabilities {
  const c = o.capabilities ?? NO_MACHINE_CAPABILITIES;
  const whole = (n: unknown, min: number, max: number): n is number =>
    Number.isSafeInteger(n) && (n as number) >= min && (n as number) <= max;
  return {
    customImage: c.customImage === true,
    startupScript: c.startupScript === true,
    ports: whole(c.ports, 0, MAX_PORTS) ? c.ports : 0,
    maxDiskGb: whole(c.maxDiskGb, 1, MAX_DISK_GB) ? c.maxDiskGb : null,
  };
}

/** Whether the cache's row says other than the listing about the offer's machine. */
function capabilitiesChanged(before: CachedOfferState, now: MachineCapabilities): boolean {
  return (
    before.capCustomImage !== now.customImage ||
    before.capStartupScript !== now.startupScript ||
    before.capPorts !== now.ports ||
    before.capMaxDiskGb !== now.maxDiskGb
  );
}

/**
 * Longest wait for one provider's listing. Plugins time their own calls out; this bound holds
 * even for one that does not, well inside the refresh job's lock lifetime.
 */
export const LIST_OFFERS_TIMEOUT_MS = 120_000;

/** GPU names the catalog did not know, logged once per process each. */
const reportedUnknown = new Set<string>();

/** How a failed refresh is named in the log. */
const REFRESH_ACTION = 'inventory refresh (cached offers kept until they are stale)';

/**
 * Pulls every provider's offers into the cache, each provider on its own: one that fails (down,
 * bad key, 429) leaves the others' offers live and keeps its own until their `stale_at`.
 */
export class InventoryRefresher {
  /** Each failing provider's refreshes: a stack the first time, then one line a refresh. */
  private readonly failures: ProviderFailureLog;

  constructor(
    private readonly store: InventoryStore,
    private readonly providers: ProviderRegistry,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly offerMaxAgeSeconds: number,
    private readonly listTimeoutMs = LIST_OFFERS_TIMEOUT_MS,
  ) {
    this.failures = new ProviderFailureLog(logger);
  }

  async refreshAll(): Promise<RefreshResult[]> {
    // Asked in parallel, stored one at a time as each answers: a provider that hangs until its
    // timeout delays no one else's offers.
    let storing: Promise<unknown> = Promise.resolve();
    const results = await Promise.all(
      this.providers.registered().map(async (entry) => {
        let outcome: { offers?: ProviderOffer[]; err?: unknown };
        try {
          outcome = { offers: await this.listOffers(entry) };
        } catch (err) {
          outcome = { err };
        }
        const stored = storing.then(() => this.storeOutcome(entry, outcome));
        storing = stored.catch(() => undefined);
        return stored;
      }),
    );
    await this.retireUnconfigured();
    return results;
  }

  private async storeOutcome(
    entry: RegisteredProvider,
    outcome: { offers?: ProviderOffer[]; err?: unknown },
  ): Promise<RefreshResult> {
    try {
      return outcome.offers
        ? await this.storeListing(entry, outcome.offers)
        : await this.recordFailure(entry.id, outcome.err);
    } catch (err) {
      // A bad answer we could not store (or a database hiccup) is this provider's failure alone.
      this.logger.error({ provider: entry.id, err }, 'inventory refresh could not be stored');
      return this.recordFailure(entry.id, err);
    }
  }

  /**
   * Offers of a provider taken out of PROVIDERS are not for sale, however fresh their rows: no
   * process of this deployment could create their instances.
   */
  private async retireUnconfigured(): Promise<void> {
    const configured = this.providers.registered().map((e) => e.id);
    if (configured.length === 0) return;
    const now = this.clock.now();
    await this.store.transaction(async ({ inventory: { offers } }) => {
      await offers.lockVersion();
      const retired = await offers.withdrawNotOf(configured);
      await offers.markRefreshed(now, retired > 0);
    });
  }

  private async listOffers(entry: RegisteredProvider): Promise<ProviderOffer[]> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(new ProviderApiError('timeout', `${entry.id} listOffers: no answer within ${this.listTimeoutMs} ms`)),
        this.listTimeoutMs,
      );
    });
    try {
      return await Promise.race([entry.provider.listOffers(), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  private staleAt(now: Date): Date {
    return new Date(now.getTime() + this.offerMaxAgeSeconds * 1000);
  }

  private async storeListing(entry: RegisteredProvider, offers: ProviderOffer[]): Promise<RefreshResult> {
    const now = this.clock.now();
    const provider = entry.id;
    return this.store.transaction(async ({ inventory }) => {
      // Serialises concurrent refreshes (several workers) on the version row.
      await inventory.offers.lockVersion();
      const existing = await inventory.offers.statesOf(provider);
      const was = new Map(existing.map((r) => [r.id, r]));
      const seen = new Set<string>();
      let changed = 0;
      const rows: ListedOffer[] = [];
      const staleAt = this.staleAt(now);
      for (const o of offers) {
        const price = customerPriceMinor(o.pricePerHourMinor, entry.markupPercent);
        const traffic = o.trafficPrice ? customerTrafficPrice(o.trafficPrice, entry.markupPercent) : null;
        const id = offerId(provider, o, price, traffic);
        if (seen.has(id)) continue;
        seen.add(id);
        const gpu = resolveProviderGpu(o.name, o.vramGb);
        if (!gpu.known) this.reportUnknown(provider, o.name, gpu.slug);
        const row = {
          slug: gpu.slug,
          name: gpu.name,
          category: gpu.category ?? o.category,
          region: o.region?.trim().slice(0, 64) || null,
        };
        const caps = declaredCapabilities(o);
        const before = was.get(id);
        if (
          !before ||
          !before.available ||
          before.slug !== row.slug ||
          before.name !== row.name ||
          before.category !== row.category ||
          before.region !== row.region ||
          capabilitiesChanged(before, caps)
        ) {
          changed++;
        }
        rows.push({
          id,
          provider,
          providerOfferKey: o.key,
          name: row.name,
          slug: row.slug,
          category: row.category,
          vramGb: o.vramGb,
          gpuCount: o.gpuCount,
          cpuCores: o.cpuCores ?? null,
          memoryGb: o.memoryGb ?? null,
          storageGb: o.storageGb ?? null,
          pricePerHourMinor: price,
          costPerHourMinor: o.pricePerHourMinor,
          region: row.region,
          currency: CURRENCY,
          maximumDurationSeconds: o.maximumDurationSeconds,
          seenAt: now,
          staleAt,
          capCustomImage: caps.customImage,
          capStartupScript: caps.startupScript,
          capPorts: caps.ports,
          capMaxDiskGb: caps.maxDiskGb,
          trafficUpCostMicro: o.trafficPrice?.upMicroUsdPerGb ?? null,
          trafficDownCostMicro: o.trafficPrice?.downMicroUsdPerGb ?? null,
          trafficUpPriceMicro: traffic?.upMicroUsdPerGb ?? null,
          trafficDownPriceMicro: traffic?.downMicroUsdPerGb ?? null,
        });
      }
      await inventory.offers.upsertListed(rows);
      const gone = existing.filter((r) => r.available && !seen.has(r.id)).map((r) => r.id);
      await inventory.offers.withdraw(gone);
      await inventory.offers.markRefreshed(now, changed > 0 || gone.length > 0);
      await inventory.providerStatus.recordRefreshSuccess(provider, now, seen.size);
      this.failures.succeeded(provider, REFRESH_ACTION);
      return { provider, ok: true, offers: seen.size, added: changed, removed: gone.length };
    });
  }

  /** Keeps the provider's offers until their `stale_at`, then takes them off the list. */
  private async recordFailure(provider: string, err: unknown): Promise<RefreshResult> {
    const now = this.clock.now();
    const errorClass = errorClassOf(err);
    const message = err instanceof Error ? err.message : String(err);
    this.failures.failed(provider, REFRESH_ACTION, err);
    const removed = await this.store.transaction(async ({ inventory }) => {
      await inventory.offers.lockVersion();
      const expired = await inventory.offers.withdrawStale(provider, now);
      await inventory.offers.markRefreshed(now, expired > 0);
      await inventory.providerStatus.recordRefreshFailure(provider, now, errorClass);
      return expired;
    });
    if (removed > 0) this.logger.warn({ provider, removed }, 'provider offers are stale and no longer offered');
    return { provider, ok: false, offers: 0, added: 0, removed, error: message, errorClass };
  }

  private reportUnknown(provider: string, name: string, slug: string): void {
    const key = `${provider}\u001f${name}`;
    if (reportedUnknown.has(key)) return;
    reportedUnknown.add(key);
    this.logger.warn(
      { provider, gpuName: name, slug },
      'GPU name not in the catalog; its offers are listed under a slug of their own',
    );
  }
}
