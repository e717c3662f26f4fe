import { createHash } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { v5 as uuidv5 } from 'uuid';
import type { Clock } from '../../clock.js';
import { AppError } from '../../errors/app-error.js';
import type { Logger } from '../../logger.js';
import type { ProviderOffer } from '../../providers/provider.js';
import type { ProviderRegistry } from '../../providers/provider-registry.js';
import { gpuSlug } from './gpu-slug.js';
import type { GpuModelDetailDto, GpuModelDto, GpuSummaryDto, OfferDto } from './inventory.dto.js';
import { Offer } from './offer.entity.js';

/** Namespace for offer ids; changing it would change every offer id. */
const OFFER_NAMESPACE = '5f6b1c7e-3f0e-4a53-9d3e-2c8f0b7a9e11';
const CURRENCY = 'USD';
const VERSION_CHECK_MS = 1000;

export interface RefreshResult {
  provider: string;
  ok: boolean;
  offers: number;
  added: number;
  removed: number;
  error?: string;
}

interface Snapshot {
  version: number;
  generatedAt: string;
  offers: OfferDto[];
  bySlug: Map<string, OfferDto[]>;
  slugOf: Map<string, string>;
  offersByGpu: Map<string, { etag: string; body: OfferDto[] }>;
  allOffers: { etag: string; body: OfferDto[] };
  gpus: { etag: string; body: GpuSummaryDto };
}

/** Deterministic id: the same provider offer at the same price and shape keeps its id. */
export function offerId(provider: string, o: ProviderOffer): string {
  const shape = [provider, o.key, o.name, o.pricePerHourMinor, o.gpuCount, o.vramGb, o.cpuCores ?? '', o.memoryGb ?? '', o.storageGb ?? '', o.maximumDurationSeconds];
  return uuidv5(shape.join('\u001f'), OFFER_NAMESPACE);
}

function toDto(o: Offer): OfferDto {
  const dto: OfferDto = {
    id: o.id,
    category: o.category,
    name: o.name,
    vramGb: o.vramGb,
    gpuCount: o.gpuCount,
    pricePerHourMinor: o.pricePerHourMinor,
    currency: o.currency,
    maximumDurationSeconds: o.maximumDurationSeconds,
  };
  if (o.cpuCores !== null) dto.cpuCores = o.cpuCores;
  if (o.memoryGb !== null) dto.memoryGb = o.memoryGb;
  if (o.storageGb !== null) dto.storageGb = o.storageGb;
  return dto;
}

function etagOf(version: number, what: string, body: unknown): string {
  return `W/"${version}-${createHash('sha1').update(what).update(JSON.stringify(body)).digest('base64url').slice(0, 16)}"`;
}

/**
 * The offer cache: the worker refreshes it from providers into MySQL; every api process serves
 * an in-memory copy that it reloads when the shared version counter moves.
 */
export class InventoryService {
  private snapshot?: Snapshot;
  private checkedAt = 0;
  private loading?: Promise<Snapshot>;

  constructor(
    private readonly ds: DataSource,
    private readonly providers: ProviderRegistry,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly publicBaseUrl: string,
  ) {}

  /** Pulls every provider's offers into the cache. A failing provider keeps its previous offers. */
  async refresh(): Promise<RefreshResult[]> {
    const results: RefreshResult[] = [];
    for (const provider of this.providers.all()) {
      let offers: ProviderOffer[];
      try {
        offers = await provider.listOffers();
      } catch (err) {
        this.logger.warn({ provider: provider.id, err: (err as Error).message }, 'inventory refresh failed; keeping cached offers');
        results.push({ provider: provider.id, ok: false, offers: 0, added: 0, removed: 0, error: (err as Error).message });
        continue;
      }
      results.push(await this.store(provider.id, offers));
    }
    return results;
  }

  private async store(provider: string, offers: ProviderOffer[]): Promise<RefreshResult> {
    const now = this.clock.now();
    return this.ds.transaction(async (m) => {
      // Serialises concurrent refreshes (several workers) on the version row.
      await m.query('SELECT version FROM inventory_state WHERE id = 1 FOR UPDATE');
      const existing: { id: string; available: number }[] = await m.query('SELECT id, available FROM offers WHERE provider = ?', [provider]);
      const was = new Map(existing.map((r) => [r.id, Number(r.available) === 1]));
      const seen = new Set<string>();
      let added = 0;
      for (const o of offers) {
        const id = offerId(provider, o);
        if (seen.has(id)) continue;
        seen.add(id);
        if (was.get(id) !== true) added++;
        await m.query(
          `INSERT INTO offers (id, provider, provider_offer_key, name, slug, category, vram_gb, gpu_count, cpu_cores, memory_gb,
             storage_gb, price_per_hour_minor, currency, maximum_duration_seconds, available, first_seen_at, last_seen_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
           ON DUPLICATE KEY UPDATE available = 1, last_seen_at = VALUES(last_seen_at)`,
          [id, provider, o.key, o.name.trim(), gpuSlug(o.name), o.category, o.vramGb, o.gpuCount, o.cpuCores ?? null, o.memoryGb ?? null,
            o.storageGb ?? null, o.pricePerHourMinor, CURRENCY, o.maximumDurationSeconds, now, now],
        );
      }
      const gone = [...was.entries()].filter(([id, avail]) => avail && !seen.has(id)).map(([id]) => id);
      if (gone.length) await m.query('UPDATE offers SET available = 0 WHERE id IN (?)', [gone]);
      const changed = added > 0 || gone.length > 0;
      await m.query(`UPDATE inventory_state SET refreshed_at = ?${changed ? ', version = version + 1' : ''} WHERE id = 1`, [now]);
      return { provider, ok: true, offers: seen.size, added, removed: gone.length };
    });
  }

  /** The current in-memory snapshot, reloaded when another process has changed the cache. */
  private async current(): Promise<Snapshot> {
    const nowMs = Date.now();
    if (this.snapshot && nowMs - this.checkedAt < VERSION_CHECK_MS) return this.snapshot;
    this.loading ??= (async () => {
      try {
        const [state] = await this.ds.query('SELECT version FROM inventory_state WHERE id = 1');
        const version = Number(state.version);
        if (!this.snapshot || this.snapshot.version !== version) this.snapshot = await this.load(version);
        this.checkedAt = Date.now();
        return this.snapshot;
      } finally {
        this.loading = undefined;
      }
    })();
    return this.loading;
  }

  /** Drops the in-memory copy so the next read reloads (tests, and after a local refresh). */
  invalidate(): void {
    this.checkedAt = 0;
  }

  private async load(version: number): Promise<Snapshot> {
    const rows = await this.ds.getRepository(Offer).find({
      where: { available: true },
      order: { pricePerHourMinor: 'ASC', gpuCount: 'ASC', id: 'ASC' },
    });
    const offers = rows.map(toDto);
    const bySlug = new Map<string, OfferDto[]>();
    const slugOf = new Map<string, string>();
    for (const [i, r] of rows.entries()) {
      slugOf.set(r.id, r.slug);
      const list = bySlug.get(r.slug) ?? [];
      list.push(offers[i]);
      bySlug.set(r.slug, list);
    }
    const base = `${this.publicBaseUrl}/api/v1`;
    const models: GpuModelDto[] = [...bySlug.entries()]
      .map(([slug, list]) => {
        const cheapest = list[0];
        return {
          slug,
          name: cheapest.name,
          category: cheapest.category,
          vramGb: cheapest.vramGb,
          availableOffers: list.length,
          availableGpus: list.reduce((n, o) => n + o.gpuCount, 0),
          minPricePerHourMinor: cheapest.pricePerHourMinor,
          maxPricePerHourMinor: Math.max(...list.map((o) => o.pricePerHourMinor)),
          cheapestOfferId: cheapest.id,
          currency: CURRENCY,
          maximumDurationSeconds: Math.max(...list.map((o) => o.maximumDurationSeconds)),
          url: `${base}/gpus/${slug}`,
          offersUrl: `${base}/offers?gpu=${slug}`,
        };
      })
      .sort((a, b) => a.minPricePerHourMinor - b.minPricePerHourMinor || a.slug.localeCompare(b.slug));
    const generatedAt = this.clock.now().toISOString();
    const gpusBody: GpuSummaryDto = {
      generatedAt,
      unit: 'Prices are USD cents per hour for the whole instance (all GPUs of the offer together).',
      count: models.length,
      offersUrl: `${base}/offers`,
      models,
    };
    const offersByGpu = new Map<string, { etag: string; body: OfferDto[] }>();
    for (const [slug, list] of bySlug) offersByGpu.set(slug, { etag: etagOf(version, `offers:${slug}`, list), body: list });
    return {
      version,
      generatedAt,
      offers,
      bySlug,
      slugOf,
      offersByGpu,
      allOffers: { etag: etagOf(version, 'offers', offers), body: offers },
      gpus: { etag: etagOf(version, 'gpus', models), body: gpusBody },
    };
  }

  async listOffers(gpu?: string): Promise<{ etag: string; body: OfferDto[] }> {
    const s = await this.current();
    if (gpu === undefined) return s.allOffers;
    const slug = gpuSlug(gpu);
    return s.offersByGpu.get(slug) ?? { etag: etagOf(s.version, `offers:${slug}`, []), body: [] };
  }

  async gpuSummary(): Promise<{ etag: string; body: GpuSummaryDto }> {
    return (await this.current()).gpus;
  }

  async gpuModel(slugOrName: string): Promise<{ etag: string; body: GpuModelDetailDto }> {
    const s = await this.current();
    const slug = gpuSlug(slugOrName);
    const model = s.gpus.body.models.find((m) => m.slug === slug);
    if (!model) throw new AppError('NOT_FOUND', `No GPU model "${slugOrName}" is currently offered. See /api/v1/gpus for the list.`);
    const body = { ...model, offers: s.bySlug.get(slug) ?? [] };
    return { etag: etagOf(s.version, `gpu:${slug}`, body), body };
  }

  /** Any offer the cache has ever held, available or not (admission needs the distinction). */
  async findCached(id: string): Promise<Offer | null> {
    return this.ds.getRepository(Offer).findOneBy({ id });
  }
}
