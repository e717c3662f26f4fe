import { declareOptions, parseOptions } from '../../src/providers/kit/options.js';

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

/** The `RUNPOD_PROVIDER_*` options. */
export const RUNPOD_OPTIONS = declareOptions({
  providerId: 'runpod',
  options: {
    API_KEY: { kind: 'string', required: true, secret: true, hint: 'a RunPod API key with read/write access to pods' },
    // An origin given with a path (".../v2", the retired REST v1 host's "/v1") would produce wrong paths on every call.
    API_URL: { kind: 'origin', default: RUNPOD_DEFAULTS.apiUrl, appends: '/v2/...' },
    IMAGE: { kind: 'string', default: RUNPOD_DEFAULTS.image, noSpaces: true },
    DISK_GB: { kind: 'integer', min: 1, max: 10_000, default: RUNPOD_DEFAULTS.diskGb },
    CLOUD: { kind: 'enum', values: ['SECURE', 'COMMUNITY'], default: RUNPOD_DEFAULTS.cloud },
    MAX_DURATION_SECONDS: { kind: 'integer', min: 1, max: 366 * 24 * 3600, default: RUNPOD_DEFAULTS.maxDurationSeconds },
  },
});

/** Turns raw variables (names without the prefix) into options; messages name the variable. */
export function parseRunpodOptions(raw: Record<string, string>): RunpodOptions {
  const o = parseOptions(RUNPOD_OPTIONS, raw);
  return { apiKey: o.API_KEY, apiUrl: o.API_URL, image: o.IMAGE, diskGb: o.DISK_GB, cloud: o.CLOUD, maxDurationSeconds: o.MAX_DURATION_SECONDS };
}
