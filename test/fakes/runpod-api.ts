import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { FakeMachine, profileOf } from './fake-machine.js';
import { podBoot } from './runpod-boot.js';
import { isRuntimeUserAgent, resolveQuirks, type FakeBehaviour } from './recorded.js';
import {
  catalogEntry,
  FAKE_RUNPOD_GPUS,
  forwardCompatible,
  hostCuda,
  placeable,
  type FakeRunpodGpu,
} from './runpod-catalog.js';
import {
  cloudflare1010Body,
  compareCuda,
  imageCuda,
  isImageReference,
  RUNPOD_QUIRKS,
  type RunpodQuirks,
} from './runpod-recorded.js';
import { retiredPathAnswer } from './runpod-retired.js';
import { portsRefusal, validateCreatePod } from './runpod-validation.js';
import { afterSimulatedLatency } from './simulated-latency.js';

export { FAKE_RUNPOD_GPUS, type FakeRunpodGpu } from './runpod-catalog.js';
export type { RunpodQuirks } from './runpod-recorded.js';
export type { FakeBehaviour } from './recorded.js';

export type RunpodEndpoint = 'create' | 'get' | 'list' | 'destroy' | 'offers';
export type RunpodFailure = '5xx' | 'hang' | '429' | 'drop';
export type FakePodStatus = 'PROVISIONING' | 'STARTING' | 'RUNNING' | 'EXITED' | 'ERROR' | 'TERMINATED';

/** The `detail` RunPod gives a create it cannot place (the only sign of no capacity). */
export const NO_INSTANCES_DETAIL =
  'There are no longer any instances available with the requested specifications. Please refresh and try again.';

/** A pod as `FakeRunpodApi.instances` shows it to tests. */
export interface FakePodView {
  id: string;
  label: string;
  name: string;
  status: FakePodStatus;
  sshPort: number;
  env: Record<string, string>;
  image: string;
  disk: number;
  ports: string[];
  /** The start command the container runs instead of the image's CMD; '' for the image's own. */
  args: string;
}

/** A problem document to answer once, for error-mapping tests (`answerNext`). */
export interface ScriptedProblem {
  status: number;
  title?: string;
  detail: string;
  errors?: string[];
  headers?: Record<string, string>;
}

export interface FakeRunpodOptions {
  apiKey?: string;
  gpus?: FakeRunpodGpu[];
  /** Creation to RUNNING; PROVISIONING for the first half, STARTING for the second. Default 300 ms. */
  bootMs?: number;
  /** RUNNING without `ssh.direct` for this long before the port mapping appears. Default 150 ms. */
  directSshDelayMs?: number;
  /** Requests per minute before the documented 429. Default 100000 (out of the way). */
  quotaPerMinute?: number;
  /** `Retry-After` seconds on the fake's 429s. Default 1. */
  retryAfterSeconds?: number;
  /** `documented` (default) or `recorded`: see {@link RunpodQuirks} for what `recorded` changes. */
  behaviour?: FakeBehaviour;
  /** Single quirks on or off over what `behaviour` implies. */
  quirks?: Partial<RunpodQuirks>;
  /** The largest container disk (`disk`, GB) any host can give; a create asking more gets the capacity 400. Default 1000. */
  hostDiskGb?: number;
}

interface PodRecord {
  id: string;
  body: Record<string, unknown>;
  gpu: FakeRunpodGpu;
  count: number;
  cloud: 'SECURE' | 'COMMUNITY';
  createdAt: number;
  bootMs: number;
  directSshDelayMs: number;
  forced?: FakePodStatus;
  machine: FakeMachine;
  /** Creation order, for list cursors that survive deletes. */
  seq: number;
  /** The host driver's CUDA version the pod was placed on. */
  hostCuda: string;
  /** The container cannot start on that host: `ssh.direct` never appears. */
  neverStarts: boolean;
}

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  402: 'Payment Required',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  422: 'Unprocessable Entity',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

/**
 * A local stand-in for RunPod's REST v2 pod surface as documented (catalog/gpus, pods create, get,
 * list, delete): bearer auth, RFC 9457 problem documents, RateLimit headers and 429 with
 * Retry-After, 422 for unknown body fields, the observed false "no instances" 400 when
 * `gpu.count` is left out, and RUNNING reported before `ssh.direct`. Each pod is a FakeMachine
 * (user root) admitting only the key in `env.PUBLIC_KEY`. What the container is started with
 * (`image`, `args`, `env`, `ports`, `disk`) is checked as the API checks it and shown by
 * `instances()`. A start command that runs a boot script from a variable is not run here; the
 * machine gets what that boot delivers (see `runpod-boot.ts`): the pod's variables in every SSH
 * session and its startup script run once as the container starts. Exposed HTTP ports are served
 * inside the machine only: RunPod's proxy URLs cannot be reached from a test. Any `/v1/...` path
 * answers 410 Gone as the retired REST v1 does, and `/graphql` is not served (`runpod-retired.ts`). With
 * `behaviour: 'recorded'` (or single `quirks`) it answers as the live API was recorded instead:
 * see {@link RunpodQuirks}.
 */
export class FakeRunpodApi {
  readonly calls: { method: string; path: string; query: string; body?: unknown; userAgent?: string }[] = [];
  readonly apiKey: string;
  url = '';
  gpus: FakeRunpodGpu[];
  private readonly server: Server;
  private readonly pods = new Map<string, PodRecord>();
  /** Machines whose pods the API forgot (`forget`) or deleted: closed with the fake. */
  private readonly orphans: FakeMachine[] = [];
  private readonly failures = new Map<RunpodEndpoint, (RunpodFailure | ScriptedProblem)[]>();
  private readonly blocked = new Set<string>();
  private readonly missingImages = new Set<string>();
  private nextSeq = 1;
  /** The recorded deviations in force; change one with `setQuirk`. */
  readonly quirks: RunpodQuirks;
  private bootMs: number;
  private directSshDelayMs: number;
  private allLimited = false;
  private edgeRefuses?: RegExp;
  private hangCreates = false;
  private retryAfterSeconds: number;
  private readonly window = { start: Date.now(), used: 0, quota: 100_000 };
  private readonly hostDiskGb: number;
  private readonly timers = new Set<NodeJS.Timeout>();

  private constructor(opts: FakeRunpodOptions) {
    this.apiKey = opts.apiKey ?? `rpa_${randomBytes(16).toString('hex').toUpperCase()}`;
    this.gpus = (opts.gpus ?? FAKE_RUNPOD_GPUS).map((g) => ({ ...g }));
    this.bootMs = opts.bootMs ?? 300;
    this.directSshDelayMs = opts.directSshDelayMs ?? 150;
    this.window.quota = opts.quotaPerMinute ?? 100_000;
    this.retryAfterSeconds = opts.retryAfterSeconds ?? 1;
    this.hostDiskGb = opts.hostDiskGb ?? 1000;
    this.quirks = resolveQuirks<RunpodQuirks>(RUNPOD_QUIRKS, opts.behaviour, opts.quirks);
    // A missing fixture fails the start, not a request in the middle of a test.
    cloudflare1010Body();
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: Error) => this.problem(res, 500, `fake failure: ${err.message}`));
    });
  }

  static async start(opts: FakeRunpodOptions = {}): Promise<FakeRunpodApi> {
    const fake = new FakeRunpodApi(opts);
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', resolve));
    fake.url = `http://127.0.0.1:${(fake.server.address() as AddressInfo).port}`;
    return fake;
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    const machines = [...[...this.pods.values()].map((p) => p.machine), ...this.orphans];
    this.pods.clear();
    this.orphans.length = 0;
    await Promise.all(machines.map((m) => m.close()));
  }

  /**
   * Every pod the API knows, with its current status, the port its SSH listens on, and the
   * container settings it was created with (what the pod's image would be started with).
   */
  instances(): FakePodView[] {
    return [...this.pods.values()].map((p) => ({
      id: p.id,
      label: String(p.body.name),
      name: String(p.body.name),
      status: this.statusOf(p).status,
      sshPort: p.machine.port,
      env: (p.body.env ?? {}) as Record<string, string>,
      image: String(p.body.image),
      disk: (p.body.disk as number | undefined) ?? 20,
      ports: (p.body.ports as string[] | undefined) ?? [],
      args: (p.body.args as string | undefined) ?? '',
    }));
  }

  setBootMs(ms: number, directSshDelayMs = this.directSshDelayMs): void {
    this.bootMs = ms;
    this.directSshDelayMs = directSshDelayMs;
  }

  /**
   * Creates for this GPU (id or name) answer the capacity 400 while the catalog still lists it:
   * the race RunPod documents (stock gone between the catalog read and the create). To take a GPU
   * out of the catalog as well, give it `availability: 'NONE'` through `setGpus`.
   */
  noCapacity(gpuIdOrName: string, on = true): void {
    for (const g of this.gpus.filter((x) => x.id === gpuIdOrName || x.name === gpuIdOrName)) {
      if (on) this.blocked.add(g.id);
      else this.blocked.delete(g.id);
    }
  }

  /** Every authenticated request answers 429 with Retry-After while on. */
  rateLimitAll(on: boolean, retryAfterSeconds = this.retryAfterSeconds): void {
    this.allLimited = on;
    this.retryAfterSeconds = retryAfterSeconds;
  }

  /** The next call to `endpoint` fails this way: a 503, no answer, a 429, or a cut connection. */
  failNext(endpoint: RunpodEndpoint, kind: RunpodFailure): void {
    this.queue(endpoint).push(kind);
  }

  /** The next call to `endpoint` gets this problem document (402 balance, 403 pool, ...). */
  answerNext(endpoint: RunpodEndpoint, problem: ScriptedProblem): void {
    this.queue(endpoint).push(problem);
  }

  /** While on, a create makes the pod and then never answers (the ambiguous create). */
  hangCreatesAfterCreating(on: boolean): void {
    this.hangCreates = on;
  }

  /** The API forgets the pod (404, absent from lists) while its machine keeps serving SSH. */
  forget(instanceId: string): void {
    const p = this.pods.get(instanceId);
    if (!p) return;
    this.pods.delete(instanceId);
    this.orphans.push(p.machine);
  }

  /** Forces a pod's status (EXITED, ERROR, TERMINATED, ...); `undefined` returns it to its boot clock. */
  setStatus(instanceId: string, status: FakePodStatus | undefined): void {
    const p = this.pods.get(instanceId);
    if (p) p.forced = status;
  }

  /**
   * The edge also refuses every User-Agent `pattern` matches, ours included, with the recorded 1010
   * page (`userAgentGate` takes only runtimes' defaults): a bot rule that came to take our product's
   * signature. Null lifts it.
   */
  refuseUserAgents(pattern: RegExp | null): void {
    this.edgeRefuses = pattern ?? undefined;
  }

  /** Turns one recorded deviation on, off, or to a setting while the fake runs. */
  setQuirk<K extends keyof RunpodQuirks & string>(name: K, setting: RunpodQuirks[K]): void {
    this.quirks[name] = setting;
  }

  /** The registry has no such image (or tag): with `badImageTag`, creates naming it get the image 400. */
  missingImage(image: string, on = true): void {
    if (on) this.missingImages.add(image);
    else this.missingImages.delete(image);
  }

  /** Replaces the catalog. */
  setGpus(gpus: FakeRunpodGpu[]): void {
    this.gpus = gpus.map((g) => ({ ...g }));
  }

  private queue(endpoint: RunpodEndpoint) {
    let q = this.failures.get(endpoint);
    if (!q) this.failures.set(endpoint, (q = []));
    return q;
  }

  private rateHeaders(res: ServerResponse): number {
    const now = Date.now();
    if (now - this.window.start >= 60_000) Object.assign(this.window, { start: now, used: 0 });
    this.window.used += 1;
    const reset = Math.max(1, Math.ceil((this.window.start + 60_000 - now) / 1000));
    const remaining = Math.max(0, this.window.quota - this.window.used);
    res.setHeader('RateLimit', `"minute";r=${remaining};t=${reset}`);
    res.setHeader('RateLimit-Policy', `"minute";q=${this.window.quota};w=60`);
    return this.window.used > this.window.quota ? reset : 0;
  }

  private problem(
    res: ServerResponse,
    status: number,
    detail: string,
    extra: { errors?: string[]; title?: string; headers?: Record<string, string> } = {},
  ): void {
    if (res.headersSent) return;
    const body: Record<string, unknown> = { title: extra.title ?? TITLES[status] ?? 'Error', status, detail };
    if (extra.errors) body.errors = extra.errors;
    for (const [k, v] of Object.entries(extra.headers ?? {})) res.setHeader(k, v);
    res.writeHead(status, { 'Content-Type': 'application/problem+json' });
    res.end(JSON.stringify(body));
  }

  private json(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(body));
  }

  private tooMany(res: ServerResponse, seconds: number): void {
    this.problem(res, 429, 'rate limit exceeded for the minute window', {
      headers: { 'Retry-After': String(seconds) },
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    const raw = await new Promise<string>((resolve) => {
      let data = '';
      req.on('data', (c: Buffer) => (data += c.toString()));
      req.on('end', () => resolve(data));
    });
    let body: unknown;
    let badJson = false;
    if (raw) {
      try {
        body = JSON.parse(raw);
      } catch {
        badJson = true;
      }
    }
    const method = req.method ?? 'GET';
    this.calls.push({ method, path: url.pathname, query: url.search, body, userAgent: req.headers['user-agent'] });

    const route = this.route(method, url.pathname);
    const agent = req.headers['user-agent'];
    if ((this.quirks.userAgentGate && isRuntimeUserAgent(agent)) || this.edgeRefuses?.test(agent ?? '')) {
      // The edge answers before the API sees the request: no problem document, no RateLimit headers.
      res.writeHead(403, { 'Content-Type': 'text/plain; charset=UTF-8', Server: 'cloudflare' });
      res.end(cloudflare1010Body());
      return;
    }
    const retired = retiredPathAnswer(url.pathname);
    if (retired) return this.problem(res, retired.status, retired.detail, { title: retired.title });
    if (req.headers.authorization !== `Bearer ${this.apiKey}`) {
      this.problem(
        res,
        401,
        req.headers.authorization?.startsWith('Bearer ') ? 'invalid api key' : 'missing bearer token',
      );
      return;
    }
    const exhausted = this.rateHeaders(res);
    if (exhausted) return this.tooMany(res, exhausted);
    if (this.allLimited) return this.tooMany(res, this.retryAfterSeconds);
    if (!route) return this.problem(res, 404, 'resource not found');
    if ('allow' in route) {
      res.setHeader('Allow', route.allow);
      return this.problem(res, 405, 'The requested method is not allowed for this path.');
    }
    const failure = this.failures.get(route.endpoint)?.shift();
    if (failure === 'hang') return; // the socket stays open until the caller gives up or the fake closes
    if (failure === 'drop') {
      req.socket.destroy();
      return;
    }
    if (failure === '429') return this.tooMany(res, this.retryAfterSeconds);
    if (failure === '5xx') return this.problem(res, 503, 'upstream temporarily unavailable');
    if (failure) return this.problem(res, failure.status, failure.detail, failure);
    if (badJson) return this.problem(res, 400, 'request body is not valid JSON');

    switch (route.endpoint) {
      case 'offers':
        return this.catalog(url, res);
      case 'list':
        return this.list(url, res);
      case 'get': {
        const p = this.pods.get(route.id);
        return p ? this.json(res, 200, this.podJson(p)) : this.problem(res, 404, 'pod not found');
      }
      case 'destroy': {
        const p = this.pods.get(route.id);
        if (!p) return this.problem(res, 404, 'pod not found');
        this.pods.delete(route.id);
        await p.machine.close();
        res.writeHead(204).end();
        return;
      }
      case 'create':
        return this.create(body, res);
    }
  }

  private route(method: string, path: string): { endpoint: RunpodEndpoint; id: string } | { allow: string } | null {
    if (path === '/v2/catalog/gpus') return method === 'GET' ? { endpoint: 'offers', id: '' } : { allow: 'GET' };
    if (path === '/v2/pods') {
      if (method === 'GET') return { endpoint: 'list', id: '' };
      if (method === 'POST') return { endpoint: 'create', id: '' };
      return { allow: 'GET, POST' };
    }
    const m = /^\/v2\/pods\/([^/]+)$/.exec(path);
    if (!m) return null;
    const id = decodeURIComponent(m[1]);
    if (method === 'GET') return { endpoint: 'get', id };
    if (method === 'DELETE') return { endpoint: 'destroy', id };
    return { allow: 'GET, PATCH, DELETE' };
  }

  private catalog(url: URL, res: ServerResponse): void {
    const q = url.searchParams;
    const include = q.get('include');
    if (include !== null && include !== 'AVAILABILITY')
      return this.problem(res, 422, `include: unsupported value "${include}"`);
    const withAvailability = include === 'AVAILABILITY';
    const product = q.get('product');
    if (withAvailability && !product) return this.problem(res, 400, 'product is required with include=AVAILABILITY');
    if (!withAvailability && (product || q.has('count') || q.has('cloud')))
      return this.problem(res, 400, 'product, count and cloud are valid only with include=AVAILABILITY');
    if (product && !product.split(',').every((p) => ['POD', 'CLUSTER', 'SERVERLESS'].includes(p)))
      return this.problem(res, 422, `product: unsupported value "${product}"`);
    const cloud = q.get('cloud') ?? 'SECURE';
    if (cloud !== 'SECURE' && cloud !== 'COMMUNITY')
      return this.problem(res, 422, `cloud: unsupported value "${cloud}"`);
    const count = q.get('count') ?? '1';
    if (!/^[1-9]\d*$/.test(count)) return this.problem(res, 422, 'count: must be an integer >= 1');
    this.json(res, 200, { gpus: this.gpus.map((g) => catalogEntry(g, withAvailability, Number(count), cloud)) });
  }

  private async create(body: unknown, res: ServerResponse): Promise<void> {
    const errors = validateCreatePod(body);
    if (errors.length) return this.problem(res, 422, 'Request validation failed.', { errors });
    const b = body as Record<string, unknown> & {
      gpu?: { id: string; count?: number };
      cpu?: unknown;
      env?: Record<string, string>;
      cloud?: 'SECURE' | 'COMMUNITY';
    };
    if (b.templateId !== undefined) return this.problem(res, 404, 'template not found');
    if (!b.gpu === !b.cpu) return this.problem(res, 400, 'exactly one of gpu or cpu must be set');
    const badPorts = portsRefusal(b.ports);
    if (badPorts) return this.problem(res, 400, badPorts);
    // This fake stocks GPUs only.
    if (!b.gpu) return this.problem(res, 400, NO_INSTANCES_DETAIL);
    const gpu = this.gpus.find((g) => g.id === b.gpu!.id);
    if (!gpu) return this.problem(res, 400, `gpu type "${b.gpu.id}" is not a valid GPU type id`);
    // Observed: without gpu.count every create fails with the capacity message, whatever the stock.
    if (b.gpu.count === undefined) return this.problem(res, 400, NO_INSTANCES_DETAIL);
    const cloud = b.cloud ?? 'SECURE';
    const max = gpu.maxCount[cloud === 'SECURE' ? 'secure' : 'community'];
    if (b.gpu.count > max)
      return this.problem(
        res,
        400,
        `gpu.count ${b.gpu.count} exceeds the maximum of ${max} for ${gpu.id} in the ${cloud} cloud`,
      );
    if (this.blocked.has(gpu.id) || !placeable(gpu, b.gpu.count, cloud))
      return this.problem(res, 400, NO_INSTANCES_DETAIL);
    const { allowedCudaVersions: allowed = [], minCudaVersion: min } = b.gpu as {
      allowedCudaVersions?: string[];
      minCudaVersion?: string;
    };
    if (allowed.length > 0 && min !== undefined)
      return this.problem(res, 400, 'gpu.allowedCudaVersions and gpu.minCudaVersion are mutually exclusive');
    // Documented: matching is exact, and a version no host has is a capacity error, not a fallback.
    const hosts = hostCuda(gpu).filter(
      (v) => (allowed.length === 0 || allowed.includes(v)) && (min === undefined || compareCuda(v, min) >= 0),
    );
    if (hosts.length === 0) return this.problem(res, 400, NO_INSTANCES_DETAIL);
    // No host has that much disk for a container: RunPod cannot place the pod, and says so as it does for any shortage.
    if (((b.disk as number | undefined) ?? 20) > this.hostDiskGb) return this.problem(res, 400, NO_INSTANCES_DETAIL);
    const image = typeof b.image === 'string' ? b.image : '';
    if (this.quirks.badImageTag && (this.missingImages.has(image) || !isImageReference(image))) {
      return this.problem(res, 400, `image "${image}" could not be pulled: manifest unknown`, {
        title: 'Invalid Image',
      });
    }
    // The scheduler is free to pick any host that satisfies the request; the oldest is the case that bites.
    const placedOn = hosts[0];
    const needs = imageCuda(image);
    const neverStarts =
      !!this.quirks.cudaMismatch && !forwardCompatible(gpu) && needs !== null && compareCuda(needs, placedOn) > 0;

    // The official images write PUBLIC_KEY (one key a line) into root's authorized_keys.
    const keys = (b.env?.PUBLIC_KEY ?? '')
      .split('\n')
      .map((k) => k.trim())
      .filter(Boolean);
    const boot = podBoot(b.env ?? {}, typeof b.args === 'string' ? b.args : '');
    const machine = await FakeMachine.start({
      user: 'root',
      gpuName: gpu.name,
      gpuCount: b.gpu.count,
      vramGb: gpu.memory,
      publicKey: keys[0] ?? generateDeploymentKeyPair('nobody').publicKey,
      ...(boot ? { profile: profileOf(boot.env) } : {}),
    });
    for (const k of keys.slice(1)) machine.authorize(k);
    const id = randomBytes(7)
      .toString('hex')
      .replace(/[0-9]/g, (d) => 'abcdefghij'[Number(d)])
      .slice(0, 14);
    const rec: PodRecord = {
      id,
      body: b,
      gpu,
      count: b.gpu.count,
      cloud,
      createdAt: Date.now(),
      bootMs: this.bootMs,
      directSshDelayMs: this.directSshDelayMs,
      machine,
      seq: this.nextSeq++,
      hostCuda: placedOn,
      neverStarts,
    };
    this.pods.set(id, rec);
    const script = boot?.startupScript;
    if (script && !neverStarts) {
      // The container starts as the pod turns STARTING; its boot runs the script then.
      const t = afterSimulatedLatency(this.bootMs / 2, () => {
        this.timers.delete(t);
        void machine.startup(script).catch(() => undefined);
      });
      this.timers.add(t);
    }
    if (this.hangCreates) return;
    this.json(res, 201, this.podJson(rec));
  }

  /** `GET /v2/pods`: one page of everything (documented), or cursor pages (`cursorPaging`). */
  private list(url: URL, res: ServerResponse): void {
    const live = [...this.pods.values()]
      .filter((p) => this.statusOf(p).status !== 'TERMINATED')
      .sort((a, b) => a.seq - b.seq);
    const paging = this.quirks.cursorPaging;
    if (!paging) return this.json(res, 200, { pods: live.map((p) => this.podJson(p)) });
    const size = paging === true ? 2 : paging;
    const limitParam = url.searchParams.get('limit');
    if (limitParam !== null && !/^[1-9]\d*$/.test(limitParam))
      return this.problem(res, 422, 'limit: must be an integer >= 1');
    const limit = Math.min(size, limitParam === null ? size : Number(limitParam));
    let after = 0;
    const cursor = url.searchParams.get('cursor');
    if (cursor !== null) {
      // Opaque to clients; here the creation number of the last pod served, so deletes never skip a pod.
      const m = /^c(\d+)$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
      if (!m) return this.problem(res, 400, 'cursor: invalid or expired');
      after = Number(m[1]);
    }
    const rest = live.filter((p) => p.seq > after);
    const page = rest.slice(0, limit);
    const nextCursor =
      rest.length > page.length ? Buffer.from(`c${page[page.length - 1].seq}`).toString('base64url') : null;
    this.json(res, 200, { pods: page.map((p) => this.podJson(p)), pagination: { nextCursor } });
  }

  private statusOf(p: PodRecord): { status: FakePodStatus; direct: boolean } {
    if (p.forced) return { status: p.forced, direct: false };
    const t = Date.now() - p.createdAt;
    if (t < p.bootMs / 2) return { status: 'PROVISIONING', direct: false };
    if (t < p.bootMs) return { status: 'STARTING', direct: false };
    const published = ((p.body.ports ?? []) as string[]).includes('22/tcp');
    return { status: 'RUNNING', direct: published && !p.neverStarts && t >= p.bootMs + p.directSshDelayMs };
  }

  private podJson(p: PodRecord): Record<string, unknown> {
    const { status, direct } = this.statusOf(p);
    const b = p.body;
    const proxyUser = `${p.id}-64411eb2`;
    const billed = status !== 'EXITED' && status !== 'TERMINATED';
    const actions: Record<FakePodStatus, string[]> = {
      PROVISIONING: ['terminate'],
      STARTING: ['stop', 'terminate'],
      RUNNING: ['stop', 'restart', 'terminate'],
      EXITED: ['start', 'terminate'],
      ERROR: ['terminate'],
      TERMINATED: [],
    };
    return {
      id: p.id,
      name: b.name,
      image: b.image,
      args: b.args ?? '',
      disk: b.disk ?? 20,
      ports: b.ports ?? [],
      env: b.env ?? {},
      registry: b.registry ?? null,
      status,
      actions: actions[status],
      mounts: b.mounts ?? {},
      gpu: { id: p.gpu.id, count: p.count },
      cloud: p.cloud,
      // Placed at create: the 201 of a PROVISIONING pod already names its data center and host CUDA
      // (`create-pod-201-v2-document-example-2026-08.json`); the image is fetched while it stays there.
      dataCenterId: p.gpu.dataCenterId,
      cudaVersion: p.hostCuda,
      ...(this.quirks.podWithoutSsh && !direct
        ? {}
        : {
            ssh: {
              // The proxy carries an interactive shell only; the plugin must never hand it out.
              proxy: {
                host: 'ssh.runpod.io',
                port: 22,
                username: proxyUser,
                command: `ssh ${proxyUser}@ssh.runpod.io`,
              },
              direct: direct
                ? {
                    host: '127.0.0.1',
                    port: p.machine.port,
                    username: 'root',
                    command: `ssh root@127.0.0.1 -p ${p.machine.port}`,
                  }
                : null,
            },
          }),
      template: null,
      cost: billed ? Math.round(p.gpu.price[p.cloud === 'SECURE' ? 'secure' : 'community'] * p.count * 100) / 100 : 0,
      locked: false,
      globalNetworking: { enabled: false },
      runtime:
        status === 'RUNNING'
          ? {
              uptime: Math.floor((Date.now() - p.createdAt - p.bootMs) / 1000),
              ports: direct ? [{ private: 22, public: p.machine.port, type: 'tcp', ip: '127.0.0.1' }] : [],
            }
          : this.quirks.podWithoutSsh
            ? {}
            : null,
      createdAt: new Date(p.createdAt).toISOString(),
      startedAt: status === 'RUNNING' ? new Date(p.createdAt + p.bootMs).toISOString() : null,
    };
  }
}
