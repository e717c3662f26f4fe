import { usdToCentsCeil } from '../../src/providers/pricing.js';
import type { ProviderOffer } from '../../src/providers/provider.js';
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

/** The bandwidth prices an offer or instance states, in USD per GB; absent or negative reads as 0. */
function bandwidthUsdPerGb(x: Pick<VastOffer, 'inet_up_cost' | 'inet_down_cost'>): { up: number; down: number } {
  const price = (v: unknown) => (finite(v) && v > 0 ? v : 0);
  return { up: price(x.inet_up_cost), down: price(x.inet_down_cost) };
}

/** True when Vast bills this offer's (or instance's) internet traffic on top of `dph_total`. */
export function billsBandwidth(x: Pick<VastOffer, 'inet_up_cost' | 'inet_down_cost'>): boolean {
  const bw = bandwidthUsdPerGb(x);
  return bw.up > 0 || bw.down > 0;
}

/**
 * What an offer or an instance costs us per hour in USD: `dph_total` plus, when the operator
 * prices bandwidth (`VAST_PROVIDER_BANDWIDTH_GB_PER_HOUR` > 0), that many GB up and that many GB
 * down at the host's per-GB prices. One formula for the quote and for the check after create, so
 * the two compare like with like.
 */
export function vastHourlyCostUsd(
  x: Pick<VastOffer, 'dph_total' | 'inet_up_cost' | 'inet_down_cost'>,
  bandwidthGbPerHour: number,
): number {
  const bw = bandwidthUsdPerGb(x);
  return x.dph_total + bandwidthGbPerHour * (bw.up + bw.down);
}

/**
 * What an instance bills us now, in whole cents per hour, priced by {@link vastHourlyCostUsd} as
 * its offer was; null when it states no usable `dph_total`. Compared with the offer's quoted cost
 * after create.
 */
export function vastCostMinor(
  x: { dph_total?: number | null; inet_up_cost?: number | null; inet_down_cost?: number | null },
  bandwidthGbPerHour: number,
): number | null {
  const dph = x.dph_total;
  if (!finite(dph) || dph < 0) return null;
  return usdToCentsCeil(vastHourlyCostUsd({ ...x, dph_total: dph }, bandwidthGbPerHour));
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
 * One Vast offer as ours, or a reason it cannot be offered (malformed, too short, or billing
 * internet traffic per GB while the operator has not priced bandwidth). The customer gets
 * `diskGb` of disk, not the machine's free space, so that is the storage we state.
 */
export function mapVastOffer(o: VastOffer, diskGb: number, bandwidthGbPerHour = 0): ProviderOffer | string {
  if (!Number.isSafeInteger(o.id) || o.id <= 0) return 'no ask id';
  if (typeof o.gpu_name !== 'string' || !o.gpu_name.trim()) return 'no gpu_name';
  if (!Number.isSafeInteger(o.num_gpus) || o.num_gpus < 1) return 'no num_gpus';
  if (!finite(o.dph_total) || o.dph_total <= 0) return 'no dph_total';
  if (!finite(o.duration) || o.duration < VAST_MIN_DURATION_SECONDS) return 'duration missing or under an hour';
  // A price that leaves out per-GB traffic would sell the machine below what it costs us.
  if (bandwidthGbPerHour === 0 && billsBandwidth(o))
    return 'bills internet traffic per GB and VAST_PROVIDER_BANDWIDTH_GB_PER_HOUR is 0';
  const vram = finite(o.gpu_ram) ? positiveInt(Math.round(o.gpu_ram / 1024)) : null;
  // Vast gives an instance RAM in proportion to its share of the machine's GPUs.
  const share = finite(o.gpu_frac) && o.gpu_frac > 0 && o.gpu_frac <= 1 ? o.gpu_frac : 1;
  const region = typeof o.geolocation === 'string' && o.geolocation.trim() ? o.geolocation.trim() : null;
  return {
    key: String(o.id),
    name: o.gpu_name.trim(),
    category: vastCategory(o.gpu_name),
    vramGb: vram,
    gpuCount: o.num_gpus,
    cpuCores: finite(o.cpu_cores_effective) ? positiveInt(Math.floor(o.cpu_cores_effective)) : null,
    memoryGb: finite(o.cpu_ram) ? positiveInt(Math.floor((o.cpu_ram * share) / 1024)) : null,
    storageGb: diskGb,
    pricePerHourMinor: usdToCentsCeil(vastHourlyCostUsd(o, bandwidthGbPerHour)),
    maximumDurationSeconds: Math.min(VAST_MAX_DURATION_SECONDS, Math.floor(o.duration)),
    region,
    capabilities: vastMachineCapabilities(o, diskGb),
  };
}
