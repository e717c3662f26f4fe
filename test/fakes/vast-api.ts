import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { FakeMachine, type MachineTraffic } from './fake-machine.js';
import { envOf, portsOf, refuseMachineFields, runOnstart, type OnstartRun } from './vast-machine.js';
import { resolveQuirks, VariantCycle, type FakeBehaviour } from './recorded.js';
import { afterSimulatedLatency } from './simulated-latency.js';
import { FAKE_VAST_OFFERS, type FakeVastOffer } from './vast-fixtures.js';
import {
  afterDestroyBody,
  bandwidthFields,
  destroyedView,
  goneInstanceReply,
  REPRICED_OFFER,
  repricedDph,
  startFailureSteps,
  takenAskBody,
  TRAFFIC_BILLED_OFFERS,
  VAST_QUIRKS,
  vastRecorded,
  type VastQuirks,
  type VastStartFailure,
} from './vast-recorded.js';

export { FAKE_VAST_OFFERS, type FakeVastOffer };
export type { FakeBehaviour } from './recorded.js';
export {
  BANDWIDTH_BILLED_OFFER,
  recordedVastOffer,
  REPRICED_OFFER,
  SUB_CENT_TRAFFIC_OFFER,
  TRAFFIC_BILLED_OFFERS,
  type VastQuirks,
  type VastStartFailure,
} from './vast-recorded.js';

export interface FakeVastInstance {
  id: number;
  label: string | null;
  actual_status: string | null;
  cur_state: string;
  intended_status: string;
  next_state: string;
  image_uuid: string;
  image_runtype: string;
  public_ipaddr: string;
  ports: Record<string, { HostIp: string; HostPort: string }[]> | null;
  ssh_host: string;
  ssh_port: number;
  gpu_name: string;
  num_gpus: number;
  gpu_ram: number;
  disk_space: number;
  dph_total: number;
  /** USD per hour of the disk, part of `dph_total` (only when the offer states `storage_cost`). */
  storage_total_cost?: number;
  /** USD per GB the instance's traffic bills, up / down: its ask's (0 when it states none), or what `repriceTraffic` set. */
  inet_up_cost: number;
  inet_down_cost: number;
  /**
   * KiB the machine has sent / received, as Vast bills them (SOURCES.md, "Traffic counters"), to a
   * tenth as recorded: what its SSH port moved plus `moveTraffic`. Filled in each answer, not kept.
   */
  inet_up_billed?: number;
  inet_down_billed?: number;
  geolocation: string | null;
  start_date: number;
  /** The create's env as Vast keeps it: `[name, value]` pairs, ports as `["-p 8000:8000", "1"]`. */
  extra_env: [string, string][];
  onstart: string | null;
  /** Set when a start fails (recorded forms only). */
  status_msg?: string | null;
}

/** The call a fake endpoint serves, for `failNext`. */
export type VastEndpoint = 'create' | 'get' | 'list' | 'destroy' | 'offers' | 'attach' | 'user';
export type VastFailure = '5xx' | 'hang' | '429' | 'drop';

interface FakeRecord {
  inst: FakeVastInstance;
  machine: FakeMachine;
  /** The private half of the machine's first key: the host's own way in, never given out. */
  hostKey: string;
  timer?: NodeJS.Timeout;
  keys: string[];
  createBody: Record<string, unknown>;
  /** Each container start's `onstart`, finished or not. */
  onstartRuns: Promise<OnstartRun | Error>[];
  /** Traffic added by `moveTraffic`, on top of what the machine's SSH port moved. */
  extraTraffic: MachineTraffic;
}

/** Bytes as Vast's billed counters state them: KiB, cut to the tenth the recorded instance shows. */
const billedKib = (bytes: number): number => Math.floor((bytes / 1024) * 10) / 10;

export interface FakeVastOptions {
  /** The one API key accepted (random by default). */
  apiKey?: string;
  /** Replaces the offer fixture. */
  offers?: FakeVastOffer[];
  /** How long new instances stay `loading` (default 100 ms). */
  bootMs?: number;
  /** `documented` (default) or `recorded`: see {@link VastQuirks} for what `recorded` changes. */
  behaviour?: FakeBehaviour;
  /** Single quirks on or off over what `behaviour` implies. */
  quirks?: Partial<VastQuirks>;
}

export interface FakeVastCall {
  method: string;
  path: string;
  query: Record<string, string>;
  body: unknown;
  /** 0 when the fake hung or dropped the connection. */
  status: number;
}

type Reply = { status: number; body: unknown; text?: string; contentType?: string };

const json = (status: number, body: unknown): Reply => ({ status, body });
const vastError = (status: number, error: string, msg: string, extra: Record<string, unknown> = {}): Reply =>
  json(status, { success: false, error, msg, ...extra });
const tooFrequent = (threshold: number): Reply => ({
  status: 429,
  body: null,
  text: `API requests too frequent endpoint threshold=${threshold}`,
  contentType: 'text/plain',
});
const THRESHOLDS: Record<VastEndpoint, number> = {
  create: 4.5,
  get: 2,
  list: 1,
  destroy: 3,
  offers: 6,
  attach: 2,
  user: 1,
};
const FILTERABLE = new Set([
  'id',
  'label',
  'actual_status',
  'gpu_name',
  'verification',
  'cur_state',
  'intended_status',
  'image_uuid',
]);

/**
 * Docker's port map of a running instance: 22 is where its machine's SSH server listens, 8080 is
 * opened by Vast's images themselves, and each port the create asked for gets a host port of its
 * own, which answers on the instance's public address (this host's loopback) from the machine's port.
 */
function runningPorts(rec: {
  machine: FakeMachine;
  inst: Pick<FakeVastInstance, 'extra_env'>;
}): FakeVastInstance['ports'] {
  const map = (port: number) => [{ HostIp: '0.0.0.0', HostPort: String(port) }];
  const out: NonNullable<FakeVastInstance['ports']> = {
    '22/tcp': map(rec.machine.port),
    '8080/tcp': map(rec.machine.port + 1),
  };
  for (const p of portsOf(Object.fromEntries(rec.inst.extra_env))) {
    const host = rec.machine.hostPorts[p];
    if (host !== undefined) out[`${p}/tcp`] = map(host);
  }
  return out;
}

/** Vast's search and list filter operators over one value. */
function matches(value: unknown, cond: unknown): boolean {
  if (typeof cond !== 'object' || cond === null || Array.isArray(cond)) return value === cond;
  return Object.entries(cond as Record<string, unknown>).every(([op, want]) => {
    const v = value as number;
    switch (op) {
      case 'eq':
        return value === want;
      case 'neq':
        return value !== want;
      case 'gt':
        return v > (want as number);
      case 'gte':
        return v >= (want as number);
      case 'lt':
        return v < (want as number);
      case 'lte':
        return v <= (want as number);
      case 'in':
        return Array.isArray(want) && want.includes(value);
      case 'notin':
        return Array.isArray(want) && !want.includes(value);
      default:
        throw new Error(`unknown operator ${op}`);
    }
  });
}

/**
 * A local stand-in for the Vast.ai endpoints the plugin uses, as documented in Vast's OpenAPI
 * files (paths with trailing slashes, Bearer auth, `{success,error,msg}` bodies) and as observed
 * (a wrong key answers 404 `auth_error`; 429 is plain text without Retry-After; the v0 instance
 * list answers 410). Every instance is a real SSH server on 127.0.0.1 (user root) that lets in
 * only keys attached with `POST /api/v0/instances/{id}/ssh/`. With `behaviour: 'recorded'` (or
 * single `quirks`) it answers as the live API was recorded instead: see {@link VastQuirks}, and
 * `breakStarts` / `reprice` for instances that never start or cost more than their offer. A
 * create's machine fields (`env`, `onstart`, `disk`) are checked against the create document's
 * limits, kept on the instance (`extra_env`, `onstart`), and `onstart` runs in the machine as it
 * starts (see `vast-machine.ts`); `onstartRuns` and `createBodyOf` show what the fake received.
 * Each TCP port the create asked for answers on the instance's `public_ipaddr` (127.0.0.1) at the
 * host port its `ports` map names, from the machine's own port.
 */
export class FakeVastApi {
  readonly calls: FakeVastCall[] = [];
  offers: FakeVastOffer[] = FAKE_VAST_OFFERS.map((o) => ({ ...o }));
  private readonly records = new Map<number, FakeRecord>();
  private readonly ghosts: FakeMachine[] = [];
  private readonly sockets = new Set<Socket>();
  private readonly failures: { endpoint: VastEndpoint; reply: VastFailure | Reply }[] = [];
  private readonly noCapacityFor = new Set<string>();
  private readonly lastCall = new Map<VastEndpoint, number>();
  private intervalsMs: Partial<Record<VastEndpoint, number>> = {};
  private nextId = 31_000_001;
  private pricedStorageGb = 8;
  private bootMs = 100;
  private limitAll = false;
  private credit = 25;
  private hangAfterCreate = false;
  private closed = false;
  /** Instances destroyed through the API, as they were: what show-instance answers for them in recorded forms. */
  private readonly destroyed = new Map<number, FakeVastInstance>();
  private readonly startFailures = new Map<string, VastStartFailure>();
  private readonly repricing = new Map<string, number>();
  private readonly trafficRepricing = new Map<string, { up: number; down: number }>();
  private readonly cycles = {
    takenAsk: new VariantCycle<'msg' | 'error-field'>(['msg', 'error-field']),
    goneInstance: new VariantCycle<'404' | '200'>(['404', '200']),
    afterDestroy: new VariantCycle<'null' | 'empty-array' | 'destroyed'>(['null', 'empty-array', 'destroyed']),
  };
  /** The recorded deviations in force; change one with `setQuirk`. */
  readonly quirks: VastQuirks;
  url = '';

  private constructor(
    private readonly server: Server,
    readonly apiKey: string,
    opts: FakeVastOptions,
  ) {
    this.quirks = resolveQuirks<VastQuirks>(VAST_QUIRKS, opts.behaviour, opts.quirks);
  }

  static async start(opts: FakeVastOptions = {}): Promise<FakeVastApi> {
    // A missing or malformed fixture fails here rather than in the middle of a test.
    vastRecorded();
    const server = createServer();
    const fake = new FakeVastApi(server, opts.apiKey ?? `vast-${randomBytes(16).toString('hex')}`, opts);
    if (fake.quirks.bandwidthCost) fake.offers.push(...TRAFFIC_BILLED_OFFERS.map((o) => ({ ...o })));
    if (fake.quirks.repriced) {
      fake.offers.push({ ...REPRICED_OFFER });
      fake.repricing.set(String(REPRICED_OFFER.id), repricedDph(REPRICED_OFFER.dph_total));
    }
    if (opts.offers) fake.offers = structuredClone(opts.offers);
    if (opts.bootMs !== undefined) fake.bootMs = opts.bootMs;
    server.on('request', (req, res) => void fake.handle(req, res));
    server.on('connection', (s) => {
      fake.sockets.add(s);
      s.on('close', () => fake.sockets.delete(s));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return fake;
  }

  /** Instances the API knows (forgotten ones are not listed). */
  instances(): { id: string; label: string | null; status: string | null; sshPort: number; keys: number }[] {
    return [...this.records.values()].map((r) => ({
      id: String(r.inst.id),
      label: r.inst.label,
      status: r.inst.actual_status,
      sshPort: r.machine.port,
      keys: r.keys.length,
    }));
  }

  /** New instances stay `loading` this long before `running`. */
  setBootMs(ms: number): void {
    this.bootMs = ms;
  }

  /** Starts of instances created while {@link holdStarts} holds them, run by {@link releaseStarts}. */
  private heldStarts: (() => void)[] | null = null;

  /** New instances stay `loading` until {@link releaseStarts}: their boot (or failing start) begins only then, however slow the test is. */
  holdStarts(): void {
    this.heldStarts ??= [];
  }

  /** Begins every start held since {@link holdStarts}, and lets new ones begin at once. */
  releaseStarts(): void {
    const held = this.heldStarts ?? [];
    this.heldStarts = null;
    for (const start of held) start();
  }

  private whenStarted(start: () => void): void {
    if (this.heldStarts) this.heldStarts.push(start);
    else start();
  }

  /** Creates of this ask id (or any ask of this GPU name) answer Vast's 410 `no_such_ask`. */
  noCapacity(askIdOrGpuName: string, on = true): void {
    if (on) this.noCapacityFor.add(askIdOrGpuName);
    else this.noCapacityFor.delete(askIdOrGpuName);
  }

  /** Turns one recorded deviation on, off, or to one of its forms while the fake runs. */
  setQuirk<K extends keyof VastQuirks & string>(name: K, setting: VastQuirks[K]): void {
    this.quirks[name] = setting;
  }

  /**
   * Instances created from this ask id, GPU name or image never start, the way Vast reports it
   * (see {@link VastStartFailure}); `null` lets them start again.
   */
  breakStarts(askIdGpuNameOrImage: string, kind: VastStartFailure | null): void {
    if (kind) this.startFailures.set(askIdGpuNameOrImage, kind);
    else this.startFailures.delete(askIdGpuNameOrImage);
  }

  /** Instances created from this ask id or GPU name report this `dph_total` instead of the offer's; `null` undoes it. */
  reprice(askIdOrGpuName: string, dphTotal: number | null): void {
    if (dphTotal === null) this.repricing.delete(askIdOrGpuName);
    else this.repricing.set(askIdOrGpuName, dphTotal);
  }

  /**
   * Instances created from this ask id or GPU name bill these per-GB traffic prices (USD, up and
   * down) instead of the ask's; `null` undoes it.
   */
  repriceTraffic(askIdOrGpuName: string, prices: { up: number; down: number } | null): void {
    if (prices === null) this.trafficRepricing.delete(askIdOrGpuName);
    else this.trafficRepricing.set(askIdOrGpuName, prices);
  }

  /**
   * Counts traffic the machine moved other than over SSH (an image pull, a data set from the
   * internet) into its billed counters: `sentBytes` more up, `receivedBytes` more down.
   */
  moveTraffic(instanceId: string, bytes: Partial<MachineTraffic>): void {
    const r = this.records.get(Number(instanceId));
    if (!r) throw new Error(`no instance ${instanceId}`);
    r.extraTraffic.sentBytes += bytes.sentBytes ?? 0;
    r.extraTraffic.receivedBytes += bytes.receivedBytes ?? 0;
  }

  /** The bytes an instance has moved as its billed counters count them (SSH and `moveTraffic`). */
  trafficOf(instanceId: string): MachineTraffic {
    const r = this.records.get(Number(instanceId));
    if (!r) throw new Error(`no instance ${instanceId}`);
    const ssh = r.machine.traffic();
    return {
      sentBytes: ssh.sentBytes + r.extraTraffic.sentBytes,
      receivedBytes: ssh.receivedBytes + r.extraTraffic.receivedBytes,
    };
  }

  /** Sets an instance's `actual_status` as its host would report it (e.g. `exited`, `offline`). */
  setStatus(instanceId: string, actualStatus: string | null): void {
    const r = this.records.get(Number(instanceId));
    if (!r) throw new Error(`no instance ${instanceId}`);
    clearTimeout(r.timer);
    r.inst.actual_status = actualStatus;
    r.inst.cur_state = actualStatus === 'running' ? 'running' : 'stopped';
    r.inst.ports = actualStatus === 'running' ? runningPorts(r) : null;
  }

  rateLimitAll(on: boolean): void {
    this.limitAll = on;
  }

  /** The account's credit in USD, as the current user's answer states it (default 25). */
  setCredit(usd: number): void {
    this.credit = usd;
  }

  /**
   * The next call to `endpoint` fails this way (queued, one per call). Endpoints are Vast's:
   * `get` is `GET /api/v0/instances/{id}/`, `list` is `GET /api/v1/instances/` (which serves the
   * plugin's polls), `attach` is the key attachment.
   */
  failNext(endpoint: VastEndpoint, kind: VastFailure): void {
    this.failures.push({ endpoint, reply: kind });
  }

  /** The next call to `endpoint` gets exactly this answer (for the error table's documented bodies). */
  respondNext(endpoint: VastEndpoint, status: number, body: unknown, contentType = 'application/json'): void {
    this.failures.push({
      endpoint,
      reply: {
        status,
        body: contentType.includes('json') ? body : null,
        text: contentType.includes('json') ? undefined : String(body),
        contentType,
      },
    });
  }

  /** Creates make the instance, then never answer. */
  hangCreatesAfterCreating(on: boolean): void {
    this.hangAfterCreate = on;
  }

  /** Enforces Vast's per-endpoint minimum intervals (scaled for tests): too soon is a 429. */
  enforceIntervals(ms: Partial<Record<VastEndpoint, number>>): void {
    this.intervalsMs = ms;
  }

  /** The API loses the instance while its machine keeps serving SSH (a ghost). */
  forget(instanceId: string): void {
    const r = this.records.get(Number(instanceId));
    if (!r) throw new Error(`no instance ${instanceId}`);
    clearTimeout(r.timer);
    this.records.delete(r.inst.id);
    this.ghosts.push(r.machine);
  }

  /** The body of the create that made an instance. */
  createBodyOf(instanceId: string): Record<string, unknown> | undefined {
    return this.records.get(Number(instanceId))?.createBody;
  }

  /** How each container start's `onstart` ended (a thrown Error when the fake could not run it); waits for runs still going. */
  async onstartRuns(instanceId: string): Promise<(OnstartRun | Error)[]> {
    const r = this.records.get(Number(instanceId));
    if (!r) throw new Error(`no instance ${instanceId}`);
    return Promise.all(r.onstartRuns);
  }

  /** Restarts a running instance's container, as a host reboot does: Vast runs its `onstart` again. */
  restartContainer(instanceId: string): void {
    const r = this.records.get(Number(instanceId));
    if (!r || r.inst.actual_status !== 'running') throw new Error(`instance ${instanceId} is not running`);
    this.startOnstart(r);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
    for (const r of this.records.values()) clearTimeout(r.timer);
    await Promise.all([
      ...[...this.records.values()].map((r) => r.machine.close()),
      ...this.ghosts.map((m) => m.close()),
    ]);
    this.records.clear();
  }

  private send(res: ServerResponse, call: FakeVastCall, reply: Reply): void {
    call.status = reply.status;
    const text = reply.text ?? JSON.stringify(reply.body);
    res.writeHead(reply.status, { 'Content-Type': reply.contentType ?? 'application/json' });
    res.end(text);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const call: FakeVastCall = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      body: null,
      status: 0,
    };
    this.calls.push(call);
    let body: unknown = null;
    if (raw) {
      try {
        body = JSON.parse(raw);
      } catch {
        return this.send(res, call, vastError(400, 'invalid_request', 'Invalid json body'));
      }
    }
    call.body = body;
    const route = this.route(call.method, url.pathname);
    if (this.limitAll) return this.send(res, call, tooFrequent(route ? THRESHOLDS[route.endpoint] : 1));
    const auth = req.headers.authorization;
    if (auth !== `Bearer ${this.apiKey}` && url.searchParams.get('api_key') !== this.apiKey) {
      return this.send(res, call, vastError(404, 'auth_error', 'Invalid user key'));
    }
    if (!route) {
      if (call.method === 'GET' && url.pathname === '/api/v0/instances/') {
        return this.send(
          res,
          call,
          vastError(410, 'deprecated_endpoint', 'This endpoint is deprecated. Use GET /api/v1/instances/ instead.'),
        );
      }
      return this.send(res, call, json(404, { detail: 'Not Found' }));
    }
    const min = this.intervalsMs[route.endpoint];
    const last = this.lastCall.get(route.endpoint);
    const now = Date.now();
    this.lastCall.set(route.endpoint, now);
    if (min !== undefined && last !== undefined && now - last < min)
      return this.send(res, call, tooFrequent(THRESHOLDS[route.endpoint]));
    const i = this.failures.findIndex((f) => f.endpoint === route.endpoint);
    if (i >= 0) {
      const [f] = this.failures.splice(i, 1);
      if (f.reply === 'hang') return;
      if (f.reply === 'drop') return void req.socket.destroy();
      if (f.reply === '429') return this.send(res, call, tooFrequent(THRESHOLDS[route.endpoint]));
      if (f.reply === '5xx')
        return this.send(res, call, {
          status: 502,
          body: null,
          text: '<html><body><h1>502 Bad Gateway</h1></body></html>',
          contentType: 'text/html',
        });
      return this.send(res, call, f.reply);
    }
    const reply = await route.serve(body, url.searchParams);
    if (reply === 'hang' || this.closed) return;
    this.send(res, call, reply);
  }

  private route(
    method: string,
    path: string,
  ): { endpoint: VastEndpoint; serve: (body: unknown, q: URLSearchParams) => Promise<Reply | 'hang'> | Reply } | null {
    let m: RegExpMatchArray | null;
    if (method === 'POST' && path === '/api/v0/bundles/') return { endpoint: 'offers', serve: (b) => this.search(b) };
    if (method === 'GET' && path === '/api/v0/users/current/') return { endpoint: 'user', serve: () => this.user() };
    if (method === 'GET' && path === '/api/v1/instances/') return { endpoint: 'list', serve: (_b, q) => this.list(q) };
    if (method === 'PUT' && (m = path.match(/^\/api\/v0\/asks\/(\d+)\/$/)))
      return { endpoint: 'create', serve: (b) => this.create(Number(m![1]), b) };
    if (method === 'POST' && (m = path.match(/^\/api\/v0\/instances\/(\d+)\/ssh\/$/)))
      return { endpoint: 'attach', serve: (b) => this.attach(Number(m![1]), b) };
    if (method === 'GET' && (m = path.match(/^\/api\/v0\/instances\/(\d+)\/$/)))
      return { endpoint: 'get', serve: () => this.show(Number(m![1])) };
    if (method === 'DELETE' && (m = path.match(/^\/api\/v0\/instances\/(\d+)\/$/)))
      return { endpoint: 'destroy', serve: () => this.destroy(Number(m![1])) };
    return null;
  }

  /**
   * The current user, as Vast's show-user document and CLI read it (vast-cli `show__user`, see
   * SOURCES.md): `credit` is the account's prepaid credit in USD. The answer carries the API key
   * itself (the CLI drops `api_key` before it prints), so a client quoting it would leak it.
   */
  private user(): Reply {
    return json(200, {
      id: 4_200_001,
      username: 'fake-operator',
      email: 'operator@example.test',
      fullname: 'Fake Operator',
      credit: this.credit,
      balance: 0,
      balance_threshold: 0,
      balance_threshold_enabled: false,
      billed_expected: 0,
      billed_verified: 0,
      can_pay: true,
      has_billing: true,
      ssh_key: null,
      sid: 'fake-sid',
      api_key: this.apiKey,
    });
  }

  private search(body: unknown): Reply {
    if (typeof body !== 'object' || body === null) return vastError(400, 'invalid_request', 'Invalid json body');
    const { limit, type, order, allocated_storage: storage, ...filters } = body as Record<string, unknown>;
    // Prices answered are for this much disk; instances with more pay for the rest (`storagePrice`).
    this.pricedStorageGb = typeof storage === 'number' ? storage : 8;
    if (type !== undefined && !['ondemand', 'on-demand', 'bid', 'reserved'].includes(type as string))
      return vastError(400, 'invalid_request', `invalid type ${String(type)}`);
    const defaults = { verified: { eq: true }, rentable: { eq: true }, rented: { eq: false } };
    // Raw offers carry `verification` only; Vast's `verified` search key reads it.
    const field = (o: FakeVastOffer, k: string) =>
      k === 'verified' && o.verified === undefined
        ? o.verification === 'verified'
        : (o as unknown as Record<string, unknown>)[k];
    let out: FakeVastOffer[];
    try {
      out = this.offers.filter((o) =>
        Object.entries({ ...defaults, ...filters }).every(([k, c]) => matches(field(o, k), c)),
      );
      // Live offers price bandwidth apart from dph_total (search-offers-raw-rtx4090.json).
      if (this.quirks.bandwidthCost) out = out.map((o) => ({ ...bandwidthFields(), ...o }));
    } catch (err) {
      return vastError(400, 'invalid_request', (err as Error).message);
    }
    for (const [col, dir] of (Array.isArray(order) ? order : []) as [keyof FakeVastOffer, string][]) {
      out.sort((a, b) => ((a[col] as number) - (b[col] as number)) * (dir === 'desc' ? -1 : 1));
    }
    return json(200, { offers: out.slice(0, typeof limit === 'number' ? limit : 64) });
  }

  private async create(askId: number, body: unknown): Promise<Reply | 'hang'> {
    const b = (body ?? {}) as Record<string, unknown>;
    const ask = this.offers.find((o) => o.id === askId && o.rentable);
    if (!ask)
      return this.takenAsk(
        askId,
        vastError(404, 'invalid_args', `error 404/3603: no_such_ask Instance type by id ${askId} is not available.`, {
          ask_id: askId,
        }),
      );
    if (typeof b.image !== 'string' || !b.image || b.image.length > 1024)
      return vastError(400, 'invalid_args', "error 400/3467: Invalid args: 'image' is required", { ask_id: askId });
    if (b.label !== undefined && (typeof b.label !== 'string' || b.label.length > 256))
      return vastError(400, 'invalid_args', 'error 400/3467: Invalid args: label too long', { ask_id: askId });
    const refused = refuseMachineFields(askId, b, ask.disk_space);
    if (refused) return json(refused.status, refused.body);
    const full = this.noCapacityFor.has(String(askId)) || this.noCapacityFor.has(ask.gpu_name);
    // The documented default is true for on-demand; only an explicit false leaves a stopped instance.
    if (full && b.cancel_unavail !== false)
      return this.takenAsk(
        askId,
        vastError(410, 'no_such_ask', `error 410/3907: no_such_ask Instance type ${askId} is no longer available.`, {
          ask_id: askId,
        }),
      );
    const id = this.nextId++;
    const disk = typeof b.disk === 'number' ? b.disk : 10;
    const traffic = this.trafficRepricing.get(String(askId)) ??
      this.trafficRepricing.get(ask.gpu_name) ?? { up: ask.inet_up_cost ?? 0, down: ask.inet_down_cost ?? 0 };
    const storage = this.storagePrice(ask, disk);
    // Vast installs no key of ours at create: the machine's first key is one whose private half only
    // the fake keeps (Vast's own way in, to run `onstart`), so nobody gets in until a key is attached.
    const throwaway = generateDeploymentKeyPair('vast-fake-nobody');
    const machine = await FakeMachine.start({
      user: 'root',
      gpuName: ask.gpu_name,
      gpuCount: ask.num_gpus,
      vramGb: Math.round(ask.gpu_ram / 1024),
      publicKey: throwaway.publicKey,
      ports: portsOf(envOf(b)),
    });
    if (this.closed) {
      await machine.close();
      return 'hang';
    }
    const inst: FakeVastInstance = {
      id,
      label: typeof b.label === 'string' ? b.label : null,
      actual_status: full ? 'stopped' : null,
      cur_state: full ? 'stopped' : 'running',
      intended_status: full ? 'stopped' : 'running',
      next_state: full ? 'stopped' : 'running',
      image_uuid: b.image,
      image_runtype: String(b.runtype ?? 'ssh'),
      public_ipaddr: '127.0.0.1',
      ports: null,
      ssh_host: 'ssh4.vast.ai',
      ssh_port: 10_000 + (id % 50_000),
      gpu_name: ask.gpu_name,
      num_gpus: ask.num_gpus,
      gpu_ram: ask.gpu_ram,
      disk_space: disk,
      dph_total:
        (this.repricing.get(String(askId)) ?? this.repricing.get(ask.gpu_name) ?? ask.dph_total) + storage.extra,
      ...(storage.total === undefined ? {} : { storage_total_cost: storage.total }),
      inet_up_cost: traffic.up,
      inet_down_cost: traffic.down,
      geolocation: ask.geolocation,
      start_date: Date.now() / 1000,
      extra_env: Object.entries(envOf(b)),
      onstart: typeof b.onstart === 'string' ? b.onstart : null,
    };
    const rec: FakeRecord = {
      inst,
      machine,
      hostKey: throwaway.privateKey,
      keys: [],
      createBody: b,
      onstartRuns: [],
      extraTraffic: { sentBytes: 0, receivedBytes: 0 },
    };
    this.records.set(id, rec);
    const failure =
      this.startFailures.get(String(askId)) ?? this.startFailures.get(ask.gpu_name) ?? this.startFailures.get(b.image);
    if (!full && failure) {
      inst.actual_status = 'loading';
      const steps = startFailureSteps(failure, b.image);
      this.whenStarted(() => this.failStart(rec, steps));
    } else if (!full) {
      if (this.bootMs > 0 || this.heldStarts) inst.actual_status = 'loading';
      const boot = () => {
        inst.actual_status = 'running';
        inst.ports = runningPorts(rec);
        this.startOnstart(rec);
      };
      this.whenStarted(() => {
        if (this.bootMs > 0) rec.timer = afterSimulatedLatency(this.bootMs, boot);
        else boot();
      });
    }
    if (this.hangAfterCreate) return 'hang';
    return json(200, { success: true, new_contract: id });
  }

  /**
   * What the disk adds to an instance's price: search prices include `allocated_storage` GB (8 when
   * not asked), so a larger disk costs its extra GB at the ask's `storage_cost` (USD per GB and
   * month of 720 hours, as the recorded offer's `diskHour` shows). Only asks stating `storage_cost`.
   */
  private storagePrice(ask: FakeVastOffer, disk: number): { extra: number; total?: number } {
    if (ask.storage_cost === undefined) return { extra: 0 };
    const perGbHour = ask.storage_cost / 720;
    return { extra: (disk - this.pricedStorageGb) * perGbHour, total: disk * perGbHour };
  }

  /** Runs the instance's `onstart`, if it has one, as its container starts. */
  private startOnstart(rec: FakeRecord): void {
    const onstart = rec.inst.onstart;
    if (!onstart) return;
    const env = Object.fromEntries(rec.inst.extra_env);
    rec.onstartRuns.push(
      // Vast's own agent, inside the container: none of its bytes are the instance's traffic.
      runOnstart({ host: rec.machine.host, port: rec.machine.controlPort }, rec.hostKey, env, onstart).catch(
        (err: Error) => err,
      ),
    );
  }

  private attach(id: number, body: unknown): Reply {
    const key = (body as { ssh_key?: unknown } | null)?.ssh_key;
    if (typeof key !== 'string' || !/^(ssh-(ed25519|rsa)|ecdsa-sha2-nistp\d+) [A-Za-z0-9+/=]+/.test(key.trim())) {
      return vastError(400, 'invalid_args', 'error 400/1782: Invalid args: ssh_key is not a public key');
    }
    const rec = this.records.get(id);
    if (!rec) return vastError(404, 'not_found', 'Instance not found');
    if (!rec.keys.includes(key.trim())) {
      rec.keys.push(key.trim());
      rec.machine.authorize(key.trim());
    }
    return json(200, { success: true, msg: 'SSH key attached successfully' });
  }

  private list(q: URLSearchParams): Reply {
    let filters: Record<string, unknown> = {};
    try {
      filters = JSON.parse(q.get('select_filters') ?? '{}');
    } catch {
      return vastError(400, 'invalid_request', 'Error in query parameters: select_filters is not JSON');
    }
    for (const col of Object.keys(filters)) {
      if (!FILTERABLE.has(col))
        return vastError(400, 'invalid_request', `Error in query parameters: ${col} is not a valid search key`);
    }
    const rawLimit = Number(q.get('limit') ?? 25);
    const small = this.quirks.smallPages;
    const cap = small === false ? 25 : small === true ? 2 : small;
    const limit = rawLimit <= 0 || !Number.isFinite(rawLimit) ? Math.min(5, cap) : Math.min(cap, Math.floor(rawLimit));
    let after = 0;
    const token = q.get('after_token');
    if (token) {
      try {
        after = JSON.parse(Buffer.from(token, 'base64').toString('utf8')).values.id;
        if (!Number.isSafeInteger(after)) throw new Error('bad');
      } catch {
        return vastError(400, 'invalid_token', 'Invalid after_token');
      }
    }
    let all: FakeVastInstance[];
    try {
      all = [...this.records.values()]
        .map((r) => this.view(r))
        .filter((i) =>
          Object.entries(filters).every(([k, c]) => matches((i as unknown as Record<string, unknown>)[k], c)),
        );
    } catch (err) {
      return vastError(400, 'invalid_request', (err as Error).message);
    }
    all.sort((a, b) => a.id - b.id);
    const page = all.filter((i) => i.id > after).slice(0, limit);
    const more = page.length > 0 && all.some((i) => i.id > page[page.length - 1].id);
    const labelCounts: Record<string, number> = {};
    for (const i of all) labelCounts[i.label ?? ''] = (labelCounts[i.label ?? ''] ?? 0) + 1;
    return json(200, {
      success: true,
      instances_found: page.length,
      total_instances: all.length,
      label_counts: labelCounts,
      next_token: more
        ? Buffer.from(JSON.stringify({ values: { id: page[page.length - 1].id } })).toString('base64')
        : null,
      instances: page,
    });
  }

  private async destroy(id: number): Promise<Reply> {
    const rec = this.records.get(id);
    if (!rec) {
      // Recorded: "already gone" is `no_such_instance`, under 404 or under 200 (destroy-*-no-such-instance.json).
      if (this.quirks.goneInstance) {
        const gone = goneInstanceReply(this.cycles.goneInstance.next(this.quirks.goneInstance), id);
        return json(gone.status, gone.body);
      }
      return vastError(404, 'not_found', 'Instance not found');
    }
    clearTimeout(rec.timer);
    // As it was at the end, its last counters included.
    this.destroyed.set(id, this.view(rec));
    this.records.delete(id);
    await rec.machine.close();
    return json(200, { success: true, msg: 'Instance destroyed successfully' });
  }

  /** Show-instance: the instance, or `null` once it is gone (documented); recorded forms after a destroy. */
  private show(id: number): Reply {
    const rec = this.records.get(id);
    if (rec) return json(200, { instances: this.view(rec) });
    const was = this.destroyed.get(id);
    if (was && this.quirks.afterDestroy) {
      // show-instance-null-after-destroy.json, show-instance-empty-array-after-destroy.json, show-instance-destroyed.json
      const form = this.cycles.afterDestroy.next(this.quirks.afterDestroy);
      return json(200, form === 'destroyed' ? { instances: destroyedView(was) } : afterDestroyBody(form));
    }
    return json(200, { instances: null });
  }

  /**
   * The instance as an answer shows it: its fields with the billed counters read now. They are in
   * no Vast document, but every recorded instance answer carries them (SOURCES.md).
   */
  private view(rec: FakeRecord): FakeVastInstance {
    const moved = this.trafficOf(String(rec.inst.id));
    return {
      ...rec.inst,
      inet_up_billed: billedKib(moved.sentBytes),
      inet_down_billed: billedKib(moved.receivedBytes),
    };
  }

  /** A taken ask: the documented answer, or the recorded 400 (create-400-no-such-ask*.json). */
  private takenAsk(askId: number, documented: Reply): Reply {
    if (!this.quirks.takenAsk) return documented;
    return json(400, takenAskBody(this.cycles.takenAsk.next(this.quirks.takenAsk), askId));
  }

  /** Walks an instance through the recorded steps of a start that fails, one boot interval each. */
  private failStart(rec: FakeRecord, steps: ReturnType<typeof startFailureSteps>): void {
    const [step, ...rest] = steps;
    if (!step) return;
    rec.timer = afterSimulatedLatency(Math.max(this.bootMs, 1) * (step.afterBoots ?? 1), () => {
      Object.assign(rec.inst, step.fields);
      rec.inst.ports = step.running ? runningPorts(rec) : null;
      this.failStart(rec, rest);
    });
  }
}
