import { ConfigError, given } from '../../src/config-values.js';
import { declareOptions, optionVariable, parseOptions } from '../../src/providers/kit/options.js';
import { parseUsdPerGb } from '../../src/vocabulary/money.js';

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
    // A decimal: read exactly by readUsdPerGb below, since the kit's numbers are whole.
    MAX_TRAFFIC_PRICE_PER_GB: { kind: 'string', noSpaces: true, maxLength: 16 },
  },
});

/**
 * Options that are gone, with what to tell an operator who still sets one: a variable that stops
 * meaning anything must stop the start rather than be ignored, or the operator believes it holds.
 */
const REMOVED: Readonly<Record<string, string>> = {
  BANDWIDTH_GB_PER_HOUR:
    'traffic is now billed as used, from the counters of each instance at the per-GB price of its host plus the markup, so no volume is assumed: remove it (VAST_PROVIDER_MAX_TRAFFIC_PRICE_PER_GB leaves out asks whose traffic is dear)',
};

/** Validated `VAST_PROVIDER_*` options. */
export interface VastOptions {
  apiKey: string;
  /** API origin; paths `/api/v0/...` and `/api/v1/...` are appended. */
  apiUrl: string;
  image: string;
  diskGb: number;
  maxOffers: number;
  /**
   * The highest per-GB traffic price (up or down, millionths of a USD) an ask may bill to be
   * offered; null: no limit. 0 offers only asks whose traffic is free.
   */
  maxTrafficMicroUsdPerGb: number | null;
}

/** A price in USD per GB as whole millionths, read from its decimal text without floating point; null when unset. */
function readUsdPerGb(name: string, raw: string | undefined): number | null {
  const v = given(raw);
  if (v === undefined) return null;
  const micro = parseUsdPerGb(v);
  if (micro === null)
    throw new ConfigError(
      `${optionVariable('vast', name)} must be USD per GB with at most six decimals, such as 0.05, got "${v}"`,
    );
  return micro;
}

/** Turns raw `VAST_PROVIDER_*` values into options; every message names its variable and never echoes the key. */
export function validateVastOptions(raw: Record<string, string>): VastOptions {
  const rest = { ...raw };
  for (const [name, why] of Object.entries(REMOVED)) {
    if (given(rest[name]) !== undefined) throw new ConfigError(`${optionVariable('vast', name)} was removed: ${why}`);
    // Blank is unset, for a removed variable as for any.
    delete rest[name];
  }
  const o = parseOptions(VAST_OPTIONS, rest);
  return {
    apiKey: o.API_KEY,
    apiUrl: o.API_URL,
    image: o.IMAGE,
    diskGb: o.DISK_GB,
    maxOffers: o.MAX_OFFERS,
    maxTrafficMicroUsdPerGb: readUsdPerGb('MAX_TRAFFIC_PRICE_PER_GB', o.MAX_TRAFFIC_PRICE_PER_GB),
  };
}
