import { In, type DataSource } from 'typeorm';
import { Offer } from '../../inventory/offer.entity.js';

// The provision job's reads of the offer cache: the offers a rental may be created on, live or
// not (the order chose them; the provider has the last word). Which offers those are (the
// order's own list, or its GPU intent) is the provision job's rule.

/** What a GPU-intent order asks of an offer. */
export interface IntentShape {
  slugs: string[];
  gpuCount: number | null;
  maxHourlyPriceMinor: number | null;
}

/** Up to `limit` cached offers of one of `shape.slugs` with exactly its GPU count at or under its ceiling, cheapest first. */
export function cheapestOffersOfShape(ds: DataSource, shape: IntentShape, limit: number): Promise<Offer[]> {
  return ds
    .getRepository(Offer)
    .createQueryBuilder('o')
    .where('o.slug IN (:...slugs) AND o.gpu_count = :c AND o.price_per_hour_minor <= :max', { slugs: shape.slugs, c: shape.gpuCount, max: shape.maxHourlyPriceMinor })
    .orderBy('o.price_per_hour_minor', 'ASC')
    .addOrderBy('o.id', 'ASC')
    .take(limit)
    .getMany();
}

/** The cached offers among `ids`, in no particular order (rows of the cache are never deleted, but an id may be unknown). */
export function offersByIds(ds: DataSource, ids: readonly string[]): Promise<Offer[]> {
  return ds.getRepository(Offer).findBy({ id: In([...ids]) });
}
