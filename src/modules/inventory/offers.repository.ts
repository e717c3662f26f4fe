import { In, type DataSource, type EntityManager, type SelectQueryBuilder } from 'typeorm';
import { readMinor } from '../../db/columns.js';
import type { Executor } from '../../db/mysql-store.js';
import { SqlTransaction } from '../../db/sql.js';
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
 * ({@link OfferCacheRepository.cheapestOfShape}).
 */
function whereLive(qb: SelectQueryBuilder<Offer>, now: Date): SelectQueryBuilder<Offer> {
  return qb.where('o.available = 1 AND o.stale_at > :now', { now });
}

/**
 * The same rule for a copy of {@link OfferCacheRepository.liveByPrice} held in memory, loaded at
 * `loadedAt`: every offer of it is live until the first moment one of them reaches its `stale_at`
 * (epoch ms), so a copy must be loaded again from then on; and no copy, an empty one included, is
 * held past `offerMaxAgeSeconds` after its loading, the longest an offer stays live without a
 * refresh. An offer withdrawn meanwhile moves the inventory version, which the holder checks as
 * often as it checks for any other change.
 */
export function liveUntil(rows: readonly Pick<Offer, 'staleAt'>[], loadedAt: Date, offerMaxAgeSeconds: number): number {
  return rows.reduce((min, r) => Math.min(min, r.staleAt.getTime()), loadedAt.getTime() + offerMaxAgeSeconds * 1000);
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

/**
 * Offers written per statement: 5,000 offers take 10 statements instead of 5,000, and one
 * statement stays far below max_allowed_packet (a row is a few hundred bytes).
 */
export const UPSERT_BATCH_ROWS = 500;

/** What the refresh compares a provider's new listing against: whether an offer is new or changed. */
export interface CachedOfferState {
  id: string;
  available: boolean;
  slug: string;
  name: string;
  category: string;
  region: string | null;
  capCustomImage: boolean;
  capStartupScript: boolean;
  capPorts: number;
  capMaxDiskGb: number | null;
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
  | 'trafficUpCostMicro'
  | 'trafficDownCostMicro'
  | 'trafficUpPriceMicro'
  | 'trafficDownPriceMicro'
> & { seenAt: Date };

/** What a GPU-intent order asks of an offer. */
export interface IntentShape {
  slugs: string[];
  gpuCount: number | null;
  maxHourlyPriceMinor: number | null;
}

/**
 * The offer cache and its version: the aggregate's half that the refresh writes, every api
 * process's snapshot reads, and the provision job reads past the live rule. Rows are never
 * deleted; an offer no longer listed is marked unavailable.
 */
export interface OfferCacheRepository {
  /** The version and the time of the latest refresh, in one read (see {@link InventoryStamp}). */
  stamp(): Promise<InventoryStamp>;
  /**
   * Whether offers still listed are left out of {@link liveByPrice} at `now` for their age alone
   * (no successful refresh renewed them in time). A refresh that lists them again unchanged renews
   * them without moving the version, so a copy loaded without them must be loaded again after
   * every refresh until they are back or withdrawn.
   */
  listedPastAge(now: Date): Promise<boolean>;
  /** Every offer live at `now`, cheapest first, then fewest GPUs, then id (a stable order). */
  liveByPrice(now: Date): Promise<Offer[]>;
  /** Any offer the cache has ever held, live or not; null for an id it never held. */
  cached(id: string): Promise<Offer | null>;
  /** The cached offers among `ids`, live or not, in no particular order; unknown ids are left out. */
  byIds(ids: readonly string[]): Promise<Offer[]>;
  /**
   * Up to `limit` cached offers, live or not, of one of `shape.slugs` with exactly its GPU count
   * at or under its ceiling, cheapest first (then by id); none when the count or the ceiling is
   * null. Only orders written before admission stored their candidates come here, and those have
   * no machine settings, so no capability is asked of the offers.
   */
  cheapestOfShape(shape: IntentShape, limit: number): Promise<Offer[]>;
  /**
   * Locks the version row until the transaction ends: every refresh takes it first, which
   * serialises concurrent refreshes (several workers) and makes their version moves follow one
   * another. In a transaction only.
   */
  lockVersion(): Promise<void>;
  /**
   * Stamps the refresh time `now`, and moves the version only when `changed`: api processes
   * reload their snapshot when the version moves, so an unchanged refresh costs them nothing,
   * unless their snapshot lacks offers for their age alone, which the refresh time brings back.
   */
  markRefreshed(now: Date, changed: boolean): Promise<void>;
  /** Every offer of `provider` the cache holds, live or not, in no particular order, as the refresh compares it. */
  statesOf(provider: string): Promise<CachedOfferState[]>;
  /**
   * Writes the listed offers as available, {@link UPSERT_BATCH_ROWS} to a statement. A known id
   * keeps its first sighting, provider, key, shape and price (the price is part of the id, so it
   * never changes in place) and takes the rest anew: name, model, category, region, cost, last
   * sighting, `stale_at` and capabilities.
   */
  upsertListed(offers: readonly ListedOffer[]): Promise<void>;
  /** Takes the offers `ids` off the list (their provider no longer lists them), {@link UPSERT_BATCH_ROWS} to a statement. */
  withdraw(ids: readonly string[]): Promise<void>;
  /** Takes off the list the available offers of `provider` whose `stale_at` is not after `now`; how many went. */
  withdrawStale(provider: string, now: Date): Promise<number>;
  /** Takes off the list every available offer of a provider not in `configured`; how many went. Rejects an empty `configured`. */
  withdrawNotOf(configured: readonly string[]): Promise<number>;
}

/**
 * TypeORM's reads of the entity run on the DataSource or a transaction's manager; a pipelined
 * transaction has neither (its statements are plain text), and no caller reads offers in one.
 */
export function entityReader(sql: Executor): DataSource | EntityManager {
  if (sql instanceof SqlTransaction) throw new Error('the offer cache is not read in a pipelined transaction');
  return sql;
}

const OFFER_COLUMNS = `id, provider, provider_offer_key, name, slug, category, vram_gb, gpu_count, cpu_cores, memory_gb, storage_gb,
  price_per_hour_minor, cost_per_hour_minor, region, currency, maximum_duration_seconds, available, first_seen_at, last_seen_at, stale_at,
  cap_custom_image, cap_startup_script, cap_ports, cap_max_disk_gb,
  traffic_up_cost_micro, traffic_down_cost_micro, traffic_up_price_micro, traffic_down_price_micro`;

export class MysqlOfferCacheRepository implements OfferCacheRepository {
  constructor(private readonly sql: Executor) {}

  async stamp(): Promise<InventoryStamp> {
    const [state] = await this.sql.query(
      'SELECT version, refreshed_at AS refreshedAt FROM inventory_state WHERE id = 1',
    );
    return {
      version: readMinor(state.version),
      refreshedAt: state.refreshedAt === null ? null : new Date(state.refreshedAt).getTime(),
    };
  }

  async listedPastAge(now: Date): Promise<boolean> {
    const rows: unknown[] = await this.sql.query('SELECT 1 FROM offers WHERE available = 1 AND stale_at <= ? LIMIT 1', [
      now,
    ]);
    return rows.length > 0;
  }

  liveByPrice(now: Date): Promise<Offer[]> {
    return whereLive(entityReader(this.sql).getRepository(Offer).createQueryBuilder('o'), now)
      .orderBy('o.price_per_hour_minor', 'ASC')
      .addOrderBy('o.gpu_count', 'ASC')
      .addOrderBy('o.id', 'ASC')
      .getMany();
  }

  cached(id: string): Promise<Offer | null> {
    return entityReader(this.sql).getRepository(Offer).findOneBy({ id });
  }

  byIds(ids: readonly string[]): Promise<Offer[]> {
    return entityReader(this.sql)
      .getRepository(Offer)
      .findBy({ id: In([...ids]) });
  }

  cheapestOfShape(shape: IntentShape, limit: number): Promise<Offer[]> {
    const qb = entityReader(this.sql)
      .getRepository(Offer)
      .createQueryBuilder('o')
      .where('o.slug IN (:...slugs) AND o.gpu_count = :c AND o.price_per_hour_minor <= :max', {
        slugs: shape.slugs,
        c: shape.gpuCount,
        max: shape.maxHourlyPriceMinor,
      });
    return qb.orderBy('o.price_per_hour_minor', 'ASC').addOrderBy('o.id', 'ASC').take(limit).getMany();
  }

  async lockVersion(): Promise<void> {
    await this.sql.query('SELECT version FROM inventory_state WHERE id = 1 FOR UPDATE');
  }

  async markRefreshed(now: Date, changed: boolean): Promise<void> {
    await this.sql.query(
      `UPDATE inventory_state SET refreshed_at = ?${changed ? ', version = version + 1' : ''} WHERE id = 1`,
      [now],
    );
  }

  async statesOf(provider: string): Promise<CachedOfferState[]> {
    // TINYINT(1) columns come back as 1 or 0, and nullable INTs as numbers or null.
    const rows: Record<string, unknown>[] = await this.sql.query(
      `SELECT id, available, slug, name, category, region, cap_custom_image AS capCustomImage, cap_startup_script AS capStartupScript,
       cap_ports AS capPorts, cap_max_disk_gb AS capMaxDiskGb
     FROM offers WHERE provider = ?`,
      [provider],
    );
    return rows.map((r) => ({
      id: String(r.id),
      available: Number(r.available) === 1,
      slug: String(r.slug),
      name: String(r.name),
      category: String(r.category),
      region: r.region === null ? null : String(r.region),
      capCustomImage: Number(r.capCustomImage) === 1,
      capStartupScript: Number(r.capStartupScript) === 1,
      capPorts: Number(r.capPorts),
      capMaxDiskGb: r.capMaxDiskGb === null ? null : Number(r.capMaxDiskGb),
    }));
  }

  // `VALUES(col)` in the update list is accepted by MariaDB and MySQL 8 alike (MySQL 8.0.20
  // deprecates it in favour of row aliases, which MariaDB lacks).
  async upsertListed(offers: readonly ListedOffer[]): Promise<void> {
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
      o.trafficUpCostMicro,
      o.trafficDownCostMicro,
      o.trafficUpPriceMicro,
      o.trafficDownPriceMicro,
    ]);
    for (let i = 0; i < rows.length; i += UPSERT_BATCH_ROWS) {
      await this.sql.query(
        `INSERT INTO offers (${OFFER_COLUMNS}) VALUES ?
     ON DUPLICATE KEY UPDATE available = 1, name = VALUES(name), slug = VALUES(slug), category = VALUES(category),
       region = VALUES(region), cost_per_hour_minor = VALUES(cost_per_hour_minor), last_seen_at = VALUES(last_seen_at), stale_at = VALUES(stale_at),
       cap_custom_image = VALUES(cap_custom_image), cap_startup_script = VALUES(cap_startup_script), cap_ports = VALUES(cap_ports),
       cap_max_disk_gb = VALUES(cap_max_disk_gb), traffic_up_cost_micro = VALUES(traffic_up_cost_micro),
       traffic_down_cost_micro = VALUES(traffic_down_cost_micro)`,
        [rows.slice(i, i + UPSERT_BATCH_ROWS)],
      );
    }
  }

  async withdraw(ids: readonly string[]): Promise<void> {
    for (let i = 0; i < ids.length; i += UPSERT_BATCH_ROWS) {
      await this.sql.query('UPDATE offers SET available = 0 WHERE id IN (?)', [ids.slice(i, i + UPSERT_BATCH_ROWS)]);
    }
  }

  async withdrawStale(provider: string, now: Date): Promise<number> {
    const res = await this.sql.query(
      'UPDATE offers SET available = 0 WHERE provider = ? AND available = 1 AND stale_at <= ?',
      [provider, now],
    );
    return Number(res.affectedRows ?? 0);
  }

  async withdrawNotOf(configured: readonly string[]): Promise<number> {
    const res = await this.sql.query('UPDATE offers SET available = 0 WHERE available = 1 AND provider NOT IN (?)', [
      configured,
    ]);
    return Number(res.affectedRows ?? 0);
  }
}

// Reads of the offer cache by code not yet on the store (the provision job, tests).

/** The inventory version (see {@link OfferCacheRepository.stamp}). */
export async function inventoryVersion(sql: Executor): Promise<number> {
  return (await new MysqlOfferCacheRepository(sql).stamp()).version;
}

/** See {@link OfferCacheRepository.cheapestOfShape}. */
export function cheapestOffersOfShape(ds: DataSource, shape: IntentShape, limit: number): Promise<Offer[]> {
  return new MysqlOfferCacheRepository(ds).cheapestOfShape(shape, limit);
}

/** See {@link OfferCacheRepository.byIds}. */
export function offersByIds(ds: DataSource, ids: readonly string[]): Promise<Offer[]> {
  return new MysqlOfferCacheRepository(ds).byIds(ids);
}
