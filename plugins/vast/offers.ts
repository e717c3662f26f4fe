import { usdToCentsCeil, usdToMicro } from '../../src/providers/pricing.js';
import type { ProviderOffer, TrafficPrice } from '../../src/providers/provider.js';
import { vastMachineCapabilities } from './machine.js';

/** The fields of a Vast offer (`POST /api/v0/bundles/` → `offers[]`) this plugin reads. */
export interface VastOffer {
  id: number;
  gpu_name: string;
  num_gpus: number;
  /** MB per GPU. */
  gpu_ram?: number | null;
  cpu_cores_effective?: number | null;
  /** MB, the whole machine's. */
  cpu_ram?: number | null;
  /** The offer's share of the machine's GPUs, hence of its RAM. */
  gpu_frac?: number | null;
  /** GB. */
  disk_space?: number | null;
  /** USD per hour for the whole offer, including the storage asked for in the search. */
  dph_total: number;
  /** Seconds the host allows this rental to last from now. */
  duration?: number | null;
  geolocation?: string | null;
  hosting_type?: number | null;
  /** USD per GB uploaded / downloaded, billed apart from `dph_total`; 0 on most hosts. */
  inet_up_cost?: number | null;
  inet_down_cost?: number | null;
}

/** Longest rental we pass on, whatever the host allows: Vast hosts often offer months. */
export const VAST_MAX_DURATION_SECONDS = 30 * 86_400;
/** Shorter offers cannot carry a rental worth starting. */
export const VAST_MIN_DURATION_SECONDS = 3_600;

/** The offer search the plugin sends: on-demand, verified, rentable, cheapest first. */
export function offerSearchBody(opts: { diskGb: number; maxOffers: number }): Record<string, unknown> {
  return {
    rentable: { eq: true },
    verified: { eq: true },
    rented: { eq: false },
    disk_space: { gte: opts.diskGb },
    duration: { gte: VAST_MIN_DURATION_SECONDS },
    type: 'on-demand',
    // Priced with the disk we rent with, so dph_total is what the running instance costs.
    allocated_storage: opts.diskGb,
    order: [['dph_total', 'asc']],
    limit: opts.maxOffers,
  };
}

const DATACENTER =
  /\b(H100|H200|H800|GH200|B100|B200|A100|A800|A40|A30|A10G?|A16|A2|L40S?|L4|V100|T4|P100|MI\d{3}X?)\b/i;
const WORKSTATION = /\b(RTX ?A\d{4}|A\d{4}|RTX \d{4} Ada|RTX PRO|Quadro|Titan)\b/i;

/** Vast names models without a vendor ("RTX 4090", "H100 SXM"); the family says the class. */
export function vastCategory(gpuName: string): string {
  if (DATACENTER.test(gpuName)) return 'datacenter';
  if (WORKSTATION.test(gpuName)) return 'workstation';
  return 'consumer';
}

const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const positiveInt = (v: number): number | null => (v >= 1 ? v : null);

/**
 * The per-GB traffic prices an offer or instance states (`inet_up_cost` / `inet_down_cost`, USD
 * per GB), in millionths of a USD rounded as every provider price is (`usdToMicro`); both 0 when
 * its traffic is free. An absent or null price is 0 (the document's offers carry none);
 * `'unreadable'` when one is there but not a number of at least 0, which no price can be built on.
 */
export function vastTrafficPrice(x: Pick<VastOffer, 'inet_up_cost' | 'inet_down_cost'>): TrafficPrice | 'unreadable' {
  const micro = (v: unknown): number | null =>
    v === undefined || v === null ? 0 : finite(v) && v >= 0 ? usdToMicro(v) : null;
  const up = micro(x.inet_up_cost);
  const down = micro(x.inet_down_cost);
  if (up === null || down === null) return 'unreadable';
  return { upMicroUsdPerGb: up, downMicroUsdPerGb: down };
}

/** True when a traffic price bills anything at all. */
export const billsTraffic = (p: TrafficPrice): boolean => p.upMicroUsdPerGb > 0 || p.downMicroUsdPerGb > 0;

/** A price in millionths of a USD per GB, as an operator writes it (`0.03`). */
export const usdPerGbText = (micro: number): string => `${micro / 1_000_000} USD/GB`;

/**
 * What an offer or an instance costs us per hour in whole cents: its `dph_total`, rounded up. Its
 * traffic is priced apart ({@link vastTrafficPrice}) and charged as used, so no volume is assumed
 * here. Null when it states no usable `dph_total`. One formula for the quote and for the check
 * after create, so the two compare like with like.
 */
export function vastCostMinor(x: { dph_total?: number | null }): number | null {
  const dph = x.dph_total;
  if (!finite(dph) || dph < 0) return null;
  return usdToCentsCeil(dph);
}

/** What the host quoted an ask at when it rented it (`OfferRef`): the cached offer's hourly cost and its traffic price (absent: free). */
export interface VastQuote {
  costPerHourMinor: number;
  trafficPrice?: TrafficPrice;
}

/**
 * Why an instance bills more than its ask was quoted at: a per-GB traffic price (either way) over
 * the quoted one, or its hourly cost ({@link vastCostMinor}) over the quoted cost. Null when it
 * bills no more; undefined when it bills no more traffic but states no hourly price yet, so the
 * comparison waits for a later answer. A traffic price it states that cannot be read is not
 * compared (its offer's could be, or the ask would not have been offered).
 */
export function vastOverQuote(
  inst: { dph_total?: number | null; inet_up_cost?: number | null; inet_down_cost?: number | null },
  quote: VastQuote,
): string | null | undefined {
  const traffic = vastTrafficPrice(inst);
  const quoted = quote.trafficPrice ?? { upMicroUsdPerGb: 0, downMicroUsdPerGb: 0 };
  if (
    traffic !== 'unreadable' &&
    (traffic.upMicroUsdPerGb > quoted.upMicroUsdPerGb || traffic.downMicroUsdPerGb > quoted.downMicroUsdPerGb)
  ) {
    const both = (p: TrafficPrice) =>
      `${usdPerGbText(p.upMicroUsdPerGb)} up and ${usdPerGbText(p.downMicroUsdPerGb)} down`;
    return `the instance bills ${both(traffic)}, over the ${both(quoted)} the offer was quoted at`;
  }
  const cost = vastCostMinor(inst);
  if (cost === null) return undefined;
  if (cost <= quote.costPerHourMinor) return null;
  return `the instance bills ${cost} cents/h, over the ${quote.costPerHourMinor} cents/h the offer was quoted at`;
}

/**
 * USD per hour an instance pays for disk beyond `pricedDiskGb`, the disk its offer was priced
 * with: that share of its own storage charge (`storage_total_cost` for its `disk_space`). 0 when
 * it states neither or has no more disk than that.
 */
export function extraDiskUsdPerHour(
  x: { disk_space?: number | null; storage_total_cost?: number | null },
  pricedDiskGb: number,
): number {
  const disk = x.disk_space;
  const storage = x.storage_total_cost;
  if (!finite(disk) || !finite(storage) || disk <= pricedDiskGb || storage <= 0) return 0;
  return (storage * (disk - pricedDiskGb)) / disk;
}

/**
 * Why an ask is not offered: a stable code (the providers check counts dropped asks per code) and
 * words for the log.
 */
export interface VastOfferDrop {
  drop: VastDropReason;
  detail: string;
}

/** Every reason an ask can be left out, each a stable code. */
export const VAST_DROP_REASONS = [
  'no_ask_id',
  'no_gpu_name',
  'no_num_gpus',
  'no_dph_total',
  'duration_under_an_hour',
  'traffic_price_unreadable',
  'traffic_price_above_limit',
] as const;
export type VastDropReason = (typeof VAST_DROP_REASONS)[number];

/** What the operator's options ask of an offer beyond its shape. */
export interface VastOfferLimits {
  /** `VastOptions.maxTrafficMicroUsdPerGb`: asks billing more per GB either way are left out; null: no limit. */
  maxTrafficMicroUsdPerGb: number | null;
}

const NO_LIMITS: VastOfferLimits = { maxTrafficMicroUsdPerGb: null };
const dropped = (drop: VastDropReason, detail: string): VastOfferDrop => ({ drop, detail });

/** Narrows {@link mapVastOffer}'s answer to an offer. */
export const isVastOfferDrop = (m: ProviderOffer | VastOfferDrop): m is VastOfferDrop => 'drop' in m;

/**
 * One Vast offer as ours, or why it cannot be offered (malformed, too short, a traffic price that
 * cannot be read or is over the operator's limit). An ask whose host bills traffic is offered
 * with its `trafficPrice`: the host charges what the instance moves. The customer gets `diskGb`
 * of disk, not the machine's free space, so that is the storage we state.
 */
export function mapVastOffer(
  o: VastOffer,
  diskGb: number,
  limits: VastOfferLimits = NO_LIMITS,
): ProviderOffer | VastOfferDrop {
  if (!Number.isSafeInteger(o.id) || o.id <= 0) return dropped('no_ask_id', 'no ask id');
  if (typeof o.gpu_name !== 'string' || !o.gpu_name.trim()) return dropped('no_gpu_name', 'no gpu_name');
  if (!Number.isSafeInteger(o.num_gpus) || o.num_gpus < 1) return dropped('no_num_gpus', 'no num_gpus');
  if (!finite(o.dph_total) || o.dph_total <= 0) return dropped('no_dph_total', 'no dph_total');
  if (!finite(o.duration) || o.duration < VAST_MIN_DURATION_SECONDS)
    return dropped('duration_under_an_hour', 'duration missing or under an hour');
  const traffic = vastTrafficPrice(o);
  // A price we cannot read would be charged as free while the host bills every gigabyte.
  if (traffic === 'unreadable')
    return dropped('traffic_price_unreadable', 'inet_up_cost or inet_down_cost is not a price in USD per GB');
  const max = limits.maxTrafficMicroUsdPerGb;
  if (max !== null && (traffic.upMicroUsdPerGb > max || traffic.downMicroUsdPerGb > max)) {
    return dropped(
      'traffic_price_above_limit',
      `bills ${usdPerGbText(traffic.upMicroUsdPerGb)} up and ${usdPerGbText(traffic.downMicroUsdPerGb)} down, over VAST_PROVIDER_MAX_TRAFFIC_PRICE_PER_GB (${usdPerGbText(max)})`,
    );
  }
  const vram = finite(o.gpu_ram) ? positiveInt(Math.round(o.gpu_ram / 1024)) : null;
  // Vast gives an instance RAM in proportion to its share of the machine's GPUs.
  const share = finite(o.gpu_frac) && o.gpu_frac > 0 && o.gpu_frac <= 1 ? o.gpu_frac : 1;
  const region = typeof o.geolocation === 'string' && o.geolocation.trim() ? o.geolocation.trim() : null;
  const offer: ProviderOffer = {
    key: String(o.id),
    name: o.gpu_name.trim(),
    category: vastCategory(o.gpu_name),
    vramGb: vram,
    gpuCount: o.num_gpus,
    cpuCores: finite(o.cpu_cores_effective) ? positiveInt(Math.floor(o.cpu_cores_effective)) : null,
    memoryGb: finite(o.cpu_ram) ? positiveInt(Math.floor((o.cpu_ram * share) / 1024)) : null,
    storageGb: diskGb,
    pricePerHourMinor: usdToCentsCeil(o.dph_total),
    maximumDurationSeconds: Math.min(VAST_MAX_DURATION_SECONDS, Math.floor(o.duration)),
    region,
    capabilities: vastMachineCapabilities(o, diskGb),
  };
  if (billsTraffic(traffic)) offer.trafficPrice = traffic;
  return offer;
}
