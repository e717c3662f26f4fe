import type { DataSource, EntityManager } from 'typeorm';
import { v5 as uuidv5 } from 'uuid';
import type { Clock } from '../../clock.js';
import type { Logger } from '../../logger.js';
import { customerPriceMinor } from '../../providers/pricing.js';
import type { ProviderErrorClass, ProviderOffer } from '../../providers/provider.js';
import { errorClassOf, ProviderApiError } from '../../providers/provider-http.js';
import type { ProviderRegistry, RegisteredProvider } from '../../providers/provider-registry.js';
import { resolveProviderGpu } from './gpu-match.js';

/** Namespace for offer ids; changing it would change every offer id. */
const OFFER_NAMESPACE = '5f6b1c7e-3f0e-4a53-9d3e-2c8f0b7a9e11';
export const CURRENCY = 'USD';

export interface RefreshResult {
  provider: string;
  ok: boolean;
  offers: number;
  /** Offers new or changed (name, model, region) since the previous refresh. */
  added: number;
  removed: number;
  /** For the worker's log only: never shown to customers (it may carry URLs). */
  error?: string;
  errorClass?: ProviderErrorClass;
}

/**
 * Deterministic id: the same provider offer at the same customer price and shape keeps its id;
 * a new markup or cost is a new offer, as a new price always was.
 */
export function offerId(provider: string, o: ProviderOffer, customerPrice: number): string {
  const shape = [provider, o.key, o.name, customerPrice, o.gpuCount, o.vramGb, o.cpuCores ?? '', o.memoryGb ?? '', o.storageGb ?? '', o.maximumDurationSeconds];
  if (o.region) shape.push(o.region);
  return uuidv5(shape.join('\u001f'), OFFER_NAMESPACE);
}

/**
 * Longest wait for one provider's listing. Plugins time their own calls out; this bound holds
 * even for one that does not, well inside the refresh job's lock lifetime.
 */
export const LIST_OFFERS_TIMEOUT_MS = 120_000;

/** GPU names the catalog did not know, logged once per process each. */
const reportedUnknown = new Set<string>();

/**
 * Offers written per statement: 5,000 offers take 10 statements instead of 5,000, and one
 * statement stays far below max_allowed_packet (a row is a few hundred bytes).
 */
export const UPSERT_BATCH_ROWS = 500;

const OFFER_COLUMNS = `id, provider, provider_offer_key, name, slug, category, vram_gb, gpu_count, cpu_cores, memory_gb, storage_gb,
  price_per_hour_minor, cost_per_hour_minor, region, currency, maximum_duration_seconds, available, first_seen_at, last_seen_at, stale_at`;

/**
 * One multi-row upsert. `VALUES(col)` in the update list is accepted by MariaDB and MySQL 8 alike
 * (MySQL 8.0.20 deprecates it in favour of row aliases, which MariaDB lacks). `first_seen_at`
 * keeps its first value; the price is part of the id, so it never changes in place.
 */
async function upsertOffers(m: EntityManager, rows: unknown[][]): Promise<void> {
  if (rows.length === 0) return;
  await m.query(
    `INSERT INTO offers (${OFFER_COLUMNS}) VALUES ?
     ON DUPLICATE KEY UPDATE available = 1, name = VALUES(name), slug = VALUES(slug), category = VALUES(category),
       region = VALUES(region), cost_per_hour_minor = VALUES(cost_per_hour_minor), last_seen_at = VALUES(last_seen_at), stale_at = VALUES(stale_at)`,
    [rows],
  );
}

interface Row {
  id: string;
  available: number;
  slug: string;
  name: string;
  category: string;
  region: string | null;
}

/**
 * Pulls every provider's offers into the cache, each provider on its own: one that fails (down,
 * bad key, 429) leaves the others' offers live and keeps its own until their `stale_at`.
 */
export class InventoryRefresher {
  constructor(
    private readonly ds: DataSource,
    private readonly providers: ProviderRegistry,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly offerMaxAgeSeconds: number,
    private readonly listTimeoutMs = LIST_OFFERS_TIMEOUT_MS,
  ) {}

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

  private async storeOutcome(entry: RegisteredProvider, outcome: { offers?: ProviderOffer[]; err?: unknown }): Promise<RefreshResult> {
    try {
      return outcome.offers ? await this.store(entry, outcome.offers) : await this.recordFailure(entry.id, outcome.err);
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
    await this.ds.transaction(async (m) => {
      await m.query('SELECT version FROM inventory_state WHERE id = 1 FOR UPDATE');
      const res = await m.query('UPDATE offers SET available = 0 WHERE available = 1 AND provider NOT IN (?)', [configured]);
      await this.bumpVersion(m, now, Number(res.affectedRows ?? 0) > 0);
    });
  }

  private async listOffers(entry: RegisteredProvider): Promise<ProviderOffer[]> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ProviderApiError('timeout', `${entry.id} listOffers: no answer within ${this.listTimeoutMs} ms`)), this.listTimeoutMs);
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

  private async store(entry: RegisteredProvider, offers: ProviderOffer[]): Promise<RefreshResult> {
    const now = this.clock.now();
    const provider = entry.id;
    return this.ds.transaction(async (m) => {
      // Serialises concurrent refreshes (several workers) on the version row.
      await m.query('SELECT version FROM inventory_state WHERE id = 1 FOR UPDATE');
      const existing: Row[] = await m.query('SELECT id, available, slug, name, category, region FROM offers WHERE provider = ?', [provider]);
      const was = new Map(existing.map((r) => [r.id, r]));
      const seen = new Set<string>();
      let changed = 0;
      const rows: unknown[][] = [];
      const staleAt = this.staleAt(now);
      for (const o of offers) {
        const price = customerPriceMinor(o.pricePerHourMinor, entry.markupPercent);
        const id = offerId(provider, o, price);
        if (seen.has(id)) continue;
        seen.add(id);
        const gpu = resolveProviderGpu(o.name, o.vramGb);
        if (!gpu.known) this.reportUnknown(provider, o.name, gpu.slug);
        const row = { slug: gpu.slug, name: gpu.name, category: gpu.category ?? o.category, region: o.region?.trim().slice(0, 64) || null };
        const before = was.get(id);
        if (!before || Number(before.available) !== 1 || before.slug !== row.slug || before.name !== row.name || before.category !== row.category || before.region !== row.region) {
          changed++;
        }
        rows.push([id, provider, o.key, row.name, row.slug, row.category, o.vramGb, o.gpuCount, o.cpuCores ?? null, o.memoryGb ?? null, o.storageGb ?? null,
          price, o.pricePerHourMinor, row.region, CURRENCY, o.maximumDurationSeconds, 1, now, now, staleAt]);
      }
      for (let i = 0; i < rows.length; i += UPSERT_BATCH_ROWS) await upsertOffers(m, rows.slice(i, i + UPSERT_BATCH_ROWS));
      const gone = existing.filter((r) => Number(r.available) === 1 && !seen.has(r.id)).map((r) => r.id);
      for (let i = 0; i < gone.length; i += UPSERT_BATCH_ROWS) {
        await m.query('UPDATE offers SET available = 0 WHERE id IN (?)', [gone.slice(i, i + UPSERT_BATCH_ROWS)]);
      }
      await this.bumpVersion(m, now, changed > 0 || gone.length > 0);
      await m.query(
        `INSERT INTO provider_status (provider_id, last_refresh_at, last_refresh_ok, last_success_at, offer_count) VALUES (?, ?, 1, ?, ?)
         ON DUPLICATE KEY UPDATE last_refresh_at = VALUES(last_refresh_at), last_refresh_ok = 1, last_success_at = VALUES(last_success_at),
           offer_count = VALUES(offer_count)`,
        [provider, now, now, seen.size],
      );
      return { provider, ok: true, offers: seen.size, added: changed, removed: gone.length };
    });
  }

  /** Keeps the provider's offers until their `stale_at`, then takes them off the list. */
  private async recordFailure(provider: string, err: unknown): Promise<RefreshResult> {
    const now = this.clock.now();
    const errorClass = errorClassOf(err);
    const message = err instanceof Error ? err.message : String(err);
    this.logger.warn({ provider, errorClass, err: message }, 'inventory refresh failed; keeping cached offers until they are stale');
    const removed = await this.ds.transaction(async (m) => {
      await m.query('SELECT version FROM inventory_state WHERE id = 1 FOR UPDATE');
      const res = await m.query('UPDATE offers SET available = 0 WHERE provider = ? AND available = 1 AND stale_at <= ?', [provider, now]);
      const expired = Number(res.affectedRows ?? 0);
      await this.bumpVersion(m, now, expired > 0);
      await m.query(
        `INSERT INTO provider_status (provider_id, last_refresh_at, last_refresh_ok, offer_count, last_error_class, last_error_at) VALUES (?, ?, 0, 0, ?, ?)
         ON DUPLICATE KEY UPDATE last_refresh_at = VALUES(last_refresh_at), last_refresh_ok = 0, last_error_class = VALUES(last_error_class),
           last_error_at = VALUES(last_error_at)`,
        [provider, now, errorClass, now],
      );
      return expired;
    });
    if (removed > 0) this.logger.warn({ provider, removed }, 'provider offers are stale and no longer offered');
    return { provider, ok: false, offers: 0, added: 0, removed, error: message, errorClass };
  }

  private async bumpVersion(m: EntityManager, now: Date, changed: boolean): Promise<void> {
    await m.query(`UPDATE inventory_state SET refreshed_at = ?${changed ? ', version = version + 1' : ''} WHERE id = 1`, [now]);
  }

  private reportUnknown(provider: string, name: string, slug: string): void {
    const key = `${provider}\u001f${name}`;
    if (reportedUnknown.has(key)) return;
    reportedUnknown.add(key);
    this.logger.warn({ provider, gpuName: name, slug }, 'GPU name not in the catalog; its offers are listed under a slug of their own');
  }
}
