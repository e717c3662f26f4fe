import type { ProviderOffer } from '../../src/providers/provider.js';
import { LAMBDA_MACHINE_CAPABILITIES } from './machine.js';
import type { LambdaInstanceTypes } from './types.js';

const KEY_SEPARATOR = '@';

/** An offer key names the instance type and the region it launches in: `gpu_1x_h100_sxm5@us-east-1`. */
export function offerKey(instanceType: string, region: string): string {
  return `${instanceType}${KEY_SEPARATOR}${region}`;
}

export function parseOfferKey(key: string): { instanceType: string; region: string } | null {
  const at = key.lastIndexOf(KEY_SEPARATOR);
  if (at <= 0 || at === key.length - 1) return null;
  return { instanceType: key.slice(0, at), region: key.slice(at + 1) };
}

/** VRAM per GPU from a description such as "H100 (80 GB SXM5)"; null when it names none. */
export function vramFromDescription(description: string): number | null {
  const m = /(\d+)\s*GB/i.exec(description);
  const gb = m ? Number(m[1]) : NaN;
  return Number.isSafeInteger(gb) && gb > 0 ? gb : null;
}

const positiveOrNull = (v: unknown) => (Number.isSafeInteger(v) && (v as number) > 0 ? (v as number) : null);

/**
 * Every reason an instance type (or one of its regions) is not offered, each a stable code (the
 * providers check counts them): no `instance_type`, no price, no GPUs, no region with capacity,
 * a region without a name, a region `LAMBDA_PROVIDER_REGIONS` leaves out.
 */
export const LAMBDA_DROP_REASONS = [
  'no_instance_type',
  'no_price',
  'no_gpus',
  'no_capacity',
  'no_region_name',
  'region_not_configured',
] as const;
export type LambdaDropReason = (typeof LAMBDA_DROP_REASONS)[number];

/**
 * One offer per instance type and region with capacity. The name is the instance type name
 * (`gpu_1x_h100_sxm5`), which the host's GPU catalog resolves; Lambda prices in whole cents per
 * hour for the whole instance already, which is exactly our cost figure. Every offer takes the
 * same machine settings ({@link LAMBDA_MACHINE_CAPABILITIES}). `onDrop` hears why each type or
 * region left out is.
 */
export function offersFromInstanceTypes(
  data: LambdaInstanceTypes,
  opts: { regions: string[] | null; maximumDurationSeconds: number; onDrop?: (reason: LambdaDropReason) => void },
): ProviderOffer[] {
  const offers: ProviderOffer[] = [];
  const drop = (reason: LambdaDropReason) => opts.onDrop?.(reason);
  for (const [name, item] of Object.entries(data ?? {})) {
    const t = item?.instance_type;
    const price = t?.price_cents_per_hour;
    const gpus = t?.specs?.gpus;
    // A type without GPUs or a price is not something we rent out; a malformed row must not hide the others.
    const why: LambdaDropReason | null = !t
      ? 'no_instance_type'
      : !Number.isSafeInteger(price) || price <= 0
        ? 'no_price'
        : !Number.isSafeInteger(gpus) || gpus <= 0
          ? 'no_gpus'
          : null;
    if (why) {
      drop(why);
      continue;
    }
    const regions = item.regions_with_capacity_available ?? [];
    if (regions.length === 0) drop('no_capacity');
    for (const region of regions) {
      const skip = !region?.name
        ? 'no_region_name'
        : opts.regions && !opts.regions.includes(region.name)
          ? 'region_not_configured'
          : null;
      if (skip) {
        drop(skip);
        continue;
      }
      offers.push({
        key: offerKey(t.name || name, region.name),
        name: t.name || name,
        category: 'datacenter',
        vramGb: vramFromDescription(t.gpu_description ?? ''),
        gpuCount: gpus,
        cpuCores: positiveOrNull(t.specs.vcpus),
        memoryGb: positiveOrNull(t.specs.memory_gib),
        storageGb: positiveOrNull(t.specs.storage_gib),
        pricePerHourMinor: price,
        maximumDurationSeconds: opts.maximumDurationSeconds,
        region: region.name,
        capabilities: LAMBDA_MACHINE_CAPABILITIES,
      });
    }
  }
  return offers;
}
