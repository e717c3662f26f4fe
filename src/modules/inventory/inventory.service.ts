import type { Clock } from '../../clock.js';
import { AppError } from '../../errors/app-error.js';
import type { Logger } from '../../logger.js';
import { trafficPriceOfColumns } from '../../providers/pricing.js';
import type { ProviderRegistry } from '../../providers/provider-registry.js';
import { MODELS_BY_SLUG } from './gpu-catalog.js';
import { closestGpuSlugs, familyOfSlug, matchGpuQuery, type GpuMatch } from './gpu-match.js';
import { EnvelopeWire } from './envelope-wire.js';
import { CURRENCY, InventoryRefresher, type RefreshResult } from './inventory-refresh.js';
import type { GpuModelDetailDto, GpuModelDto, GpuSummaryDto, OfferDto, ProviderStatusDto } from './inventory.dto.js';
import {
  findIntentCandidates,
  slugMatches,
  type IntentCandidates,
  type IntentQuery,
  type LiveOffers,
  type MachineNeeds,
} from './offer-candidates.js';
import { offerCapabilities, type Offer } from './offer.entity.js';
import { liveUntil, type InventoryStamp } from './offers.repository.js';
import { readProviderStatuses, withDriftCounts, type ProviderStatusStore } from './provider-status.js';

export type { RefreshResult } from './inventory-refresh.js';

const VERSION_CHECK_MS = 1000;

/** Distinct `?gpu=` answers kept per snapshot; past it the memo starts over (input is unbounded). */
const MAX_MEMOIZED_QUERIES = 256;

/** One inventory answer: its data, and the envelope around it serialised once, with its ETag. */
export interface Cached<T> {
  etag: string;
  body: T;
  wire: EnvelopeWire;
}

/**
 * One inventory answer, read one of two ways: `now()` without waiting (undefined when the snapshot
 * is due for its version check or a reload), `wait()` after that check or reload. Both fail alike
 * (an unknown offer or model is NOT_FOUND): `now()` throws, `wait()` rejects.
 */
export interface CachedRead<T> {
  now(): Cached<T> | undefined;
  wait(): Promise<Cached<T>>;
}

function cached<T>(what: string, body: T): Cached<T> {
  const wire = new EnvelopeWire(body, what);
  return { etag: wire.etag, body, wire };
}

interface Snapshot {
  /** The inventory state read just before the offers were. */
  stamp: InventoryStamp;
  /**
   * Whether offers still listed were left out for their age alone: a refresh renews those without
   * moving the version, so this snapshot follows the refresh time as well (see {@link mustReload}).
   */
  agedOut: boolean;
  /** The first moment an offer of this snapshot goes stale (or the copy is too old): reload then, whatever the version. */
  expiresAt: number;
  offers: OfferDto[];
  /** Offer id to the offer: admission's lookup, whatever the size of the inventory. */
  byId: Map<string, OfferDto>;
  bySlug: Map<string, OfferDto[]>;
  /** Offer id to its model slug. */
  slugOf: Map<string, string>;
  /** The offers of each GPU match asked for so far, by `GpuMatch.key` (at most {@link MAX_MEMOIZED_QUERIES}). */
  offersByMatch: Map<string, OfferDto[]>;
  offersByQuery: Map<string, Cached<OfferDto[]>>;
  /** GPU-intent matching's view of this snapshot. */
  live: LiveOffers;
  /** `/offers/{id}` answers asked for so far (at most {@link MAX_MEMOIZED_QUERIES}). */
  offerById: Map<string, Cached<OfferDto>>;
  modelBySlug: Map<string, Cached<GpuModelDetailDto>>;
  allOffers: Cached<OfferDto[]>;
  gpus: Cached<GpuSummaryDto>;
}

export interface InventoryOptions {
  publicBaseUrl: string;
  offerMaxAgeSeconds: number;
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
    provider: o.provider,
    capabilities: offerCapabilities(o),
  };
  if (o.cpuCores !== null) dto.cpuCores = o.cpuCores;
  if (o.memoryGb !== null) dto.memoryGb = o.memoryGb;
  if (o.storageGb !== null) dto.storageGb = o.storageGb;
  if (o.region !== null) dto.region = o.region;
  const traffic = trafficPriceOfColumns(o.trafficUpPriceMicro, o.trafficDownPriceMicro);
  if (traffic) dto.trafficPricePerGb = { upMicroUsd: traffic.upMicroUsdPerGb, downMicroUsd: traffic.downMicroUsdPerGb };
  return dto;
}

/** THE traffic filter of the offers list: an offer's dearer per-GB price is at most `max` (free traffic is 0). */
export function trafficWithin(o: Pick<OfferDto, 'trafficPricePerGb'>, max: number): boolean {
  const t = o.trafficPricePerGb;
  return !t || Math.max(t.upMicroUsd, t.downMicroUsd) <= max;
}

/**
 * The offer cache: the worker refreshes it from providers into MySQL; every api process serves
 * an in-memory copy that it reloads when the shared version counter moves or an offer goes stale
 * (and, while offers are missing from it for their age, after every refresh: {@link mustReload}).
 */
export class InventoryService {
  private snapshot?: Snapshot;
  private checkedAt = 0;
  private loading?: Promise<Snapshot>;
  private readonly refresher: InventoryRefresher;

  constructor(
    private readonly store: ProviderStatusStore,
    private readonly providers: ProviderRegistry,
    private readonly clock: Clock,
    logger: Logger,
    private readonly options: InventoryOptions,
  ) {
    this.refresher = new InventoryRefresher(store, providers, clock, logger, options.offerMaxAgeSeconds);
  }

  /** Pulls every provider's offers into the cache, each provider independently of the others. */
  async refresh(): Promise<RefreshResult[]> {
    return this.refresher.refreshAll();
  }

  /** The snapshot when it needs neither a version check nor a reload: readable without waiting. */
  private ready(): Snapshot | undefined {
    const s = this.snapshot;
    if (!s || Date.now() - this.checkedAt >= VERSION_CHECK_MS || this.clock.now().getTime() >= s.expiresAt)
      return undefined;
    return s;
  }

  /** The current in-memory snapshot, reloaded when another process has changed the cache. */
  private async current(): Promise<Snapshot> {
    const ready = this.ready();
    if (ready) return ready;
    this.loading ??= (async () => {
      try {
        const stamp = await this.store.read((r) => r.inventory.offers.stamp());
        if (mustReload(this.snapshot, stamp, this.clock.now().getTime())) this.snapshot = await this.load(stamp);
        this.checkedAt = Date.now();
        return this.snapshot!;
      } finally {
        this.loading = undefined;
      }
    })();
    return this.loading;
  }

  /** Drops the in-memory copy so the next read reloads (tests, and after a local refresh). */
  invalidate(): void {
    this.checkedAt = 0;
    this.snapshot = undefined;
  }

  private async load(stamp: InventoryStamp): Promise<Snapshot> {
    const now = this.clock.now();
    // Asked before the offers: a refresh landing in between makes one reload too many, never one too few.
    const agedOut = await this.store.read((r) => r.inventory.offers.listedPastAge(now));
    const rows = await this.store.read((r) => r.inventory.offers.liveByPrice(now));
    const offers = rows.map(toDto);
    const bySlug = new Map<string, OfferDto[]>();
    const slugOf = new Map<string, string>();
    for (const [i, r] of rows.entries()) {
      slugOf.set(r.id, r.slug);
      const list = bySlug.get(r.slug) ?? [];
      list.push(offers[i]);
      bySlug.set(r.slug, list);
    }
    const models = [...bySlug.entries()]
      .map(([slug, list]) => this.modelRow(slug, list))
      .sort((a, b) => a.minPricePerHourMinor - b.minPricePerHourMinor || a.slug.localeCompare(b.slug));
    const gpusBody: GpuSummaryDto = {
      generatedAt: now.toISOString(),
      unit: 'Prices are USD cents per hour for the whole instance (all GPUs of the offer together).',
      count: models.length,
      offersUrl: `${this.options.publicBaseUrl}/api/v1/offers`,
      models,
    };
    const expiresAt = liveUntil(rows, now, this.options.offerMaxAgeSeconds);
    const allOffers = cached('offers', offers);
    const gpus = cached('gpus', gpusBody);
    // Compressed before the snapshot is served, so no request of the two hot paths waits for it.
    await Promise.all([allOffers.wire.prepare(), gpus.wire.prepare()]);
    const byId = new Map(offers.map((o) => [o.id, o]));
    const s: Snapshot = {
      stamp,
      agedOut,
      expiresAt,
      offers,
      byId,
      bySlug,
      slugOf,
      offersByMatch: new Map(),
      offersByQuery: new Map(),
      live: {
        ofMatch: (match) => matchingOffers(s, match),
        slugs: () => bySlug.keys(),
        slugOf: (offer) => slugOf.get(offer.id)!,
      },
      offerById: new Map(),
      modelBySlug: new Map(),
      allOffers,
      gpus,
    };
    return s;
  }

  /** One `/gpus` row: the catalog's name, category and VRAM, prices across every provider. */
  private modelRow(slug: string, list: OfferDto[]): GpuModelDto {
    const base = `${this.options.publicBaseUrl}/api/v1`;
    const cheapest = list[0];
    const model = MODELS_BY_SLUG.get(slug);
    return {
      slug,
      name: model?.name ?? cheapest.name,
      family: familyOfSlug(slug),
      category: model?.category ?? cheapest.category,
      vramGb: model?.vramGb ?? cheapest.vramGb,
      availableOffers: list.length,
      availableGpus: list.reduce((n, o) => n + o.gpuCount, 0),
      minPricePerHourMinor: cheapest.pricePerHourMinor,
      maxPricePerHourMinor: Math.max(...list.map((o) => o.pricePerHourMinor)),
      cheapestOfferId: cheapest.id,
      currency: CURRENCY,
      maximumDurationSeconds: Math.max(...list.map((o) => o.maximumDurationSeconds)),
      providers: [...new Set(list.map((o) => o.provider))].sort(),
      url: `${base}/gpus/${slug}`,
      offersUrl: `${base}/offers?gpu=${slug}`,
    };
  }

  /** Every read below, for the fast route (`now`, no promise while current) and the controller (`wait`). */
  private read<T>(answer: (s: Snapshot) => Cached<T>): CachedRead<T> {
    return {
      now: () => {
        const s = this.ready();
        return s && answer(s);
      },
      wait: async () => answer(await this.current()),
    };
  }

  /**
   * Every live offer, or those of a GPU family or model (`?gpu=`), cheapest first; with
   * `maxTrafficMicroUsdPerGb`, only those whose traffic costs at most that per GB.
   */
  listOffers(gpu?: string, maxTrafficMicroUsdPerGb?: number): CachedRead<OfferDto[]> {
    return this.read((s) => this.offersOf(s, gpu, maxTrafficMicroUsdPerGb));
  }

  private offersOf(s: Snapshot, gpu: string | undefined, maxTraffic?: number): Cached<OfferDto[]> {
    if (gpu === undefined && maxTraffic === undefined) return s.allOffers;
    const match = gpu === undefined ? undefined : matchGpuQuery(gpu);
    const key = `${match?.key ?? '*'}|${maxTraffic ?? ''}`;
    let hit = s.offersByQuery.get(key);
    if (!hit) {
      const offers = match ? matchingOffers(s, match) : s.offers;
      hit = cached(
        `offers:${key}`,
        maxTraffic === undefined ? offers : offers.filter((o) => trafficWithin(o, maxTraffic)),
      );
      if (s.offersByQuery.size >= MAX_MEMOIZED_QUERIES) s.offersByQuery.clear();
      s.offersByQuery.set(key, hit);
    }
    return hit;
  }

  /** One live offer by id (`GET /api/v1/offers/{id}`). */
  offer(id: string): CachedRead<OfferDto> {
    return this.read((s) => this.offerOf(s, id));
  }

  private offerOf(s: Snapshot, id: string): Cached<OfferDto> {
    let hit = s.offerById.get(id);
    if (!hit) {
      const offer = s.byId.get(id);
      if (!offer)
        throw new AppError(
          'NOT_FOUND',
          `No offer ${id} is currently offered. See GET /api/v1/offers for current offers.`,
        );
      hit = cached(`offer:${id}`, offer);
      if (s.offerById.size >= MAX_MEMOIZED_QUERIES) s.offerById.clear();
      s.offerById.set(id, hit);
    }
    return hit;
  }

  /** Every GPU model on offer with its prices (`GET /api/v1/gpus`). */
  gpuSummary(): CachedRead<GpuSummaryDto> {
    return this.read((s) => s.gpus);
  }

  /** One model by slug or any spelling that names exactly one model on offer. */
  gpuModel(slugOrName: string): CachedRead<GpuModelDetailDto> {
    return this.read((s) => this.modelOf(s, slugOrName));
  }

  private modelOf(s: Snapshot, slugOrName: string): Cached<GpuModelDetailDto> {
    const direct = slugOrName.trim().toLowerCase();
    const match = matchGpuQuery(slugOrName);
    const offered = [...s.bySlug.keys()].filter((slug) => slugMatches(match, slug));
    const slug = s.bySlug.has(direct) ? direct : offered.length === 1 ? offered[0] : undefined;
    const model = slug === undefined ? undefined : s.gpus.body.models.find((g) => g.slug === slug);
    if (!slug || !model) {
      const hint =
        offered.length > 1
          ? `"${slugOrName}" names several models (${offered.join(', ')}); GET /api/v1/offers?gpu=${encodeURIComponent(slugOrName)} lists them all.`
          : `No GPU model "${slugOrName}" is currently offered${match.known ? '' : ` (closest known: ${closestGpuSlugs(slugOrName, s.bySlug.keys()).join(', ')})`}. See /api/v1/gpus for the list.`;
      throw new AppError('NOT_FOUND', hint);
    }
    let hit = s.modelBySlug.get(slug);
    if (!hit) {
      hit = cached(`gpu:${slug}`, { ...model, offers: s.bySlug.get(slug) ?? [] });
      s.modelBySlug.set(slug, hit);
    }
    return hit;
  }

  /**
   * What this process can serve now (readiness): how many live offers its snapshot holds, and
   * whether offers still listed are missing from it for their age alone (no worker renewed them).
   */
  async servableOffers(): Promise<{ live: number; agedOut: boolean }> {
    const s = await this.current();
    return { live: s.offers.length, agedOut: s.agedOut };
  }

  /** Each configured provider with the outcome of its refreshes (readiness: one query). */
  async providerStatuses(): Promise<ProviderStatusDto[]> {
    const s = await this.current();
    return readProviderStatuses(this.store, s.offers, this.providers, this.clock.now(), this.options);
  }

  /** GET /api/v1/providers: {@link providerStatuses} with each provider's drift counts (`ProviderDto`). */
  async providerListing() {
    return withDriftCounts(await this.providerStatuses(), await this.store.read((r) => r.providerDrift.counts()));
  }

  /**
   * Admission's candidates for a GPU intent, matched in the in-memory snapshot by
   * {@link findIntentCandidates}: no query while the snapshot is current, and the same version
   * check and reload as {@link liveOffer}, so both kinds of admission see the same offers.
   */
  async intentCandidates(q: IntentQuery, limit: number, needs?: MachineNeeds): Promise<IntentCandidates> {
    return findIntentCandidates((await this.current()).live, q, limit, needs);
  }

  /** A live offer of the in-memory snapshot (admission's read: no query while the snapshot is current). */
  async liveOffer(id: string): Promise<OfferDto | undefined> {
    return (await this.current()).byId.get(id);
  }

  /** Any offer the cache has ever held, available or not (admission needs the distinction). */
  async findCached(id: string): Promise<Offer | null> {
    return this.store.read((r) => r.inventory.offers.cached(id));
  }
}

/**
 * The one rule of when a snapshot is loaded again, given the inventory state just read: when it
 * reached its {@link Snapshot.expiresAt}; when the version moved (offers changed); and, while it
 * lacks offers for their age alone, when any refresh ran since it was loaded. A worker back from
 * an absence renews such offers without changing them, which moves no version: without the last
 * rule the snapshot would keep serving none of them until a restart.
 */
function mustReload(s: Snapshot | undefined, stamp: InventoryStamp, nowMs: number): boolean {
  if (!s || nowMs >= s.expiresAt || s.stamp.version !== stamp.version) return true;
  return s.agedOut && s.stamp.refreshedAt !== stamp.refreshedAt;
}

/**
 * The live offers of a GPU match in the snapshot's order (cheapest first, then fewest GPUs, then
 * id): the one filter behind `GET /api/v1/offers?gpu=` and GPU-intent matching.
 */
function matchingOffers(s: Snapshot, match: GpuMatch): OfferDto[] {
  let hit = s.offersByMatch.get(match.key);
  if (!hit) {
    hit = s.offers.filter((o) => slugMatches(match, s.slugOf.get(o.id)!));
    if (s.offersByMatch.size >= MAX_MEMOIZED_QUERIES) s.offersByMatch.clear();
    s.offersByMatch.set(match.key, hit);
  }
  return hit;
}
