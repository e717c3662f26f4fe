import { MIN_BUDGET_MINOR } from '../../vocabulary/limits.js';
import { formatUsd } from '../../vocabulary/money.js';
import type { OfferDto } from '../inventory/inventory.dto.js';

/**
 * Minutes of ACTIVE time a canary is priced for when its offer is chosen. A canary is ACTIVE for
 * seconds (one `nvidia-smi -L`, then termination, whose wait is not charged); ten minutes leaves
 * room for a slow login and a slow destroy, so the cap does not end the machine mid-cycle.
 */
export const CANARY_EXPECTED_MINUTES = 10;

/** What a canary's expected ACTIVE time costs on an offer, in cents (rounded up, as a cap must be). */
export function expectedCostMinor(pricePerHourMinor: number): number {
  return Math.ceil((pricePerHourMinor * CANARY_EXPECTED_MINUTES) / 60);
}

/** The offer a canary rents, or why there is none (a sentence for the operator). */
export type CanaryOfferChoice = { offer: OfferDto } | { problem: string };

/**
 * The cheapest of `offers` (the inventory's list, cheapest first, already narrowed to `--gpu` when
 * given) of `provider` whose expected cost keeps within `capMinor`; when none does, a sentence
 * saying what would: the cheapest offer's price and the cap it needs.
 */
export function chooseCanaryOffer(
  offers: readonly OfferDto[],
  provider: string,
  capMinor: number,
  gpu: string | null,
): CanaryOfferChoice {
  const own = offers
    .filter((o) => o.provider === provider)
    .sort((a, b) => a.pricePerHourMinor - b.pricePerHourMinor || a.id.localeCompare(b.id));
  const what = gpu === null ? `${provider} has no offer on sale` : `${provider} has no offer of "${gpu}" on sale`;
  if (own.length === 0) return { problem: `${what} now; see GET /api/v1/offers, or try another --gpu.` };
  const fits = own.find((o) => expectedCostMinor(o.pricePerHourMinor) <= capMinor);
  if (fits) return { offer: fits };
  const cheapest = own[0];
  return {
    problem:
      `--max-spend ${formatUsd(capMinor)} does not cover ${CANARY_EXPECTED_MINUTES} minutes of ${provider}'s cheapest ` +
      `${gpu === null ? '' : `"${gpu}" `}offer (${cheapest.gpuCount}x ${cheapest.name} at ${formatUsd(cheapest.pricePerHourMinor)}/h); ` +
      `pass --max-spend of at least ${formatUsd(Math.max(MIN_BUDGET_MINOR, expectedCostMinor(cheapest.pricePerHourMinor)))}.`,
  };
}

/** The lease a canary's rental carries: its time bound, from 60 s up to what the offer allows. */
export function canaryLeaseSeconds(timeoutMs: number, offer: OfferDto): number | undefined {
  if (offer.maximumDurationSeconds < 60) return undefined;
  return Math.min(Math.max(60, Math.ceil(timeoutMs / 1000)), offer.maximumDurationSeconds);
}
