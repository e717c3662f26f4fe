import { declareOptions, parseOptions } from '../../src/providers/kit/options.js';

/** A CUDA image with sshd that Vast's `ssh_direct` launch mode starts and keys. */
export const VAST_DEFAULT_IMAGE = 'vastai/base-image:cuda-12.4.1-auto';
export const VAST_DEFAULT_API_URL = 'https://console.vast.ai';
export const VAST_DEFAULT_DISK_GB = 32;
export const VAST_DEFAULT_MAX_OFFERS = 64;

/** The `VAST_PROVIDER_*` options. */
export const VAST_OPTIONS = declareOptions({
  providerId: 'vast',
  options: {
    API_KEY: {
      kind: 'string',
      required: true,
      secret: true,
      noSpaces: true,
      hint: 'a Vast.ai API key from console.vast.ai, Account → Keys',
    },
    API_URL: { kind: 'origin', default: VAST_DEFAULT_API_URL, appends: '/api/v0/... and /api/v1/...' },
    // The image field's documented length limit.
    IMAGE: { kind: 'string', default: VAST_DEFAULT_IMAGE, noSpaces: true, maxLength: 1024 },
    // Vast refuses disks under 8 GB.
    DISK_GB: { kind: 'integer', min: 8, max: 65_536, default: VAST_DEFAULT_DISK_GB },
    MAX_OFFERS: { kind: 'integer', min: 1, max: 1_000, default: VAST_DEFAULT_MAX_OFFERS },
    // 0 leaves out offers that bill traffic; more prices that many GB each way into every hour.
    BANDWIDTH_GB_PER_HOUR: { kind: 'integer', min: 0, max: 10_000, default: 0 },
  },
});

/** Validated `VAST_PROVIDER_*` options. */
export interface VastOptions {
  apiKey: string;
  /** API origin; paths `/api/v0/...` and `/api/v1/...` are appended. */
  apiUrl: string;
  image: string;
  diskGb: number;
  maxOffers: number;
  /**
   * GB up and GB down per hour assumed when pricing offers that bill internet traffic per GB.
   * 0 (the default) leaves such offers out of the inventory.
   */
  bandwidthGbPerHour: number;
}

/** Turns raw `VAST_PROVIDER_*` values into options; every message names its variable and never echoes the key. */
export function validateVastOptions(raw: Record<string, string>): VastOptions {
  const o = parseOptions(VAST_OPTIONS, raw);
  return {
    apiKey: o.API_KEY,
    apiUrl: o.API_URL,
    image: o.IMAGE,
    diskGb: o.DISK_GB,
    maxOffers: o.MAX_OFFERS,
    bandwidthGbPerHour: o.BANDWIDTH_GB_PER_HOUR,
  };
}
