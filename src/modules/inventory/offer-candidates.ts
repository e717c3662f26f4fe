import type { DataSource, EntityManager, SelectQueryBuilder } from 'typeorm';
import { readMinor } from '../../db/columns.js';
import { AppError } from '../../errors/app-error.js';
import { closestGpuSlugs, compactSlug, matchGpuQuery, type GpuMatch } from './gpu-match.js';
import { Offer } from './offer.entity.js';
import { formatUsd } from '../billing/money.js';

/**
 * The one rule of which cached offers are live: still listed by their provider at its last
 * successful refresh, and that refresh recent enough (`stale_at`, set by the refresh from
 * OFFER_MAX_AGE_SECONDS). Everything that lists or rents offers by model goes through it.
 */
export function whereLive(qb: SelectQueryBuilder<Offer>, now: Date): SelectQueryBuilder<Offer> {
  return qb.where('o.available = 1 AND o.stale_at > :now', { now });
}

/** Whether an offer's slug is one the match stands for. */
export function slugMatches(match: GpuMatch, slug: string): boolean {
  return match.known ? match.slugs.includes(slug) : match.compact !== '' && compactSlug(slug) === match.compact;
}

function andMatching(qb: SelectQueryBuilder<Offer>, match: GpuMatch): SelectQueryBuilder<Offer> {
  if (match.known) return qb.andWhere('o.slug IN (:...slugs)', { slugs: match.slugs });
  // Slugs of GPUs the catalog does not know are lower-case tokens joined by hyphens.
  return qb.andWhere("REPLACE(o.slug, '-', '') = :compact AND :compact <> ''", { compact: match.compact });
}

/**
 * The cached offers of one model match, as slugs for `IN (...)`: what a GPU-intent order stores
 * (`GpuMatch.key`) turned back into the catalog models it stands for.
 */
export function slugsOfGpuKey(key: string): string[] {
  const match = matchGpuQuery(key);
  return match.known ? match.slugs : [key];
}

export interface IntentQuery {
  gpuModel: string;
  /** `matchGpuQuery(gpuModel)`, when the caller has parsed the name already. */
  match?: GpuMatch;
  gpuCount: number;
  maxHourlyPriceMinor: number;
}

export interface IntentCandidates {
  /** What the order stores as its GPU: the canonical form of `gpuModel` (see `GpuMatch.key`). */
  slug: string;
  /** Live offers of that model and exact count at or under the ceiling, cheapest first. */
  candidates: Offer[];
}

/**
 * Admission's candidates for a GPU-intent rental, cheapest first, at most `limit`. None is a 422
 * `NO_MATCHING_OFFER` that says why: a model nobody knows (with the closest known slugs), no
 * offer of it right now, none with that GPU count, or all above the ceiling (with the cheapest).
 */
export async function findIntentCandidates(db: DataSource | EntityManager, now: Date, q: IntentQuery, limit: number): Promise<IntentCandidates> {
  const match = q.match ?? matchGpuQuery(q.gpuModel);
  const repo = db.getRepository(Offer);
  const candidates = await andMatching(whereLive(repo.createQueryBuilder('o'), now), match)
    .andWhere('o.gpu_count = :count AND o.price_per_hour_minor <= :max', { count: q.gpuCount, max: q.maxHourlyPriceMinor })
    .orderBy('o.price_per_hour_minor', 'ASC')
    .addOrderBy('o.id', 'ASC')
    .take(limit)
    .getMany();
  if (candidates.length > 0) return { slug: match.key, candidates };
  throw await noMatchingOffer(db, now, q, match);
}

async function noMatchingOffer(db: DataSource | EntityManager, now: Date, q: IntentQuery, match: GpuMatch): Promise<AppError> {
  const repo = db.getRepository(Offer);
  const rows: { gpuCount: number; minPrice: string }[] = await andMatching(whereLive(repo.createQueryBuilder('o'), now), match)
    .select('o.gpu_count', 'gpuCount')
    .addSelect('MIN(o.price_per_hour_minor)', 'minPrice')
    .groupBy('o.gpu_count')
    .orderBy('o.gpu_count', 'ASC')
    .getRawMany();
  const what = `${q.gpuCount} x ${q.gpuModel.trim()}`;
  if (rows.length === 0 && !match.known) {
    const offered: { slug: string }[] = await whereLive(repo.createQueryBuilder('o'), now).select('DISTINCT o.slug', 'slug').getRawMany();
    const closest = closestGpuSlugs(q.gpuModel, offered.map((r) => r.slug));
    return new AppError('NO_MATCHING_OFFER', `No GPU model is known as "${q.gpuModel.trim()}". Closest known: ${closest.join(', ')}. See GET /api/v1/gpus.`);
  }
  if (rows.length === 0) {
    return new AppError('NO_MATCHING_OFFER', `No offer of ${q.gpuModel.trim()} (${match.slugs.join(', ')}) is available right now. See GET /api/v1/gpus.`);
  }
  const sameCount = rows.find((r) => Number(r.gpuCount) === q.gpuCount);
  if (!sameCount) {
    const counts = rows.map((r) => Number(r.gpuCount)).join(', ');
    return new AppError('NO_MATCHING_OFFER', `No offer of ${what} right now; ${q.gpuModel.trim()} is offered with ${counts} GPU(s). See GET /api/v1/gpus.`);
  }
  const cheapest = readMinor(sameCount.minPrice);
  return new AppError(
    'NO_MATCHING_OFFER',
    `Every offer of ${what} is above ${q.maxHourlyPriceMinor} cents per hour; the cheapest is ${cheapest} cents (${formatUsd(cheapest)}) per hour.`,
  );
}
