import { WAIT_FOR_CAPACITY_NEXT } from '../../../clients/sdk/src/hints.js';
import { AppError } from '../../errors/app-error.js';
import type { MachineCapabilities } from '../../providers/provider.js';
import { closestGpuSlugs, compactSlug, matchGpuQuery, type GpuMatch } from './gpu-match.js';
import type { OfferDto } from './inventory.dto.js';
import { formatUsd } from '../billing/money.js';

/** What a rental's machine settings ask of an offer's capabilities. */
export interface MachineNeeds {
  /** The rental names its own image. */
  customImage: boolean;
  /** The rental gives a startup script. */
  startupScript: boolean;
  /** How many ports the rental exposes; 0: none. */
  ports: number;
  /** The disk the rental asks for, in GB; null: the offer's default. */
  diskGb: number | null;
}

/** Whether `needs` asks anything of an offer at all. */
export function needsAnything(needs: MachineNeeds | undefined): needs is MachineNeeds {
  return !!needs && (needs.customImage || needs.startupScript || needs.ports > 0 || needs.diskGb !== null);
}

// How a GPU intent is matched to offers: pure functions over the live offers of the in-memory
// snapshot (inventory.service.ts), so admission sends no query for its candidates. The liveness of
// those offers is the offers repository's rule, applied when the snapshot is loaded and kept by its
// reload at the first moment one of them goes stale.

/** Whether an offer's slug is one the match stands for (`?gpu=` and GPU intents alike). */
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
  /** Live offers of that model and exact count at or under the ceiling, cheapest first (then by id). */
  candidates: OfferDto[];
}

/** The live offers intent matching reads (the snapshot's). */
export interface LiveOffers {
  /**
   * The live offers of a match, cheapest first, then fewest GPUs, then id: exactly what
   * `GET /api/v1/offers?gpu=` lists for it.
   */
  ofMatch(match: GpuMatch): readonly OfferDto[];
  /** Every model slug that has a live offer. */
  slugs(): Iterable<string>;
}

/** Whether an offer's machine can be given what `needs` asks (nothing asked: any offer). */
export function honoursNeeds(caps: MachineCapabilities, needs: MachineNeeds | undefined): boolean {
  if (!needs) return true;
  return (
    (!needs.customImage || caps.customImage) &&
    (!needs.startupScript || caps.startupScript) &&
    caps.ports >= needs.ports &&
    (needs.diskGb === null || (caps.maxDiskGb !== null && caps.maxDiskGb >= needs.diskGb))
  );
}

/** Whether an offer of the match has the intent's exact GPU count at or under its ceiling. */
function fitsShape(o: OfferDto, q: IntentQuery): boolean {
  return o.gpuCount === q.gpuCount && o.pricePerHourMinor <= q.maxHourlyPriceMinor;
}

/**
 * Admission's candidates for a GPU-intent rental, cheapest first (ties by id), at most `limit`,
 * only offers that honour `needs` when given. None is a 422 `NO_MATCHING_OFFER` that says why: a
 * model nobody knows (with the closest known slugs), no offer of it right now, none with that GPU
 * count, all above the ceiling (with the cheapest), or none that can honour the machine settings
 * (naming the ones none can).
 */
export function findIntentCandidates(
  live: LiveOffers,
  q: IntentQuery,
  limit: number,
  needs?: MachineNeeds,
): IntentCandidates {
  const match = q.match ?? matchGpuQuery(q.gpuModel);
  const offers = live.ofMatch(match);
  const candidates: OfferDto[] = [];
  // The match's list is ordered by price, GPU count and id; within one count that is price, then id.
  for (const o of offers) {
    if (candidates.length >= limit) break;
    if (fitsShape(o, q) && honoursNeeds(o.capabilities, needs)) candidates.push(o);
  }
  if (candidates.length > 0) return { slug: match.key, candidates };
  throw noMatchingOffer(live, q, match, offers, needs);
}

function noMatchingOffer(
  live: LiveOffers,
  q: IntentQuery,
  match: GpuMatch,
  offers: readonly OfferDto[],
  needs: MachineNeeds | undefined,
): AppError {
  const what = `${q.gpuCount} x ${q.gpuModel.trim()}`;
  if (offers.length === 0 && !match.known) {
    const closest = closestGpuSlugs(q.gpuModel, live.slugs());
    return new AppError(
      'NO_MATCHING_OFFER',
      `No GPU model is known as "${q.gpuModel.trim()}". Closest known: ${closest.join(', ')}. See GET /api/v1/gpus.`,
    );
  }
  if (offers.length === 0) {
    return new AppError(
      'NO_MATCHING_OFFER',
      `No offer of ${q.gpuModel.trim()} (${match.slugs.join(', ')}) is available right now. See GET /api/v1/gpus. ${WAIT_FOR_CAPACITY_NEXT}`,
    );
  }
  const sameCount = offers.filter((o) => o.gpuCount === q.gpuCount);
  if (sameCount.length === 0) {
    const counts = [...new Set(offers.map((o) => o.gpuCount))].sort((a, b) => a - b).join(', ');
    return new AppError(
      'NO_MATCHING_OFFER',
      `No offer of ${what} right now; ${q.gpuModel.trim()} is offered with ${counts} GPU(s). See GET /api/v1/gpus. ${WAIT_FOR_CAPACITY_NEXT}`,
    );
  }
  const cheapest = Math.min(...sameCount.map((o) => o.pricePerHourMinor));
  // Some offer fits model, count and ceiling: then only the machine settings can have ruled them out.
  if (cheapest <= q.maxHourlyPriceMinor && needsAnything(needs)) {
    const unhonoured = unhonouredNeeds(
      q,
      sameCount.filter((o) => fitsShape(o, q)),
      needs,
    );
    if (unhonoured) return unhonoured;
  }
  return new AppError(
    'NO_MATCHING_OFFER',
    `Every offer of ${what} is above ${q.maxHourlyPriceMinor} cents per hour; the cheapest is ${cheapest} cents (${formatUsd(cheapest)}) per hour. Raise maxHourlyPriceMinor to at least ${cheapest}. ${WAIT_FOR_CAPACITY_NEXT}`,
  );
}

/** Names the machine settings none of the offers of the shape can honour (or says no one offer honours them all). */
function unhonouredNeeds(q: IntentQuery, shaped: readonly OfferDto[], needs: MachineNeeds): AppError | undefined {
  if (shaped.length === 0) return undefined;
  const best = {
    customImage: shaped.some((o) => o.capabilities.customImage),
    startupScript: shaped.some((o) => o.capabilities.startupScript),
    ports: Math.max(...shaped.map((o) => o.capabilities.ports)),
    maxDiskGb: shaped.reduce<number | null>(
      (max, o) => (o.capabilities.maxDiskGb === null ? max : Math.max(max ?? 0, o.capabilities.maxDiskGb)),
      null,
    ),
  };
  const what = `${q.gpuCount} x ${q.gpuModel.trim()}`;
  const where = `See each offer's capabilities on GET /api/v1/offers?gpu=${encodeURIComponent(q.gpuModel.trim())}.`;
  const missing: string[] = [];
  if (needs.customImage && !best.customImage) missing.push('machine.image (none runs a custom image)');
  if (needs.startupScript && !best.startupScript) missing.push('machine.startupScript (none runs a startup script)');
  if (needs.ports > best.ports)
    missing.push(`${needs.ports} machine.ports (${best.ports === 0 ? 'none exposes ports' : `at most ${best.ports}`})`);
  if (needs.diskGb !== null && (best.maxDiskGb === null || needs.diskGb > best.maxDiskGb)) {
    missing.push(
      `machine.diskGb of ${needs.diskGb} (${best.maxDiskGb === null ? 'none lets the disk be chosen' : `at most ${best.maxDiskGb} GB`})`,
    );
  }
  const shapeText = `of ${what} at or under ${q.maxHourlyPriceMinor} cents per hour`;
  if (missing.length > 0) {
    const subject =
      shaped.length === 1
        ? `The one offer ${shapeText} cannot`
        : `None of the ${shaped.length} offers ${shapeText} can`;
    return new AppError('NO_MATCHING_OFFER', `${subject} honour ${missing.join('; ')}. ${where}`);
  }
  const asked = [
    needs.customImage && 'machine.image',
    needs.startupScript && 'machine.startupScript',
    needs.ports > 0 && 'machine.ports',
    needs.diskGb !== null && 'machine.diskGb',
  ].filter(Boolean);
  return new AppError(
    'NO_MATCHING_OFFER',
    `Each of ${asked.join(', ')} is honoured by one of the ${shaped.length} offers ${shapeText}, but no one offer honours them all. ${where}`,
  );
}
