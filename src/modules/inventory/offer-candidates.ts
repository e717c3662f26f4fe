import type { DataSource, EntityManager } from 'typeorm';
import { AppError } from '../../errors/app-error.js';
import { closestGpuSlugs, compactSlug, matchGpuQuery, type GpuMatch } from './gpu-match.js';
import type { Offer } from './offer.entity.js';
import { liveCandidates, liveCountsOf, liveSlugs } from './offers.repository.js';
import { formatUsd } from '../billing/money.js';

/** Whether an offer's slug is one the match stands for. */
export function slugMatches(match: GpuMatch, slug: string): boolean {
  return match.known ? match.slugs.includes(slug) : match.compact !== '' && compactSlug(slug) === match.compact;
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
  const candidates = await liveCandidates(db, now, { match, gpuCount: q.gpuCount, maxHourlyPriceMinor: q.maxHourlyPriceMinor }, limit);
  if (candidates.length > 0) return { slug: match.key, candidates };
  throw await noMatchingOffer(db, now, q, match);
}

async function noMatchingOffer(db: DataSource | EntityManager, now: Date, q: IntentQuery, match: GpuMatch): Promise<AppError> {
  const rows = await liveCountsOf(db, now, match);
  const what = `${q.gpuCount} x ${q.gpuModel.trim()}`;
  if (rows.length === 0 && !match.known) {
    const closest = closestGpuSlugs(q.gpuModel, await liveSlugs(db, now));
    return new AppError('NO_MATCHING_OFFER', `No GPU model is known as "${q.gpuModel.trim()}". Closest known: ${closest.join(', ')}. See GET /api/v1/gpus.`);
  }
  if (rows.length === 0) {
    return new AppError('NO_MATCHING_OFFER', `No offer of ${q.gpuModel.trim()} (${match.slugs.join(', ')}) is available right now. See GET /api/v1/gpus.`);
  }
  const sameCount = rows.find((r) => r.gpuCount === q.gpuCount);
  if (!sameCount) {
    const counts = rows.map((r) => r.gpuCount).join(', ');
    return new AppError('NO_MATCHING_OFFER', `No offer of ${what} right now; ${q.gpuModel.trim()} is offered with ${counts} GPU(s). See GET /api/v1/gpus.`);
  }
  const cheapest = sameCount.minPriceMinor;
  return new AppError(
    'NO_MATCHING_OFFER',
    `Every offer of ${what} is above ${q.maxHourlyPriceMinor} cents per hour; the cheapest is ${cheapest} cents (${formatUsd(cheapest)}) per hour.`,
  );
}
