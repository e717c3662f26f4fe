import type { Logger } from '../../src/logger.js';
import { createProviderClient, type ClientTuning } from '../../src/providers/kit/client.js';
import type { DriftRecorder } from '../../src/providers/kit/drift.js';
import { listAllPages, readCursor } from '../../src/providers/kit/paging.js';
import { ProviderDrift } from '../../src/providers/kit/provider-drift.js';
import type { ProviderHttpClient, HttpResponse } from '../../src/providers/provider-http.js';
import { classifyVastError, readError, VAST_ERROR_READING } from './errors.js';
import type { VastOffer } from './offers.js';

/** The fields of a Vast instance (v0 show, v1 list) this plugin reads. */
export interface VastInstance {
  id: number;
  label: string | null;
  actual_status: string | null;
  cur_state?: string | null;
  intended_status?: string | null;
  /** Why the instance is where it is (a start failure's error, or progress text while loading). */
  status_msg?: string | null;
  public_ipaddr?: string | null;
  ports?: Record<string, { HostIp?: string; HostPort?: string }[] | null> | null;
  /** What the instance costs per hour in USD, as Vast bills it now (it can differ from the offer's). */
  dph_total?: number | null;
  /** USD per GB of internet traffic up / down, billed apart from `dph_total`. */
  inet_up_cost?: number | null;
  inet_down_cost?: number | null;
  /** Cumulative billed traffic up / down in KiB (`vastTraffic` in machine.ts); numbers, null, or at times their text. */
  inet_up_billed?: unknown;
  inet_down_billed?: unknown;
  /** GB of disk the instance was created with. */
  disk_space?: number | null;
  /** USD per hour its disk costs, part of `dph_total`. */
  storage_total_cost?: number | null;
  /** The create's `env` as Vast keeps it: `[name, value]` pairs, ports as `["-p 8000:8000", "1"]`. Holds the rental's values: never logged. */
  extra_env?: unknown;
}

/** Rate-limit buckets, one per documented endpoint limit. */
export type VastBucket = 'offers' | 'create' | 'attach' | 'get' | 'list' | 'destroy';

/**
 * Vast's documented minimum spacing per endpoint and API key (offer search: 10 a minute). Key
 * attachment has no documented limit; it gets the spacing of the other per-instance calls.
 */
export const VAST_MIN_INTERVALS_MS: Readonly<Record<VastBucket, number>> = {
  offers: 6_000,
  create: 4_500,
  attach: 2_000,
  get: 2_000,
  list: 1_000,
  destroy: 3_000,
};

/** The v1 list's page size ceiling. */
export const VAST_PAGE_LIMIT = 25;
/** A safety stop for paging: 10 000 instances, or a server repeating its token. */
const MAX_PAGES = 400;

export interface VastClientOptions extends ClientTuning {
  apiUrl: string;
  apiKey: string;
  logger: Logger;
  /** The host's drift recorder (`ProviderDeps.drift`). */
  drift: DriftRecorder;
  intervalsMs?: Partial<Record<VastBucket, number>>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function isInstance(v: unknown): v is VastInstance {
  return isObject(v) && Number.isSafeInteger(v.id);
}

/** The Vast endpoints this plugin uses, over the shared provider HTTP client. */
export class VastClient {
  readonly http: ProviderHttpClient;
  /** Where answers this plugin cannot fully read are reported (failures only a catch-all row takes: by `http` itself). */
  readonly drift: ProviderDrift;

  constructor(opts: VastClientOptions) {
    this.http = createProviderClient({
      providerId: 'vast',
      apiUrl: opts.apiUrl,
      apiKey: opts.apiKey,
      logger: opts.logger,
      intervalsMs: VAST_MIN_INTERVALS_MS,
      drift: opts.drift,
      errors: VAST_ERROR_READING,
      tuning: opts,
    });
    this.drift = new ProviderDrift(opts.drift, 'vast');
  }

  async searchOffers(body: Record<string, unknown>): Promise<VastOffer[]> {
    const path = '/api/v0/bundles/';
    const res = await this.http.request('offers', 'POST', path, { body });
    if (res.status !== 200) throw readError(`vast POST ${path}`, res);
    const offers = (res.json as { offers?: unknown } | null)?.offers;
    if (!Array.isArray(offers))
      throw this.drift.badResponse(
        `POST ${path}`,
        res.json,
        `vast POST ${path}: no offers array in the answer`,
        res.status,
      );
    return offers.filter(isObject) as unknown as VastOffer[];
  }

  /** The raw answer: the error table decides what a create's status means. Throws only without an answer. */
  createInstance(askId: string, body: Record<string, unknown>): Promise<HttpResponse> {
    return this.http.request('create', 'PUT', `/api/v0/asks/${askId}/`, { body });
  }

  /** The raw answer: whether a refusal is final is the caller's call. Throws only without an answer. */
  attachKey(instanceId: string, publicKey: string): Promise<HttpResponse> {
    return this.http.request('attach', 'POST', `/api/v0/instances/${instanceId}/ssh/`, {
      body: { ssh_key: publicKey },
    });
  }

  /**
   * One instance, or null once Vast no longer knows it. After a destroy Vast has answered
   * `instances: null`, `instances: []` and other non-objects; all of them mean gone. A list
   * holding the instance asked for is read as that instance. An error naming the instance as
   * gone (`no_such_instance`, `not_found`) is gone too.
   */
  async showInstance(instanceId: string): Promise<VastInstance | null> {
    const path = `/api/v0/instances/${instanceId}/`;
    const res = await this.http.request('get', 'GET', path, { query: { owner: 'me' } });
    if (res.status !== 200 || (isObject(res.json) && res.json.success === false)) {
      if (classifyVastError(res).read === 'gone') return null;
      throw readError(`vast GET ${path}`, res);
    }
    const where = 'GET /api/v0/instances/{id}/';
    if (!isObject(res.json) || !('instances' in res.json))
      throw this.drift.badResponse(where, res.json, `vast GET ${path}: no "instances" in the answer`, 200);
    const inst = res.json.instances;
    if (Array.isArray(inst))
      return inst.find((i): i is VastInstance => isInstance(i) && String(i.id) === instanceId) ?? null;
    if (!isObject(inst)) return null;
    if (!isInstance(inst))
      throw this.drift.badResponse(where, res.json, `vast GET ${path}: "instances" is not an instance`, 200);
    return inst;
  }

  /**
   * Every instance matching `filters`, paging with `after_token` until `next_token` is null (the
   * kit's `listAllPages`). Any failed or malformed page throws: an empty array only ever means "none".
   */
  async listInstances(filters?: Record<string, unknown>): Promise<VastInstance[]> {
    const path = '/api/v1/instances/';
    const what = `vast GET ${path}`;
    const list = await listAllPages<VastInstance>({
      what,
      maxPages: MAX_PAGES,
      fetchPage: async (token) => {
        const res = await this.http.request('list', 'GET', path, {
          query: {
            select_filters: filters ? JSON.stringify(filters) : undefined,
            limit: VAST_PAGE_LIMIT,
            after_token: token,
          },
        });
        if (res.status !== 200) throw readError(what, res);
        const body = res.json as { instances?: unknown; next_token?: unknown } | null;
        if (!body || !Array.isArray(body.instances) || !body.instances.every(isInstance)) {
          throw this.drift.badPage(`GET ${path}`, res.json, `${what}: no instances array in the answer`, 200);
        }
        const origin = { drift: this.drift, where: `GET ${path}`, page: res.json };
        return { items: body.instances, next: readCursor(body.next_token, what, origin) };
      },
    });
    return list.items;
  }

  /**
   * True when destroyed now, false when Vast says it was already gone: `no_such_instance` (under
   * 404, or under 200 with `success: false`) or `not_found`. A 200 with `success: false` for any
   * other reason destroyed nothing and throws, so the host asks again.
   */
  async destroyInstance(instanceId: string): Promise<boolean> {
    const path = `/api/v0/instances/${instanceId}/`;
    const res = await this.http.request('destroy', 'DELETE', path);
    const refused = isObject(res.json) && res.json.success === false;
    if (res.status === 200 && !refused) return true;
    if (classifyVastError(res).read === 'gone') return false;
    throw readError(`vast DELETE ${path}`, res);
  }
}
