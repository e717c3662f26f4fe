import type { Posting } from '../../billing/ledger.service.js';
import { trafficCostMinor, trafficPriceOfColumns } from '../../../providers/pricing.js';
import type { TrafficPrice } from '../../../providers/provider.js';
import type { Deployment } from '../store/deployment.entity.js';

/** What charging a rental's traffic needs of its deployment. */
export type Trafficked = Pick<
  Deployment,
  | 'trafficUpPriceMicro'
  | 'trafficDownPriceMicro'
  | 'trafficUpBytes'
  | 'trafficDownBytes'
  | 'trafficMinor'
  | 'spendCapMinor'
>;

/** The rental's per-GB traffic prices, or null when its offer's traffic is free. */
export function trafficPriceOf(
  d: Pick<Deployment, 'trafficUpPriceMicro' | 'trafficDownPriceMicro'>,
): TrafficPrice | null {
  return trafficPriceOfColumns(d.trafficUpPriceMicro, d.trafficDownPriceMicro);
}

/**
 * THE traffic owed now, in cents: what the highest counters read cost at the rental's prices
 * (`trafficCostMinor`, cumulative), within what its spend cap leaves beside its time usage
 * `usageMinor`, less the traffic charged already. A rental's time and traffic together never pass
 * its cap: the metering sweep ends it there like one that reached it through time.
 */
export function trafficAccrual(d: Trafficked, usageMinor: number): number {
  const price = trafficPriceOf(d);
  if (!price) return 0;
  let total = trafficCostMinor({ upBytes: d.trafficUpBytes, downBytes: d.trafficDownBytes }, price);
  if (d.spendCapMinor !== null) total = Math.min(total, Math.max(0, d.spendCapMinor - usageMinor));
  return Math.max(0, total - d.trafficMinor);
}

/**
 * The ledger reference of a traffic posting: the deployment and the traffic posted once it is in
 * (cents, strictly growing with each posting), so a retried posting is refused and two readings
 * settled at one instant still post apart.
 */
export const trafficRef = (deploymentId: string, postedAfterMinor: number): string =>
  `traffic:${deploymentId}:${postedAfterMinor}`;

/** Bytes as GB (2^30 bytes) for people, to three decimals. */
export function gigabytes(bytes: number): string {
  return (bytes / 2 ** 30).toFixed(3);
}

/**
 * The TRAFFIC ledger entry of `amount` cents of a rental's traffic, posted with its usage: hourly,
 * and at its end. Its description says how much the instance had moved by then.
 */
export function trafficPosting(
  d: Pick<
    Deployment,
    'id' | 'accountId' | 'keyId' | 'orderId' | 'trafficUpBytes' | 'trafficDownBytes' | 'postedTrafficMinor'
  >,
  amount: number,
  untilMs: number,
): Posting {
  return {
    accountId: d.accountId,
    kind: 'TRAFFIC',
    amountMinor: -amount,
    externalRef: trafficRef(d.id, d.postedTrafficMinor + amount),
    description: `Internet traffic of rental ${d.orderId}: ${gigabytes(d.trafficUpBytes)} GB sent, ${gigabytes(d.trafficDownBytes)} GB received in all, to ${new Date(untilMs).toISOString().slice(0, 19).replace('T', ' ')} UTC`,
    keyId: d.keyId,
    rentalId: d.orderId,
  };
}
