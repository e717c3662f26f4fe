import type { Logger } from '../../src/logger.js';
import { createProviderClient } from '../../src/providers/kit/client.js';
import type { DriftRecorder } from '../../src/providers/kit/drift.js';
import { listAllPages, readCursor } from '../../src/providers/kit/paging.js';
import { ProviderDrift } from '../../src/providers/kit/provider-drift.js';
import type { EndpointLimit, HttpResponse, ProviderHttpClient } from '../../src/providers/provider-http.js';
import { apiErrorFor, RUNPOD_ERROR_READING } from './errors.js';
import type { RunpodOptions } from './options.js';

/** One way into a pod over SSH (`PodSshEndpoint`). */
export interface PodSshEndpoint {
  host: string;
  port: number;
  username: string;
  command?: string;
}

/** The fields of a v2 `Pod` the plugin reads. */
export interface RunpodPod {
  id: string;
  name: string;
  status: string;
  gpu?: { id: string; count?: number };
  cost?: number;
  dataCenterId?: string | null;
  /** What the pod publishes, `<port>/<protocol>` (`8888/http` goes through RunPod's HTTP proxy). */
  ports?: string[];
  createdAt?: string;
  ssh?: { proxy: PodSshEndpoint | null; direct: PodSshEndpoint | null } | null;
}

/** The fields of a v2 catalog `GpuType` the plugin reads. */
export interface RunpodGpuType {
  id: string;
  name: string;
  manufacturer?: string;
  memory?: number;
  secure?: boolean;
  community?: boolean;
  price: { secure?: number; community?: number };
  maxCount: { secure?: number; community?: number };
  availability?: 'NONE' | 'LOW' | 'MEDIUM' | 'HIGH';
}

/** `POST /v2/pods` body: only documented fields (the API answers 422 to any other). */
export interface CreatePodBody {
  name: string;
  image: string;
  // Always with count: a create without it has been seen to fail as "no instances available".
  // The CUDA constraint keeps an image off hosts whose driver cannot start it.
  gpu: { id: string; count: number; allowedCudaVersions?: string[]; minCudaVersion?: string };
  cloud: 'SECURE' | 'COMMUNITY';
  disk: number;
  ports: string[];
  env: Record<string, string>;
  /** The container's start command in place of the image's CMD; absent: the image's own. */
  args?: string;
}

/**
 * Client-side spacing per endpoint bucket. RunPod's quota is per user and announced in
 * `RateLimit-Policy` (e.g. 60 a minute); these keep a burst of polls from spending it, and a 429
 * pushes the bucket out by `Retry-After`.
 */
export const RUNPOD_LIMITS: Record<string, EndpointLimit> = {
  catalog: { minIntervalMs: 1000 },
  'pods.create': { minIntervalMs: 1000 },
  'pods.read': { minIntervalMs: 250 },
  'pods.delete': { minIntervalMs: 500 },
};

export interface RunpodClientHooks {
  limits?: Record<string, EndpointLimit>;
  timeoutMs?: number;
  createTimeoutMs?: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

/** Whether an answer has the fields of a pod the plugin relies on. */
export function isPod(v: unknown): v is RunpodPod {
  const p = v as RunpodPod | null;
  return (
    !!p &&
    typeof p === 'object' &&
    typeof p.id === 'string' &&
    typeof p.name === 'string' &&
    typeof p.status === 'string'
  );
}

/** The v2 endpoints the plugin uses, over the shared provider HTTP client. */
export class RunpodClient {
  readonly http: ProviderHttpClient;
  /** Where answers this plugin cannot fully read are reported (failures only a catch-all row takes: by `http` itself). */
  readonly drift: ProviderDrift;
  private readonly createTimeoutMs?: number;

  constructor(options: RunpodOptions, logger: Logger, drift: DriftRecorder, hooks: RunpodClientHooks = {}) {
    const limits = hooks.limits ?? RUNPOD_LIMITS;
    this.http = createProviderClient({
      providerId: 'runpod',
      apiUrl: options.apiUrl,
      apiKey: options.apiKey,
      logger,
      intervalsMs: Object.fromEntries(Object.entries(limits).map(([bucket, l]) => [bucket, l.minIntervalMs])),
      drift,
      errors: RUNPOD_ERROR_READING,
      tuning: { timeoutMs: hooks.timeoutMs, now: hooks.now, sleep: hooks.sleep },
    });
    this.drift = new ProviderDrift(drift, 'runpod');
    this.createTimeoutMs = hooks.createTimeoutMs;
  }

  private fail(what: string, res: HttpResponse): never {
    throw apiErrorFor(`runpod ${what}`, res);
  }

  /**
   * `GET /v2/catalog/gpus` with pod availability for `count` GPUs in `cloud`; `onUnreadable` hears
   * of each entry left out for its shape (the providers check counts them).
   */
  async gpuTypes(
    cloud: 'SECURE' | 'COMMUNITY',
    count: number,
    onUnreadable?: (entry: unknown) => void,
  ): Promise<RunpodGpuType[]> {
    const res = await this.http.request('catalog', 'GET', '/v2/catalog/gpus', {
      query: { include: 'AVAILABILITY', product: 'POD', cloud, count },
    });
    if (res.status !== 200) this.fail('GET /v2/catalog/gpus', res);
    const gpus = (res.json as { gpus?: unknown } | null)?.gpus;
    const where = 'GET /v2/catalog/gpus';
    if (!Array.isArray(gpus))
      throw this.drift.badResponse(where, res.json, `runpod ${where}: no "gpus" array in the answer`, res.status);
    const readable = (g: RunpodGpuType | null): g is RunpodGpuType =>
      !!g && typeof g.id === 'string' && typeof g.name === 'string' && !!g.price && !!g.maxCount;
    // A type left out for its shape is reported, not only dropped: RunPod may have changed the catalog.
    for (const g of gpus)
      if (!readable(g)) {
        this.drift.unknownFieldShape(`${where} gpus[]`, g);
        onUnreadable?.(g);
      }
    return gpus.filter(readable);
  }

  /** `POST /v2/pods`: the raw answer, for the create error table. */
  createPod(body: CreatePodBody): Promise<HttpResponse> {
    return this.http.request('pods.create', 'POST', '/v2/pods', { body, timeoutMs: this.createTimeoutMs });
  }

  /**
   * `GET /v2/pods`: every pod of the account (no name filter exists), following
   * `pagination.nextCursor` with `?cursor=` until a page has none. A page without `pagination` is
   * the last (the documented unpaged answer). Any failed or malformed page throws.
   */
  async listPods(): Promise<RunpodPod[]> {
    const what = 'runpod GET /v2/pods';
    const list = await listAllPages<RunpodPod>({
      what,
      fetchPage: async (cursor) => {
        const res = await this.http.request('pods.read', 'GET', '/v2/pods', { query: { cursor } });
        if (res.status !== 200) this.fail('GET /v2/pods', res);
        const body = res.json as { pods?: unknown; pagination?: { nextCursor?: unknown } | null } | null;
        const pods = body?.pods;
        const where = 'GET /v2/pods';
        if (!Array.isArray(pods))
          throw this.drift.badPage(where, res.json, `${what}: no "pods" array in the answer`, res.status);
        if (!pods.every(isPod))
          throw this.drift.badPage(where, res.json, `${what}: a pod without id, name or status`, res.status);
        const pagination = body?.pagination;
        if (pagination !== undefined && pagination !== null && typeof pagination !== 'object')
          throw this.drift.badPage(where, res.json, `${what}: "pagination" is not an object`, res.status);
        return {
          items: pods,
          next: readCursor(pagination?.nextCursor, what, { drift: this.drift, where, page: res.json }),
        };
      },
    });
    return list.items;
  }

  /** `GET /v2/pods/{id}`; null when RunPod answers 404 (the pod is gone). */
  async getPod(id: string): Promise<RunpodPod | null> {
    const res = await this.http.request('pods.read', 'GET', `/v2/pods/${encodeURIComponent(id)}`);
    if (res.status === 404) return null;
    if (res.status !== 200) this.fail('GET /v2/pods/{id}', res);
    if (!isPod(res.json))
      throw this.drift.badResponse('GET /v2/pods/{id}', res.json, 'runpod GET /v2/pods/{id}: not a pod', res.status);
    return res.json;
  }

  /** `DELETE /v2/pods/{id}`: 204, or 404 when it is already gone. */
  async deletePod(id: string): Promise<void> {
    const res = await this.http.request('pods.delete', 'DELETE', `/v2/pods/${encodeURIComponent(id)}`);
    if (res.status === 204 || res.status === 200 || res.status === 404) return;
    this.fail('DELETE /v2/pods/{id}', res);
  }
}
