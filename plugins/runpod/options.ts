import { ConfigError, given } from '../../src/config-values.js';
import { declareOptions, optionVariable, parseOptions } from '../../src/providers/kit/options.js';

/**
 * The host CUDA constraint a GPU pod is created with (`gpu.allowedCudaVersions` or
 * `gpu.minCudaVersion` of RunPod's `CreateGpuConfig`, both `major.minor`). RunPod treats the two
 * as mutually exclusive, so exactly one is set.
 */
export type CudaConstraint = { allowedCudaVersions: string[] } | { minCudaVersion: string };

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
  /** Largest container disk a rental may ask for (offers' `capabilities.maxDiskGb`); RunPod documents none. */
  maxDiskGb: number;
  /** Which RunPod cloud to rent from (prices and availability differ). */
  cloud: 'SECURE' | 'COMMUNITY';
  /** Longest rental we sell; RunPod itself sets none. */
  maxDurationSeconds: number;
  /**
   * The host CUDA constraint every create carries, or null for none: `RUNPOD_PROVIDER_CUDA_VERSIONS`
   * when set, otherwise a floor at the CUDA version the image's tag names.
   */
  cuda: CudaConstraint | null;
  /**
   * `cuda` comes from `RUNPOD_PROVIDER_CUDA_VERSIONS`, so it holds for every image; otherwise it was
   * read from the default image's tag, and a rental's own image gets the floor its own tag names.
   */
  cudaFromSetting: boolean;
}

export const RUNPOD_DEFAULTS = {
  apiUrl: 'https://api.runpod.io',
  // An official RunPod image: its start script installs PUBLIC_KEY into root's authorized_keys and starts sshd.
  image: 'runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04',
  diskGb: 50,
  maxDiskGb: 500,
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
    MAX_DISK_GB: { kind: 'integer', min: 1, max: 10_000, default: RUNPOD_DEFAULTS.maxDiskGb },
    CLOUD: { kind: 'enum', values: ['SECURE', 'COMMUNITY'], default: RUNPOD_DEFAULTS.cloud },
    MAX_DURATION_SECONDS: {
      kind: 'integer',
      min: 1,
      max: 366 * 24 * 3600,
      default: RUNPOD_DEFAULTS.maxDurationSeconds,
    },
    CUDA_VERSIONS: {
      kind: 'list',
      item: /^(\d+\.\d+\+?|any)$/i,
      itemHelp: 'CUDA versions as major.minor (12.4,12.8), one floor such as 12.4+, or any',
    },
  },
});

/**
 * The CUDA version (`major.minor`) an image is built for, read from its tag as RunPod's and most
 * vendors' images spell it (`...-cuda12.4.1-...`, `:12.8.1-cuda-...`); null when the tag names none.
 */
export function imageCudaVersion(image: string): string | null {
  const tag = image.slice(image.lastIndexOf('/') + 1);
  const m = /cuda-?(\d+)\.(\d+)/i.exec(tag);
  return m ? `${Number(m[1])}.${Number(m[2])}` : null;
}

/**
 * The constraint for `RUNPOD_PROVIDER_CUDA_VERSIONS` (null: not set) and the image. A host whose
 * driver is older than the image's CUDA cannot start it on GeForce cards (no forward
 * compatibility) and the pod never gets its SSH endpoint; a newer driver runs it, so the default
 * is an open floor rather than an exact set, which RunPod matches exactly and would narrow stock.
 */
export function cudaConstraintFor(setting: string[] | null, image: string): CudaConstraint | null {
  const variable = optionVariable('runpod', 'CUDA_VERSIONS');
  if (setting === null) {
    const v = imageCudaVersion(image);
    return v ? { minCudaVersion: v } : null;
  }
  const items = setting.map((s) => s.toLowerCase());
  if (items.includes('any')) {
    if (items.length > 1) throw new Error(`${variable}: "any" cannot be combined with versions`);
    return null;
  }
  const floors = items.filter((s) => s.endsWith('+'));
  if (floors.length > 0) {
    // RunPod refuses a floor together with a set (400), so the choice is made here, at start.
    if (items.length > 1)
      throw new Error(
        `${variable}: a floor such as 12.4+ must stand alone (RunPod takes either a floor or a set of versions)`,
      );
    return { minCudaVersion: floors[0].slice(0, -1) };
  }
  return { allowedCudaVersions: [...new Set(items)] };
}

/**
 * The constraint a pod of `image` is created with: the setting when the operator made one, else
 * the floor the image's own tag names, else the default image's (a tag that names no CUDA says
 * nothing, and the default's floor is the safer guess than none).
 */
export function cudaConstraintOf(
  options: Pick<RunpodOptions, 'cuda' | 'cudaFromSetting' | 'image'>,
  image: string,
): CudaConstraint | null {
  if (options.cudaFromSetting || image === options.image) return options.cuda;
  return cudaConstraintFor(null, image) ?? options.cuda;
}

/**
 * What to add to the kit's "origin without a path" refusal when `API_URL`'s path names an API
 * version (`https://rest.runpod.io/v1`, `https://api.runpod.io/v2`), the two ways an operator
 * following RunPod's own base URLs goes wrong; null otherwise.
 */
function apiUrlVersionHint(value: string | undefined): string | null {
  const v = given(value);
  if (v === undefined || !URL.canParse(v)) return null;
  const version = /(?:^|\/)(v[12])(?:\/|$)/i.exec(new URL(v).pathname)?.[1].toLowerCase();
  if (version === 'v1')
    return 'RunPod retired REST v1 on 2026-11-15 and the plugin speaks REST v2 only: give the origin only';
  if (version === 'v2') return 'the plugin puts /v2 in front of every path itself: give the origin only';
  return null;
}

/** Turns raw variables (names without the prefix) into options; messages name the variable. */
export function parseRunpodOptions(raw: Record<string, string>): RunpodOptions {
  let o;
  try {
    o = parseOptions(RUNPOD_OPTIONS, raw);
  } catch (err) {
    const hint = apiUrlVersionHint(raw.API_URL);
    if (hint && err instanceof ConfigError && err.message.startsWith(`${optionVariable('runpod', 'API_URL')} `))
      throw new ConfigError(`${err.message}; ${hint}`);
    throw err;
  }
  // The default disk is always one a rental may ask for: a ceiling set below it is a mistake, an
  // unset one rises to it.
  const maxDiskSet = given(raw.MAX_DISK_GB) !== undefined;
  if (maxDiskSet && o.MAX_DISK_GB < o.DISK_GB)
    throw new Error(
      `${optionVariable('runpod', 'MAX_DISK_GB')} (${o.MAX_DISK_GB}) is below ${optionVariable('runpod', 'DISK_GB')} (${o.DISK_GB})`,
    );
  return {
    apiKey: o.API_KEY,
    apiUrl: o.API_URL,
    image: o.IMAGE,
    diskGb: o.DISK_GB,
    maxDiskGb: Math.max(o.MAX_DISK_GB, o.DISK_GB),
    cloud: o.CLOUD,
    maxDurationSeconds: o.MAX_DURATION_SECONDS,
    cuda: cudaConstraintFor(o.CUDA_VERSIONS, o.IMAGE),
    cudaFromSetting: o.CUDA_VERSIONS !== null,
  };
}
