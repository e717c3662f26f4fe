import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { FakeMachine } from './fake-machine.js';
import { cloudInitBoot } from './lambda-boot.js';
import { afterSimulatedLatency } from './simulated-latency.js';
import { isRuntimeUserAgent, resolveQuirks, type FakeBehaviour } from './recorded.js';
import {
  DEFAULT_LAMBDA_INSTANCE_TYPES,
  type FakeLambdaInstanceTypeItem,
  type FakeLambdaRegion,
} from './lambda-fixtures.js';
import { EDGE_403_HTML, LAMBDA_QUIRKS, lambdaRecorded, type LambdaQuirks } from './lambda-recorded.js';
import {
  type FakeEndpoint,
  authorized,
  endpointOf,
  freePort,
  invalid,
  isReply,
  lambdaError,
  notFound,
  parseLaunch,
  parseNewKey,
  type Reply,
} from './lambda-wire.js';

export type { FakeEndpoint };
export type { LambdaQuirks } from './lambda-recorded.js';
export type { FakeBehaviour } from './recorded.js';
export type FakeFailure = '5xx' | 'hang' | '429' | 'drop';

export type FakeLambdaStatus = 'booting' | 'active' | 'unhealthy' | 'terminating' | 'terminated' | 'preempted';

export interface FakeLambdaOptions {
  /** The only API key accepted (Bearer, or Basic as `key:` base64 or bare). Default random. */
  apiKey?: string;
  /** Replaces the default instance types. */
  instanceTypes?: Record<string, FakeLambdaInstanceTypeItem>;
  /** Time from launch to `active` with SSH up. Default 100 ms. */
  bootMs?: number;
  /** Time from terminate to `terminated` with SSH down. Default 50 ms. */
  terminateMs?: number;
  /**
   * Enforce Lambda's rate limits (documented: one request a second, launches one per 12 s): a call
   * sooner than this after the last accepted one answers 429. Off by default.
   */
  limits?: { apiIntervalMs: number; launchIntervalMs: number };
  /** `documented` (default) or `recorded`: see {@link LambdaQuirks} for what `recorded` changes. */
  behaviour?: FakeBehaviour;
  /** Single quirks on or off over what `behaviour` implies. */
  quirks?: Partial<LambdaQuirks>;
}

interface StoredInstance {
  id: string;
  name: string;
  tags: { key: string; value: string }[];
  status: FakeLambdaStatus;
  sshKeyName: string;
  publicKey: string;
  region: FakeLambdaRegion;
  typeName: string;
  /** Assigned when the machine is up: Lambda reports `ip` once the instance has one. */
  ip?: string;
  /** The launch's cloud-init text: kept for tests, never shown by a read (`user_data` is write-only). */
  userData?: string;
}

interface StoredKey {
  id: string;
  name: string;
  public_key: string;
}

const hexId = () => randomBytes(16).toString('hex');

/**
 * A local Lambda Cloud API (1.8.3): instance types, launch, terminate, instances and SSH keys
 * with Lambda's `{data}` / `{error:{code,message,suggestion}}` envelopes and codes. Each launched
 * instance becomes a {@link FakeMachine} (user `ubuntu`) that admits only the registered key
 * named at launch. Every machine listens on the same port number `sshPort`, each on its own
 * loopback address (its `ip`), as real instances all answer on 22. A launch's `user_data` is
 * not run on this host: the machine gets what it delivers (see `lambda-boot.ts`), its profile in
 * every SSH session and its script run once as the instance becomes active. With `behaviour: 'recorded'`
 * (or single `quirks`) it answers as the live API was recorded instead: see {@link LambdaQuirks}.
 */
export class FakeLambdaApi {
  /** Every request in arrival order, with the status answered (absent while hanging or when dropped). */
  readonly calls: { method: string; path: string; status?: number }[] = [];
  /** The body of every launch the fake answered itself (not an injected failure), in arrival order, as received. */
  readonly launches: Record<string, unknown>[] = [];
  private readonly store = new Map<string, StoredInstance>();
  private readonly keys: StoredKey[] = [];
  private readonly machines = new Map<string, FakeMachine>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly hanging = new Set<Socket>();
  private readonly failures = new Map<FakeEndpoint, Array<FakeFailure | Reply>>();
  private readonly soldOut = new Set<string>();
  private rateLimited: { on: boolean; retryAfterSeconds?: number } = { on: false };
  private hangAfterCreate = false;
  private edgeRefuses?: RegExp;
  private readonly lastAccepted = { api: -Infinity, launch: -Infinity };
  private bootMs: number;
  private readonly terminateMs: number;
  private nextHost: number;
  private readonly limits?: FakeLambdaOptions['limits'];
  private closed = false;
  /** The recorded deviations in force; change one with `setQuirk`. */
  readonly quirks: LambdaQuirks;

  private constructor(
    private readonly server: Server,
    readonly url: string,
    readonly apiKey: string,
    readonly sshPort: number,
    private readonly types: Record<string, FakeLambdaInstanceTypeItem>,
    opts: FakeLambdaOptions,
  ) {
    this.bootMs = opts.bootMs ?? 100;
    this.terminateMs = opts.terminateMs ?? 50;
    this.limits = opts.limits;
    this.quirks = resolveQuirks<LambdaQuirks>(LAMBDA_QUIRKS, opts.behaviour, opts.quirks);
    // A missing fixture fails the start, not a request in the middle of a test.
    lambdaRecorded();
    // A random block of 127/8 per fake, so parallel runs rarely meet on one address.
    this.nextHost = (1 + Math.floor(Math.random() * 250)) * 65536 + Math.floor(Math.random() * 256) * 256 + 1;
  }

  static async start(opts: FakeLambdaOptions = {}): Promise<FakeLambdaApi> {
    const apiKey = opts.apiKey ?? `secret_fake_${randomBytes(12).toString('hex')}`;
    const sshPort = await freePort();
    let fake!: FakeLambdaApi;
    const server = createServer((req, res) => void fake.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const types = structuredClone(opts.instanceTypes ?? DEFAULT_LAMBDA_INSTANCE_TYPES);
    fake = new FakeLambdaApi(server, url, apiKey, sshPort, types, opts);
    return fake;
  }

  // ---- controls -------------------------------------------------------------------------------

  instances(): {
    id: string;
    name: string;
    tags: { key: string; value: string }[];
    status: FakeLambdaStatus;
    ip?: string;
    sshPort: number;
  }[] {
    return [...this.store.values()].map((i) => ({
      id: i.id,
      name: i.name,
      tags: [...i.tags],
      status: i.status,
      ip: i.ip,
      sshPort: this.sshPort,
    }));
  }

  /** The `user_data` an instance was launched with, as Lambda keeps it for cloud-init; undefined when none. */
  userDataOf(instanceId: string): string | undefined {
    return this.mustGet(instanceId).userData;
  }

  sshKeys(): StoredKey[] {
    return this.keys.map((k) => ({ ...k }));
  }

  setBootMs(ms: number): void {
    this.bootMs = ms;
  }

  /** The instance type shows no region with capacity and launches of it are refused for capacity. */
  noCapacity(instanceTypeName: string, on = true): void {
    if (on) this.soldOut.add(instanceTypeName);
    else this.soldOut.delete(instanceTypeName);
  }

  /** Every call answers 429 (with `Retry-After` when given) until switched off. */
  rateLimitAll(on: boolean, retryAfterSeconds?: number): void {
    this.rateLimited = { on, retryAfterSeconds };
  }

  /** The next call to `endpoint` fails this way: a 500 `global/internal-error`, no answer, a 429 or a cut connection. */
  failNext(endpoint: FakeEndpoint, kind: FakeFailure): void {
    this.queue(endpoint).push(kind);
  }

  /** The next call to `endpoint` answers exactly this status and body (an error from the document). */
  failNextWith(endpoint: FakeEndpoint, status: number, body: unknown): void {
    this.queue(endpoint).push({ status, body });
  }

  /** Launches create the instance, then never answer. */
  hangCreatesAfterCreating(on: boolean): void {
    this.hangAfterCreate = on;
  }

  /** The API no longer knows the instance; its machine keeps serving SSH. */
  forget(instanceId: string): void {
    this.store.delete(instanceId);
  }

  /** Renames an instance, as the dashboard's edit would. */
  rename(instanceId: string, name: string): void {
    this.mustGet(instanceId).name = name;
  }

  /**
   * The edge also refuses every User-Agent `pattern` matches, ours included, with its HTML 403 page
   * (`edgeHtml403` takes only runtimes' defaults). Null lifts it.
   */
  refuseUserAgents(pattern: RegExp | null): void {
    this.edgeRefuses = pattern ?? undefined;
  }

  /** Turns one recorded deviation on, off, or to a setting while the fake runs. */
  setQuirk<K extends keyof LambdaQuirks & string>(name: K, setting: LambdaQuirks[K]): void {
    this.quirks[name] = setting;
  }

  /** Forces a status (unhealthy, preempted, ...); the machine stays as it is. */
  setStatus(instanceId: string, status: FakeLambdaStatus): void {
    this.mustGet(instanceId).status = status;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    for (const s of this.hanging) s.destroy();
    await Promise.all([...this.machines.values()].map((m) => m.close()));
    this.machines.clear();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  // ---- HTTP -----------------------------------------------------------------------------------

  private queue(endpoint: FakeEndpoint): Array<FakeFailure | Reply> {
    let q = this.failures.get(endpoint);
    if (!q) this.failures.set(endpoint, (q = []));
    return q;
  }

  private mustGet(id: string): StoredInstance {
    const i = this.store.get(id);
    if (!i) throw new Error(`fake lambda: no instance ${id}`);
    return i;
  }

  private later(ms: number, fn: () => void | Promise<void>): void {
    const t = afterSimulatedLatency(ms, () => {
      this.timers.delete(t);
      void fn();
    });
    this.timers.add(t);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = req.method ?? 'GET';
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const call: { method: string; path: string; status?: number } = { method, path };
    this.calls.push(call);
    res.on('finish', () => (call.status = res.statusCode));
    let raw = '';
    for await (const chunk of req) raw += chunk;
    if (this.closed) return void res.socket?.destroy();
    const endpoint = endpointOf(method, path);
    const agent = req.headers['user-agent'];
    if ((this.quirks.edgeHtml403 && isRuntimeUserAgent(agent)) || this.edgeRefuses?.test(agent ?? '')) {
      res.writeHead(403, { 'Content-Type': 'text/html; charset=UTF-8' }).end(EDGE_403_HTML);
      return;
    }
    if (this.rateLimited.on) {
      const headers: Record<string, string> = { 'Content-Type': 'text/plain' };
      if (this.rateLimited.retryAfterSeconds !== undefined)
        headers['Retry-After'] = String(this.rateLimited.retryAfterSeconds);
      res.writeHead(429, headers).end('429 Too Many Requests');
      return;
    }
    if (this.overLimit(endpoint)) {
      res.writeHead(429, { 'Content-Type': 'text/plain' }).end('429 Too Many Requests');
      return;
    }
    if (!authorized(req.headers.authorization, this.apiKey)) {
      return this.send(
        res,
        lambdaError(
          401,
          'global/invalid-api-key',
          'API key was invalid, expired, or deleted.',
          'Check your API key or create a new one, then try again.',
        ),
      );
    }
    const injected = endpoint ? this.failures.get(endpoint)?.shift() : undefined;
    if (injected === 'hang') return this.hang(res);
    if (injected === 'drop') return void req.socket.destroy();
    if (injected === '429')
      return this.send(res, { status: 429, body: 'Too Many Requests', headers: { 'Content-Type': 'text/plain' } });
    if (injected === '5xx')
      return this.send(
        res,
        lambdaError(500, 'global/internal-error', 'An internal error occurred.', 'Try again shortly.'),
      );
    if (injected) return this.send(res, injected);

    let body: Record<string, unknown> = {};
    if (method === 'POST') {
      try {
        const parsed: unknown = JSON.parse(raw || 'null');
        if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
        body = parsed as Record<string, unknown>;
      } catch {
        return this.send(res, invalid('Request body must be a JSON object.'));
      }
    }
    const reply = await this.route(method, path, body);
    if (reply === 'hang') return this.hang(res);
    this.send(res, reply);
  }

  /** True when `limits` are enforced and this call comes too soon after the last accepted one. */
  private overLimit(endpoint: FakeEndpoint | null): boolean {
    if (!this.limits) return false;
    const bucket = endpoint === 'create' ? 'launch' : 'api';
    const interval = bucket === 'launch' ? this.limits.launchIntervalMs : this.limits.apiIntervalMs;
    const now = performance.now();
    if (now - this.lastAccepted[bucket] < interval) return true;
    this.lastAccepted[bucket] = now;
    return false;
  }

  private hang(res: ServerResponse): void {
    const socket = res.socket;
    if (socket) {
      this.hanging.add(socket);
      socket.on('close', () => this.hanging.delete(socket));
    }
  }

  private send(res: ServerResponse, r: Reply): void {
    if (typeof r.body === 'string') {
      res.writeHead(r.status, r.headers ?? { 'Content-Type': 'text/plain' }).end(r.body);
      return;
    }
    res.writeHead(r.status, { 'Content-Type': 'application/json', ...r.headers }).end(JSON.stringify(r.body ?? {}));
  }

  private async route(method: string, path: string, body: Record<string, unknown>): Promise<Reply | 'hang'> {
    const instanceMatch = /^\/api\/v1\/instances\/([^/]+)$/.exec(path);
    const keyMatch = /^\/api\/v1\/ssh-keys\/([^/]+)$/.exec(path);
    if (method === 'GET' && path === '/api/v1/instance-types')
      return { status: 200, body: { data: this.instanceTypes() } };
    if (method === 'GET' && path === '/api/v1/instances') {
      return {
        status: 200,
        body: { data: [...this.store.values()].filter((i) => i.status !== 'terminated').map((i) => this.view(i)) },
      };
    }
    if (method === 'GET' && instanceMatch) {
      const i = this.store.get(decodeURIComponent(instanceMatch[1]));
      return i ? { status: 200, body: { data: this.view(i) } } : notFound('Instance not found.');
    }
    if (method === 'POST' && path === '/api/v1/instance-operations/launch') return this.launch(body);
    if (method === 'POST' && path === '/api/v1/instance-operations/terminate') return this.terminate(body);
    if (method === 'GET' && path === '/api/v1/ssh-keys') return { status: 200, body: { data: this.sshKeys() } };
    if (method === 'POST' && path === '/api/v1/ssh-keys') return this.addKey(body);
    if (method === 'DELETE' && keyMatch) {
      const at = this.keys.findIndex((k) => k.id === decodeURIComponent(keyMatch[1]));
      if (at < 0) return invalid('SSH key not found.');
      this.keys.splice(at, 1);
      return { status: 200, body: { data: {} } };
    }
    return { status: 404, body: 'Not Found' };
  }

  private instanceTypes(): Record<string, FakeLambdaInstanceTypeItem> {
    return Object.fromEntries(
      Object.entries(this.types).map(([name, item]) => [
        name,
        {
          ...item,
          regions_with_capacity_available: this.soldOut.has(name) ? [] : item.regions_with_capacity_available,
        },
      ]),
    );
  }

  private view(i: StoredInstance): Record<string, unknown> {
    const t = this.types[i.typeName].instance_type;
    return {
      id: i.id,
      name: i.name,
      ...(i.ip
        ? { ip: i.ip, private_ip: `10.0.${i.ip.split('.').slice(2).join('.')}`, hostname: i.ip.replaceAll('.', '-') }
        : {}),
      status: i.status,
      ssh_key_names: [i.sshKeyName],
      file_system_names: [],
      region: i.region,
      instance_type: t,
      is_reserved: false,
      tags: i.tags,
    };
  }

  private addKey(body: Record<string, unknown>): Reply {
    const req = parseNewKey(body);
    if (isReply(req)) return req;
    if (this.keys.some((k) => k.name === req.name)) return invalid('An SSH key with this name already exists.');
    if (req.publicKey === undefined) {
      // Documented: without public_key Lambda generates a pair and returns the private half once.
      const pair = generateDeploymentKeyPair(req.name);
      const key = { id: hexId(), name: req.name, public_key: pair.publicKey };
      this.keys.push(key);
      return { status: 200, body: { data: { ...key, private_key: pair.privateKey } } };
    }
    const key = { id: hexId(), name: req.name, public_key: req.publicKey };
    this.keys.push(key);
    return { status: 200, body: { data: key } };
  }

  private launch(body: Record<string, unknown>): Reply | 'hang' {
    this.launches.push(structuredClone(body));
    const recorded = lambdaRecorded();
    if (this.quirks.launchQuantity && typeof body.quantity === 'number' && body.quantity > 1) {
      return lambdaError(400, recorded.quantity.code, recorded.quantity.message);
    }
    const req = parseLaunch(body);
    if (isReply(req)) return req;
    const limit = this.quirks.instanceLimit;
    if (
      limit !== false &&
      [...this.store.values()].filter((i) => i.status !== 'terminated').length >= (limit === true ? 10 : limit)
    ) {
      return lambdaError(400, recorded.tooMany.code, recorded.tooMany.message);
    }
    const item = this.types[req.typeName];
    if (!item) return notFound(`Instance type ${req.typeName} does not exist.`);
    const key = this.keys.find((k) => k.name === req.keyName);
    if (!key) return notFound(`SSH key ${req.keyName} does not exist.`);
    const regionInfo = item.regions_with_capacity_available.find((r) => r.name === req.region);
    if (!regionInfo || this.soldOut.has(req.typeName)) {
      return lambdaError(
        400,
        'instance-operations/launch/insufficient-capacity',
        'Not enough capacity to fulfill launch request.',
        'Choose an instance type with more availability, or try again later.',
      );
    }
    const inst: StoredInstance = {
      id: hexId(),
      name: req.name,
      tags: req.tags,
      status: 'booting',
      sshKeyName: key.name,
      publicKey: key.public_key,
      region: regionInfo,
      typeName: req.typeName,
      ...(req.userData === undefined ? {} : { userData: req.userData }),
    };
    this.store.set(inst.id, inst);
    this.later(this.bootMs, () => this.boot(inst));
    if (this.hangAfterCreate) return 'hang';
    return { status: 200, body: { data: { instance_ids: [inst.id] } } };
  }

  private async boot(inst: StoredInstance, tries = 0): Promise<void> {
    if (this.closed || inst.status !== 'booting') return;
    const t = this.types[inst.typeName].instance_type;
    let n = this.nextHost++;
    while ((n & 255) === 0 || (n & 255) === 255) n = this.nextHost++;
    const host = `127.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
    const vram = /(\d+)\s*GB/.exec(t.gpu_description);
    const init = cloudInitBoot(inst.userData);
    let machine: FakeMachine;
    try {
      machine = await FakeMachine.start({
        user: 'ubuntu',
        gpuName: `NVIDIA ${t.gpu_description.replace(/\s*\(.*\)\s*$/, '')}`,
        gpuCount: t.specs.gpus,
        vramGb: vram ? Number(vram[1]) : null,
        publicKey: inst.publicKey,
        host,
        port: this.sshPort,
        ...(init?.profile ? { profile: init.profile } : {}),
      });
    } catch (err) {
      // Another process holds this address and port: move on to the next address.
      if (tries < 5 && (err as NodeJS.ErrnoException).code === 'EADDRINUSE') return this.boot(inst, tries + 1);
      throw err;
    }
    if (this.closed || inst.status !== 'booting') {
      await machine.close();
      return;
    }
    this.machines.set(inst.id, machine);
    inst.ip = host;
    inst.status = 'active';
    // cloud-init runs user_data late in the first boot, about when the instance reads as active.
    if (init?.startupScript) await machine.startup(init.startupScript).catch(() => undefined);
  }

  private terminate(body: Record<string, unknown>): Reply {
    const ids = body.instance_ids;
    if (!Array.isArray(ids) || ids.length === 0 || !ids.every((id) => typeof id === 'string'))
      return invalid('instance_ids must be a non-empty list.');
    // One unknown id fails the whole batch, and nothing in it is terminated.
    const unknown = ids.find((id) => !this.store.has(id));
    if (unknown) return notFound(`Instance ${unknown} not found.`);
    const again = this.quirks.globalUnknown;
    if (again !== false && ids.some((id: string) => this.store.get(id)!.status === 'terminating')) {
      const { code, message } = lambdaRecorded().globalUnknown;
      return lambdaError(again === true ? 500 : again, code, message);
    }
    const out = ids.map((id: string) => {
      const inst = this.store.get(id)!;
      if (inst.status !== 'terminated' && inst.status !== 'terminating') {
        inst.status = 'terminating';
        this.later(this.terminateMs, async () => {
          inst.status = 'terminated';
          const machine = this.machines.get(id);
          this.machines.delete(id);
          await machine?.close();
        });
      }
      return this.view(inst);
    });
    return { status: 200, body: { data: { terminated_instances: out } } };
  }
}
