import { WAIT_FOR_CAPACITY_NEXT } from '../../vocabulary/machine-hints.js';
import { AppError } from '../../errors/app-error.js';
import type { MachineCapabilities, MachineSettings } from '../../providers/provider.js';
import { closestGpuSlugs, compactSlug, matchGpuQuery, type GpuMatch } from './gpu-match.js';
import type { OfferDto } from './inventory.dto.js';
import { formatUsd } from '../../vocabulary/money.js';

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

/** What a rental's machine settings ask of an offer (variables ask nothing: every offer takes them). */
export function needsOf(m: Pick<MachineSettings, 'image' | 'startupScript' | 'ports' | 'diskGb'>): MachineNeeds {
  return {
    customImage: m.image !== null,
    startupScript: m.startupScript !== null,
    ports: m.ports.length,
    diskGb: m.diskGb,
  };
}

/** Whether `needs` asks anything of an offer at all. */
export function needsAnything(needs: MachineNeeds | undefined): needs is MachineNeeds {
  return !!needs && (needs.customImage || needs.startupScript || needs.ports > 0 || needs.diskGb !== null);
}

/** A capability that machine settings may need and an offer may lack, as refusals name them, in this order. */
export type UnmetNeed = 'customImage' | 'startupScript' | 'ports' | 'diskGb';

const NEED_RULES: readonly (readonly [UnmetNeed, (caps: MachineCapabilities, needs: MachineNeeds) => boolean])[] = [
  ['customImage', (c, n) => n.customImage && !c.customImage],
  ['startupScript', (c, n) => n.startupScript && !c.startupScript],
  ['ports', (c, n) => n.ports > c.ports],
  // An offer whose maxDiskGb is null cannot choose its disk at all.
  ['diskGb', (c, n) => n.diskGb !== null && (c.maxDiskGb === null || n.diskGb > c.maxDiskGb)],
];

/**
 * THE capability rule: what of `needs` an offer with `caps` cannot honour, in the order refusals
 * name them; none when it honours them all. Admission (an explicit offer, a GPU intent's
 * candidates), the capacity wait and each create attempt decide by it.
 */
export function unmetNeeds(caps: MachineCapabilities, needs: MachineNeeds): UnmetNeed[] {
  return NEED_RULES.filter(([, unmet]) => unmet(caps, needs)).map(([need]) => need);
}

// How a GPU intent is matched to offers: pure functions over the live offers of the in-memory
// snapshot (inventory.service.ts), so admission sends no query for its candidates. The liveness of
// those offers is the offers repository's rule, applied when the snapshot is loaded and kept by its
// reload at the first moment one of them goes stale.

/** Whether an offer's slug is one the match stands for (`?gpu=` and GPU intents alike). */
export function slugMatches(match: GpuMatch, slug: string): boolean {
  return match.known ? match.slugs.includes(slug) : match.compact !== '' && compactSlug(slug) === match.compact;
}

/** The offers table's slugs a match stands for, for `IN (...)`: its catalog models, or its own key for a GPU the catalog does not know. */
export function slugsOfMatch(match: GpuMatch): string[] {
  return match.known ? match.slugs : [match.key];
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
  /**
   * Every model of the match (slugs) with a live offer the intent could rent, as a candidate is
   * chosen (count, ceiling and `needs`), ordered by its cheapest such offer: the models a family's
   * match note may suggest (describeGpuChoice).
   */
  modelsOnSale: string[];
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
  /** The model slug of one of these offers. */
  slugOf(offer: OfferDto): string;
}

/** Whether an offer's machine can be given what `needs` asks (nothing asked: any offer), by {@link unmetNeeds}' rule. */
export function honoursNeeds(caps: MachineCapabilities, needs: MachineNeeds | undefined): boolean {
  return !needs || NEED_RULES.every(([, unmet]) => !unmet(caps, needs));
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
  const modelsOnSale = new Set<string>();
  // The match's list is ordered by price, GPU count and id; within one count that is price, then id.
  for (const o of offers) {
    // Once the candidates are chosen, the rest is read only for models not yet seen on sale.
    if (candidates.length >= limit && match.known && modelsOnSale.size === match.slugs.length) break;
    if (!fitsShape(o, q) || !honoursNeeds(o.capabilities, needs)) continue;
    if (candidates.length < limit) candidates.push(o);
    modelsOnSale.add(live.slugOf(o));
  }
  if (candidates.length > 0) return { slug: match.key, candidates, modelsOnSale: [...modelsOnSale] };
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
  const best: MachineCapabilities = {
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
  // What the best of the offers cannot honour, no offer can.
  const missing = unmetNeeds(best, needs).map((need) => {
    switch (need) {
      case 'customImage':
        return 'machine.image (none runs a custom image)';
      case 'startupScript':
        return 'machine.startupScript (none runs a startup script)';
      case 'ports':
        return `${needs.ports} machine.ports (${best.ports === 0 ? 'none exposes ports' : `at most ${best.ports}`})`;
      case 'diskGb':
        return `machine.diskGb of ${needs.diskGb} (${best.maxDiskGb === null ? 'none lets the disk be chosen' : `at most ${best.maxDiskGb} GB`})`;
    }
  });
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
