/** What the RunPod plugin is configured with (`RUNPOD_PROVIDER_<NAME>` variables). */
export interface RunpodOptions {
  /** Bearer key; never logged. */
  apiKey: string;
  /** The API's origin; the plugin appends `/v2/...`. */
  apiUrl: string;
  /** Container image for every pod; it must start sshd with the key in `PUBLIC_KEY`. */
  image: string;
  /** Container disk per pod in GB. */
  diskGb: number;
  /** Which RunPod cloud to rent from (prices and availability differ). */
  cloud: 'SECURE' | 'COMMUNITY';
  /** Longest rental we sell; RunPod itself sets none. */
  maxDurationSeconds: number;
}

export const RUNPOD_DEFAULTS = {
  apiUrl: 'https://api.runpod.io',
  // An official RunPod image: its start script installs PUBLIC_KEY into root's authorized_keys and starts sshd.
  image: 'runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04',
  diskGb: 50,
  cloud: 'SECURE' as const,
  maxDurationSeconds: 7 * 24 * 3600,
};

const KNOWN = ['API_KEY', 'API_URL', 'IMAGE', 'DISK_GB', 'CLOUD', 'MAX_DURATION_SECONDS'];
const v = (name: string) => `RUNPOD_PROVIDER_${name}`;

function positiveInt(raw: string | undefined, name: string, fallback: number, max: number): number {
  if (raw === undefined || raw.trim() === '') return fallback;
  const s = raw.trim();
  if (!/^\d+$/.test(s) || Number(s) < 1 || Number(s) > max) throw new Error(`${v(name)} must be a whole number from 1 to ${max}, got "${raw}"`);
  return Number(s);
}

function origin(raw: string | undefined): string {
  if (raw === undefined || raw.trim() === '') return RUNPOD_DEFAULTS.apiUrl;
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new Error(`${v('API_URL')} must be a URL such as ${RUNPOD_DEFAULTS.apiUrl}, got "${raw}"`);
  }
  if (!['http:', 'https:'].includes(url.protocol)) throw new Error(`${v('API_URL')} must be an http(s) URL, got "${raw}"`);
  // The plugin appends /v2/...; an origin given with a path (".../v2", the retired REST v1 host's
  // "/v1") would produce wrong paths on every call.
  if (url.pathname !== '/' || url.search || url.hash) throw new Error(`${v('API_URL')} must be the API's origin without a path (the plugin adds /v2/...), got "${raw}"`);
  return url.origin;
}

/** Turns raw variables (names without the prefix) into options; messages name the variable. */
export function parseRunpodOptions(raw: Record<string, string>): RunpodOptions {
  for (const k of Object.keys(raw)) {
    if (!KNOWN.includes(k)) throw new Error(`${v(k)} is not an option of the runpod provider (known: ${KNOWN.map(v).join(', ')})`);
  }
  const apiKey = raw.API_KEY?.trim();
  if (!apiKey) throw new Error(`${v('API_KEY')} is required (a RunPod API key with read/write access to pods)`);
  const cloud = (raw.CLOUD?.trim() || RUNPOD_DEFAULTS.cloud).toUpperCase();
  if (cloud !== 'SECURE' && cloud !== 'COMMUNITY') throw new Error(`${v('CLOUD')} must be SECURE or COMMUNITY, got "${raw.CLOUD}"`);
  const image = raw.IMAGE?.trim() || RUNPOD_DEFAULTS.image;
  if (/\s/.test(image)) throw new Error(`${v('IMAGE')} must be an image reference without spaces, got "${raw.IMAGE}"`);
  return {
    apiKey,
    apiUrl: origin(raw.API_URL),
    image,
    diskGb: positiveInt(raw.DISK_GB, 'DISK_GB', RUNPOD_DEFAULTS.diskGb, 10_000),
    cloud,
    maxDurationSeconds: positiveInt(raw.MAX_DURATION_SECONDS, 'MAX_DURATION_SECONDS', RUNPOD_DEFAULTS.maxDurationSeconds, 366 * 24 * 3600),
  };
}
