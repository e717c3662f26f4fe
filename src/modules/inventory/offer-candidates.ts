import type { DataSource, EntityManager } from 'typeorm';
import { AppError } from '../../errors/app-error.js';
import { closestGpuSlugs, compactSlug, matchGpuQuery, type GpuMatch } from './gpu-match.js';
import type { Offer } from './offer.entity.js';
import { bestCapabilitiesOf, liveCandidates, liveCountsOf, liveSlugs, needsAnything, type CandidateQuery, type MachineNeeds } from './offers.repository.js';
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

export type { MachineNeeds } from './offers.repository.js';

/**
 * Admission's candidates for a GPU-intent rental, cheapest first, at most `limit`, only offers
 * that honour `needs` when given (absent or asking nothing: the statement it always was). None
 * is a 422 `NO_MATCHING_OFFER` that says why: a model nobody knows (with the closest known slugs),
 * no offer of it right now, none with that GPU count, all above the ceiling (with the cheapest),
 * or none that can honour the machine settings (naming the ones none can).
 */
export async function findIntentCandidates(db: DataSource | EntityManager, now: Date, q: IntentQuery, limit: number, needs?: MachineNeeds): Promise<IntentCandidates> {
  const match = q.match ?? matchGpuQuery(q.gpuModel);
  const shape: CandidateQuery = { match, gpuCount: q.gpuCount, maxHourlyPriceMinor: q.maxHourlyPriceMinor };
  const candidates = await liveCandidates(db, now, shape, limit, needs);
  if (candidates.length > 0) return { slug: match.key, candidates };
  throw await noMatchingOffer(db, now, q, shape, needs);
}

async function noMatchingOffer(db: DataSource | EntityManager, now: Date, q: IntentQuery, shape: CandidateQuery, needs: MachineNeeds | undefined): Promise<AppError> {
  const { match } = shape;
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
  // Some offer fits model, count and ceiling: then only the machine settings can have ruled them out.
  if (cheapest <= q.maxHourlyPriceMinor && needsAnything(needs)) {
    const unhonoured = await unhonouredNeeds(db, now, q, shape, needs);
    if (unhonoured) return unhonoured;
  }
  return new AppError(
    'NO_MATCHING_OFFER',
    `Every offer of ${what} is above ${q.maxHourlyPriceMinor} cents per hour; the cheapest is ${cheapest} cents (${formatUsd(cheapest)}) per hour.`,
  );
}

/** Names the machine settings none of the offers of the shape can honour (or says no one offer honours them all). */
async function unhonouredNeeds(db: DataSource | EntityManager, now: Date, q: IntentQuery, shape: CandidateQuery, needs: MachineNeeds): Promise<AppError | undefined> {
  const best = await bestCapabilitiesOf(db, now, shape);
  if (best.offers === 0) return undefined;
  const what = `${q.gpuCount} x ${q.gpuModel.trim()}`;
  const where = `See each offer's capabilities on GET /api/v1/offers?gpu=${encodeURIComponent(q.gpuModel.trim())}.`;
  const missing: string[] = [];
  if (needs.customImage && !best.customImage) missing.push('machine.image (none runs a custom image)');
  if (needs.startupScript && !best.startupScript) missing.push('machine.startupScript (none runs a startup script)');
  if (needs.ports > best.ports) missing.push(`${needs.ports} machine.ports (${best.ports === 0 ? 'none exposes ports' : `at most ${best.ports}`})`);
  if (needs.diskGb !== null && (best.maxDiskGb === null || needs.diskGb > best.maxDiskGb)) {
    missing.push(`machine.diskGb of ${needs.diskGb} (${best.maxDiskGb === null ? 'none lets the disk be chosen' : `at most ${best.maxDiskGb} GB`})`);
  }
  const shapeText = `of ${what} at or under ${q.maxHourlyPriceMinor} cents per hour`;
  if (missing.length > 0) {
    const subject = best.offers === 1 ? `The one offer ${shapeText} cannot` : `None of the ${best.offers} offers ${shapeText} can`;
    return new AppError('NO_MATCHING_OFFER', `${subject} honour ${missing.join('; ')}. ${where}`);
  }
  const asked = [needs.customImage && 'machine.image', needs.startupScript && 'machine.startupScript', needs.ports > 0 && 'machine.ports', needs.diskGb !== null && 'machine.diskGb'].filter(Boolean);
  return new AppError('NO_MATCHING_OFFER', `Each of ${asked.join(', ')} is honoured by one of the ${best.offers} offers ${shapeText}, but no one offer honours them all. ${where}`);
}
