import { In, type DataSource, type EntityManager, type SelectQueryBuilder } from 'typeorm';
import { readMinor } from '../../db/columns.js';
import { Offer } from './offer.entity.js';

// The only code that reads or writes the offer cache (`offers`) and its version (`inventory_state`):
// the refresh's upserts and retirements, the snapshot every process serves and matches GPU intents
// from (inventory.service.ts, offer-candidates.ts), and the provision job's offers.

/**
 * The one rule of which cached offers are live: still listed by their provider at its last
 * successful refresh, and that refresh recent enough (`stale_at`, set by the refresh from
 * OFFER_MAX_AGE_SECONDS; a provider whose refreshes fail goes down as its offers pass it).
 * Everything that lists or admits offers by model goes through it: the snapshot is loaded with it
 * and held no longer than {@link liveUntil} says; only the provision job reads past it, on purpose
 * (below).
 */
function whereLive(qb: SelectQueryBuilder<Offer>, now: Date): SelectQueryBuilder<Offer> {
  return qb.where('o.available = 1 AND o.stale_at > :now', { now });
}

/**
 * The same rule for a copy of {@link liveOffersByPrice} held in memory, loaded at `loadedAt`: every
 * offer of it is live until the first moment one of them reaches its `stale_at` (epoch ms), so a
 * copy must be loaded again from then on; and no copy, an empty one included, is held past
 * `offerMaxAgeSeconds` after its loading, the longest an offer stays live without a refresh. An
 * offer withdrawn meanwhile moves the inventory version, which the holder checks as often as it
 * checks for any other change.
 */
export function liveUntil(rows: readonly Pick<Offer, 'staleAt'>[], loadedAt: Date, offerMaxAgeSeconds: number): number {
  return rows.reduce((min, r) => Math.min(min, r.staleAt.getTime()), loadedAt.getTime() + offerMaxAgeSeconds * 1000);
}

/**
 * Whether offers still listed are left out by {@link whereLive} at `now` for their age alone (no
 * successful refresh renewed them in time). A refresh that lists them again unchanged renews them
 * without moving the version, so a copy loaded without them must be loaded again after every
 * refresh until they are back or withdrawn (see {@link InventoryStamp}).
 */
export async function listedOffersPastAge(ds: DataSource, now: Date): Promise<boolean> {
  const rows: unknown[] = await ds.query('SELECT 1 FROM offers WHERE available = 1 AND stale_at <= ? LIMIT 1', [now]);
  return rows.length > 0;
}

/** The version every api process compares its snapshot against; it moves when the offers change. */
export async function inventoryVersion(ds: DataSource): Promise<number> {
  return (await inventoryStamp(ds)).version;
}

/**
 * What an api process compares its snapshot against, in one read: the version, which moves when
 * the offers change, and the moment of the latest refresh, which moves with every refresh.
 */
export interface InventoryStamp {
  version: number;
  /** Epoch ms of the latest refresh; null before the first. */
  refreshedAt: number | null;
}

export async function inventoryStamp(ds: DataSource): Promise<InventoryStamp> {
  const [state] = await ds.query('SELECT version, refreshed_at AS refreshedAt FROM inventory_state WHERE id = 1');
  return {
    version: readMinor(state.version),
    refreshedAt: state.refreshedAt === null ? null : new Date(state.refreshedAt).getTime(),
  };
}

/** Every live offer, cheapest first (then fewest GPUs, then id, so the order is stable). */
export async function liveOffersByPrice(ds: DataSource, now: Date): Promise<Offer[]> {
  return whereLive(ds.getRepository(Offer).createQueryBuilder('o'), now)
    .orderBy('o.price_per_hour_minor', 'ASC')
    .addOrderBy('o.gpu_count', 'ASC')
    .addOrderBy('o.id', 'ASC')
    .getMany();
}

/** Any offer the cache has ever held, live or not (rows are never deleted). */
export async function cachedOffer(ds: DataSource, id: string): Promise<Offer | null> {
  return ds.getRepository(Offer).findOneBy({ id });
}

/**
 * What a rental's machine settings ask of an offer's capabilities (the environment variables are
 * not among them: every offer takes those).
 */
// The refresh's statements, each in the caller's transaction (see inventory-refresh.ts).

/**
 * Offers written per statement: 5,000 offers take 10 statements instead of 5,000, and one
 * statement stays far below max_allowed_packet (a row is a few hundred bytes).
 */
export const UPSERT_BATCH_ROWS = 500;

/**
 * Locks the version row: every refresh takes it first, which serialises concurrent refreshes
 * (several workers) and makes their version moves follow one another.
 */
export async function lockInventoryVersion(m: EntityManager): Promise<void> {
  await m.query('SELECT version FROM inventory_state WHERE id = 1 FOR UPDATE');
}

/**
 * Stamps the refresh time, and moves the version only when `changed`: api processes reload
 * their snapshot when the version moves, so an unchanged refresh costs them nothing, unless their
 * snapshot lacks offers for their age alone, which the refresh time brings back.
 */
export async function markInventoryRefreshed(m: EntityManager, now: Date, changed: boolean): Promise<void> {
  await m.query(`UPDATE inventory_state SET refreshed_at = ?${changed ? ', version = version + 1' : ''} WHERE id = 1`, [
    now,
  ]);
}

/** What the refresh compares a provider's new listing against: whether an offer is new or changed. */
export interface CachedOfferState {
  id: string;
  /** 1 or 0, as MySQL returns it. */
  available: number;
  slug: string;
  name: string;
  category: string;
  region: string | null;
  /** 1 or 0, as MySQL returns it. */
  capCustomImage: number;
  /** 1 or 0, as MySQL returns it. */
  capStartupScript: number;
  capPorts: number;
  capMaxDiskGb: number | null;
}

/** Every offer of `provider` the cache holds, live or not, as the refresh compares it. */
export async function offerStatesOf(m: EntityManager, provider: string): Promise<CachedOfferState[]> {
  return m.query(
    `SELECT id, available, slug, name, category, region, cap_custom_image AS capCustomImage, cap_startup_script AS capStartupScript,
       cap_ports AS capPorts, cap_max_disk_gb AS capMaxDiskGb
     FROM offers WHERE provider = ?`,
    [provider],
  );
}

/** One offer as a provider listed it at `seenAt`, priced and matched to the catalog. */
export type ListedOffer = Pick<
  Offer,
  | 'id'
  | 'provider'
  | 'providerOfferKey'
  | 'name'
  | 'slug'
  | 'category'
  | 'vramGb'
  | 'gpuCount'
  | 'cpuCores'
  | 'memoryGb'
  | 'storageGb'
  | 'pricePerHourMinor'
  | 'costPerHourMinor'
  | 'region'
  | 'currency'
  | 'maximumDurationSeconds'
  | 'staleAt'
  | 'capCustomImage'
  | 'capStartupScript'
  | 'capPorts'
  | 'capMaxDiskGb'
> & { seenAt: Date };

const OFFER_COLUMNS = `id, provider, provider_offer_key, name, slug, category, vram_gb, gpu_count, cpu_cores, memory_gb, storage_gb,
  price_per_hour_minor, cost_per_hour_minor, region, currency, maximum_duration_seconds, available, first_seen_at, last_seen_at, stale_at,
  cap_custom_image, cap_startup_script, cap_ports, cap_max_disk_gb`;

/**
 * Writes the listed offers as available, {@link UPSERT_BATCH_ROWS} to a statement. `VALUES(col)` in
 * the update list is accepted by MariaDB and MySQL 8 alike (MySQL 8.0.20 deprecates it in favour of
 * row aliases, which MariaDB lacks). `first_seen_at` keeps its first value; the price is part of
 * the id, so it never changes in place; the capabilities are not, so they do.
 */
export async function upsertListedOffers(m: EntityManager, offers: readonly ListedOffer[]): Promise<void> {
  const rows = offers.map((o) => [
    o.id,
    o.provider,
    o.providerOfferKey,
    o.name,
    o.slug,
    o.category,
    o.vramGb,
    o.gpuCount,
    o.cpuCores,
    o.memoryGb,
    o.storageGb,
    o.pricePerHourMinor,
    o.costPerHourMinor,
    o.region,
    o.currency,
    o.maximumDurationSeconds,
    1,
    o.seenAt,
    o.seenAt,
    o.staleAt,
    o.capCustomImage,
    o.capStartupScript,
    o.capPorts,
    o.capMaxDiskGb,
  ]);
  for (let i = 0; i < rows.length; i += UPSERT_BATCH_ROWS) {
    await m.query(
      `INSERT INTO offers (${OFFER_COLUMNS}) VALUES ?
     ON DUPLICATE KEY UPDATE available = 1, name = VALUES(name), slug = VALUES(slug), category = VALUES(category),
       region = VALUES(region), cost_per_hour_minor = VALUES(cost_per_hour_minor), last_seen_at = VALUES(last_seen_at), stale_at = VALUES(stale_at),
       cap_custom_image = VALUES(cap_custom_image), cap_startup_script = VALUES(cap_startup_script), cap_ports = VALUES(cap_ports),
       cap_max_disk_gb = VALUES(cap_max_disk_gb)`,
      [rows.slice(i, i + UPSERT_BATCH_ROWS)],
    );
  }
}

/** Takes the offers `ids` off the list (their provider no longer lists them), {@link UPSERT_BATCH_ROWS} to a statement. */
export async function withdrawOffers(m: EntityManager, ids: readonly string[]): Promise<void> {
  for (let i = 0; i < ids.length; i += UPSERT_BATCH_ROWS) {
    await m.query('UPDATE offers SET available = 0 WHERE id IN (?)', [ids.slice(i, i + UPSERT_BATCH_ROWS)]);
  }
}

/** Takes off the list the offers of `provider` whose last sighting is too old by `now`; how many went. */
export async function withdrawStaleOffers(m: EntityManager, provider: string, now: Date): Promise<number> {
  const res = await m.query('UPDATE offers SET available = 0 WHERE provider = ? AND available = 1 AND stale_at <= ?', [
    provider,
    now,
  ]);
  return Number(res.affectedRows ?? 0);
}

/** Takes off the list every offer of a provider not in `configured`; how many went. `configured` must not be empty. */
export async function withdrawOffersNotOf(m: EntityManager, configured: readonly string[]): Promise<number> {
  const res = await m.query('UPDATE offers SET available = 0 WHERE available = 1 AND provider NOT IN (?)', [
    configured,
  ]);
  return Number(res.affectedRows ?? 0);
}

// The provision job's reads of the offer cache: the offers a rental may be created on, live or
// not (admission chose them; the provider has the last word). Which offers those are (the
// order's own list, or its GPU intent) is the provision job's rule.

/** What a GPU-intent order asks of an offer. */
export interface IntentShape {
  slugs: string[];
  gpuCount: number | null;
  maxHourlyPriceMinor: number | null;
}

/**
 * Up to `limit` cached offers of one of `shape.slugs` with exactly its GPU count at or under its
 * ceiling, cheapest first. Only orders written before admission stored their candidates come
 * here, and those have no machine settings, so no capability is asked of the offers.
 */
export function cheapestOffersOfShape(ds: DataSource, shape: IntentShape, limit: number): Promise<Offer[]> {
  const qb = ds
    .getRepository(Offer)
    .createQueryBuilder('o')
    .where('o.slug IN (:...slugs) AND o.gpu_count = :c AND o.price_per_hour_minor <= :max', {
      slugs: shape.slugs,
      c: shape.gpuCount,
      max: shape.maxHourlyPriceMinor,
    });
  return qb.orderBy('o.price_per_hour_minor', 'ASC').addOrderBy('o.id', 'ASC').take(limit).getMany();
}

/** The cached offers among `ids`, in no particular order (rows of the cache are never deleted, but an id may be unknown). */
export function offersByIds(ds: DataSource, ids: readonly string[]): Promise<Offer[]> {
  return ds.getRepository(Offer).findBy({ id: In([...ids]) });
}
