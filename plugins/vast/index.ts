import type { ProviderPlugin } from '../../src/providers/provider.js';
import { VastProvider, type VastOptions } from './vast-provider.js';

/** A CUDA image with sshd that Vast's `ssh_direct` launch mode starts and keys. */
export const VAST_DEFAULT_IMAGE = 'vastai/base-image:cuda-12.4.1-auto';
export const VAST_DEFAULT_API_URL = 'https://console.vast.ai';
export const VAST_DEFAULT_DISK_GB = 32;
export const VAST_DEFAULT_MAX_OFFERS = 64;
/** Vast refuses smaller disks. */
const MIN_DISK_GB = 8;
/** The image field's documented length limit. */
const MAX_IMAGE = 1024;

const KNOWN = ['API_KEY', 'API_URL', 'IMAGE', 'DISK_GB', 'MAX_OFFERS'] as const;
const v = (name: string) => `VAST_PROVIDER_${name}`;

function integer(raw: string | undefined, name: string, fallback: number, min: number, max: number): number {
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw.trim());
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new Error(`${v(name)} must be a whole number from ${min} to ${max}, got "${raw}"`);
  return n;
}

function origin(raw: string | undefined): string {
  if (raw === undefined || raw.trim() === '') return VAST_DEFAULT_API_URL;
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new Error(`${v('API_URL')} must be an http(s) origin such as ${VAST_DEFAULT_API_URL}, got "${raw}"`);
  }
  if (!['http:', 'https:'].includes(url.protocol) || (url.pathname !== '/' && url.pathname !== '') || url.search || url.hash || url.username) {
    throw new Error(`${v('API_URL')} must be an http(s) origin without a path (the plugin appends /api/v0/... and /api/v1/...), got "${raw}"`);
  }
  return url.origin;
}

/** Turns raw `VAST_PROVIDER_*` values into options; every message names its variable and never echoes the key. */
export function validateVastOptions(raw: Record<string, string>): VastOptions {
  for (const k of Object.keys(raw)) {
    if (!(KNOWN as readonly string[]).includes(k)) throw new Error(`${v(k)} is not an option of the vast provider (known: ${KNOWN.map(v).join(', ')})`);
  }
  const apiKey = raw.API_KEY?.trim();
  if (!apiKey) throw new Error(`${v('API_KEY')} is required (a Vast.ai API key from console.vast.ai, Account → Keys)`);
  if (/\s/.test(apiKey)) throw new Error(`${v('API_KEY')} must be a single token without spaces`);
  const image = raw.IMAGE?.trim() || VAST_DEFAULT_IMAGE;
  if (image.length > MAX_IMAGE || /\s/.test(image)) throw new Error(`${v('IMAGE')} must be a Docker image reference without spaces, at most ${MAX_IMAGE} characters`);
  return {
    apiKey,
    apiUrl: origin(raw.API_URL),
    image,
    diskGb: integer(raw.DISK_GB, 'DISK_GB', VAST_DEFAULT_DISK_GB, MIN_DISK_GB, 65_536),
    maxOffers: integer(raw.MAX_OFFERS, 'MAX_OFFERS', VAST_DEFAULT_MAX_OFFERS, 1, 1_000),
  };
}

const plugin: ProviderPlugin<VastOptions> = {
  id: 'vast',
  description: 'Vast.ai on-demand GPU instances (direct SSH as root, key attached per instance)',
  validateOptions: validateVastOptions,
  create(options, deps) {
    return new VastProvider(options, deps);
  },
};

export default plugin;
