import type { TrafficCounters, TrafficPrice } from './provider.js';

/**
 * Provider prices arrive as floating USD (Vast `dph_total`, RunPod per-GPU `price`) or as cents
 * (Lambda). Float noise must not cost a customer a cent (0.35 * 100 is 35.000000000000004), so
 * the amount is first rounded to a millionth of a dollar, then up to a whole cent.
 */
export function usdToCentsCeil(usd: number): number {
  if (!Number.isFinite(usd) || usd < 0) throw new RangeError(`not a price in USD: ${usd}`);
  const micro = Math.round(usd * 1_000_000);
  return Math.ceil(micro / 10_000);
}

/** Markups are percentages with at most two decimals; kept as hundredths so the arithmetic is exact. */
export function markupHundredths(percent: number): number {
  return Math.round(percent * 100);
}

/**
 * The one customer-price formula: the provider's hourly cost in whole cents (rounded up by the
 * plugin), times (100 + markup) / 100, rounded up to a whole cent.
 */
export function customerPriceMinor(costCents: number, markupPercent: number): number {
  if (!Number.isSafeInteger(costCents) || costCents < 0) throw new RangeError(`not a cost in cents: ${costCents}`);
  const factor = 10_000 + markupHundredths(markupPercent);
  const numerator = costCents * factor;
  return Math.floor((numerator + 9_999) / 10_000);
}

/** USD (a per-GB traffic price) as whole millionths of a dollar, the unit of `TrafficPrice`. */
export function usdToMicro(usd: number): number {
  if (!Number.isFinite(usd) || usd < 0) throw new RangeError(`not a price in USD: ${usd}`);
  return Math.round(usd * 1_000_000);
}

/** The customer's per-GB traffic prices: each of the provider's by {@link customerPriceMinor}, the one markup formula. */
export function customerTrafficPrice(cost: TrafficPrice, markupPercent: number): TrafficPrice {
  return {
    upMicroUsdPerGb: customerPriceMinor(cost.upMicroUsdPerGb, markupPercent),
    downMicroUsdPerGb: customerPriceMinor(cost.downMicroUsdPerGb, markupPercent),
  };
}

/**
 * A per-GB price pair as rows keep it, two nullable columns (up, down), as a {@link TrafficPrice}:
 * null when both are null (traffic is free), a missing side reading as free.
 */
export function trafficPriceOfColumns(up: number | null, down: number | null): TrafficPrice | null {
  if (up === null && down === null) return null;
  return { upMicroUsdPerGb: up ?? 0, downMicroUsdPerGb: down ?? 0 };
}

const BYTES_PER_GB = 1n << 30n;
const MICRO_USD_PER_CENT = 10_000n;

/**
 * THE traffic charge: what `counters` cost at `price`, in whole cents, rounded down (a fraction of
 * a cent not yet reached is not charged). Computed on the cumulative counters, so charging the
 * growth between readings never drifts by rounding. BigInt: bytes times millionths exceed 2^53.
 */
export function trafficCostMinor(counters: TrafficCounters, price: TrafficPrice): number {
  const micro =
    BigInt(Math.trunc(counters.upBytes)) * BigInt(price.upMicroUsdPerGb) +
    BigInt(Math.trunc(counters.downBytes)) * BigInt(price.downMicroUsdPerGb);
  return Number(micro / (BYTES_PER_GB * MICRO_USD_PER_CENT));
}
