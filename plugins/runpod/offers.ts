import { usdToCentsCeil } from '../../src/providers/pricing.js';
import type { ProviderOffer } from '../../src/providers/provider.js';
import type { RunpodGpuType } from './client.js';
import { runpodMachineCapabilities } from './machine.js';
import type { RunpodOptions } from './options.js';

/** GPU counts we offer per GPU type, each within the type's `maxCount` for our cloud. */
export const RUNPOD_GPU_COUNTS = [1, 2, 4, 8] as const;

/** Offer keys carry the count and RunPod's GPU type id: `2x:NVIDIA H100 80GB HBM3`. */
export function offerKey(gpuId: string, count: number): string {
  return `${count}x:${gpuId}`;
}

/** The GPU type id and count of an offer key; null when the key is not one of ours. */
export function parseOfferKey(key: string): { gpuId: string; count: number } | null {
  const m = /^(\d+)x:(.+)$/.exec(key);
  return m ? { gpuId: m[2], count: Number(m[1]) } : null;
}

/** RunPod does not group its GPUs; the type id says enough: GeForce, RTX workstation cards, the rest. */
export function runpodCategory(gpu: Pick<RunpodGpuType, 'id'>): string {
  if (/geforce/i.test(gpu.id)) return 'consumer';
  if (/\brtx (a\d{4}|\d{4} ada|pro)\b/i.test(gpu.id)) return 'workstation';
  return 'datacenter';
}

/** Every reason a catalog GPU type at a count is not offered, each a stable code (the providers check counts them). */
export const RUNPOD_DROP_REASONS = ['not_in_cloud', 'count_above_max', 'no_stock', 'no_price'] as const;
export type RunpodDropReason = (typeof RUNPOD_DROP_REASONS)[number];

/**
 * Why a catalog GPU type cannot be rented for `count` GPUs in the configured cloud, or null when it
 * can: not offered in that cloud, fewer than `count` per pod, no stock, no price.
 */
export function runpodGpuDrop(
  gpu: RunpodGpuType,
  count: number,
  options: Pick<RunpodOptions, 'cloud'>,
): RunpodDropReason | null {
  const side = options.cloud === 'SECURE' ? 'secure' : 'community';
  const price = gpu.price[side];
  if (gpu[side] === false) return 'not_in_cloud';
  if ((gpu.maxCount[side] ?? 0) < count) return 'count_above_max';
  if (!gpu.availability || gpu.availability === 'NONE') return 'no_stock';
  if (typeof price !== 'number' || !(price > 0)) return 'no_price';
  return null;
}

/** One catalog GPU type read for `count` GPUs as our offer, or null when {@link runpodGpuDrop} names a reason. */
export function mapRunpodGpu(
  gpu: RunpodGpuType,
  count: number,
  options: Pick<RunpodOptions, 'cloud' | 'diskGb' | 'maxDiskGb' | 'maxDurationSeconds'>,
): ProviderOffer | null {
  if (runpodGpuDrop(gpu, count, options)) return null;
  const price = gpu.price[options.cloud === 'SECURE' ? 'secure' : 'community'] as number;
  return {
    key: offerKey(gpu.id, count),
    name: gpu.name,
    category: runpodCategory(gpu),
    vramGb: typeof gpu.memory === 'number' && gpu.memory > 0 ? gpu.memory : null,
    gpuCount: count,
    cpuCores: null,
    memoryGb: null,
    storageGb: options.diskGb,
    // RunPod prices one GPU; the pod costs that times the count.
    pricePerHourMinor: usdToCentsCeil(price * count),
    maximumDurationSeconds: options.maxDurationSeconds,
    region: null,
    capabilities: runpodMachineCapabilities(options.maxDiskGb),
  };
}
