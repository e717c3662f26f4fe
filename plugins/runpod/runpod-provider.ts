import { usdToCentsCeil } from '../../src/providers/pricing.js';
import { ProviderApiError, SharedRead } from '../../src/providers/provider-http.js';
import type { CreateResult, InstanceInfo, OfferRef, Provider, ProviderCapabilities, ProviderDeps, ProviderOffer } from '../../src/providers/provider.js';
import type { RunpodOptions } from './options.js';
import { isPod, RunpodClient, type RunpodClientHooks, type RunpodGpuType, type RunpodPod } from './runpod-client.js';
import { createResultFor, podState, problemDetail } from './tables.js';

/** GPU counts we offer per GPU type, each within the type's `maxCount` for our cloud. */
export const RUNPOD_GPU_COUNTS = [1, 2, 4, 8] as const;

/** How long one `GET /v2/pods` answers every `get` poll (many rentals, one list call). */
const DEFAULT_POLL_TTL_MS = 3000;

/** Offer keys carry the count and RunPod's GPU type id: `2x:NVIDIA H100 80GB HBM3`. */
export function offerKey(gpuId: string, count: number): string {
  return `${count}x:${gpuId}`;
}

export function parseOfferKey(key: string): { gpuId: string; count: number } | null {
  const m = /^(\d+)x:(.+)$/.exec(key);
  return m ? { gpuId: m[2], count: Number(m[1]) } : null;
}

/** RunPod does not group its GPUs; the type id says enough: GeForce, RTX workstation cards, the rest. */
function category(gpu: RunpodGpuType): string {
  if (/geforce/i.test(gpu.id)) return 'consumer';
  if (/\brtx (a\d{4}|\d{4} ada|pro)\b/i.test(gpu.id)) return 'workstation';
  return 'datacenter';
}

export interface RunpodProviderHooks extends RunpodClientHooks {
  /** Lifetime of the shared poll list; default 3 s. */
  pollTtlMs?: number;
}

/**
 * RunPod pods through REST v2. The label is the pod's `name`; the deployment's key goes in as
 * `env.PUBLIC_KEY`, which RunPod's official images install for root, with `22/tcp` published so
 * `ssh.direct` (a full SSH endpoint) exists; the proxy carries interactive shells only.
 */
export class RunpodProvider implements Provider {
  readonly id = 'runpod';
  readonly capabilities: ProviderCapabilities = { labels: true, sshKeyPerInstance: true, listInstances: true };
  readonly client: RunpodClient;
  /** Serves `get` polls: one list call for every rental polled within the TTL. */
  private readonly polls: SharedRead<RunpodPod[]>;
  /** Serves `findByLabel`/`listInstances`/create's check: never older than the call, but concurrent callers share it. */
  private readonly fresh: SharedRead<RunpodPod[]>;
  private readonly creating = new Map<string, Promise<CreateResult>>();

  constructor(
    private readonly options: RunpodOptions,
    private readonly deps: ProviderDeps,
    hooks: RunpodProviderHooks = {},
  ) {
    this.client = new RunpodClient(options, deps.logger, hooks);
    const now = hooks.now ?? Date.now;
    this.polls = new SharedRead(() => this.client.listPods(), hooks.pollTtlMs ?? DEFAULT_POLL_TTL_MS, now);
    this.fresh = new SharedRead(() => this.client.listPods(), 0, now);
  }

  async listOffers(): Promise<ProviderOffer[]> {
    const cloud = this.options.cloud;
    const side = cloud === 'SECURE' ? 'secure' : 'community';
    const offers: ProviderOffer[] = [];
    // Availability depends on the count asked for (stock of 1 GPU says nothing about 8 on one
    // machine), so each count gets its own catalog read.
    for (const count of RUNPOD_GPU_COUNTS) {
      for (const gpu of await this.client.gpuTypes(cloud, count)) {
        const price = gpu.price[side];
        if (gpu[side] === false || (gpu.maxCount[side] ?? 0) < count) continue;
        if (!gpu.availability || gpu.availability === 'NONE') continue;
        if (typeof price !== 'number' || !(price > 0)) continue;
        offers.push({
          key: offerKey(gpu.id, count),
          name: gpu.name,
          category: category(gpu),
          vramGb: typeof gpu.memory === 'number' && gpu.memory > 0 ? gpu.memory : null,
          gpuCount: count,
          cpuCores: null,
          memoryGb: null,
          storageGb: this.options.diskGb,
          // RunPod prices one GPU; the pod costs that times the count.
          pricePerHourMinor: usdToCentsCeil(price * count),
          maximumDurationSeconds: this.options.maxDurationSeconds,
          region: null,
        });
      }
    }
    return offers;
  }

  create(label: string, offer: OfferRef, sshPublicKey: string): Promise<CreateResult> {
    // Creates for one label queue behind each other, so a racing second create finds the first's pod.
    const prev = this.creating.get(label) ?? Promise.resolve(undefined);
    const next = prev.catch(() => undefined).then(() => this.createOnce(label, offer, sshPublicKey));
    this.creating.set(label, next);
    return next.finally(() => {
      if (this.creating.get(label) === next) this.creating.delete(label);
    });
  }

  private async createOnce(label: string, offer: OfferRef, sshPublicKey: string): Promise<CreateResult> {
    const parsed = parseOfferKey(offer.key);
    if (!parsed) return { kind: 'rejected', reason: `offer key "${offer.key}" is not a RunPod offer key` };
    // RunPod has no idempotency key and no unique names: an earlier create with this label
    // (a throttled retry, a crash) must be found before asking again.
    let existing: RunpodPod | undefined;
    try {
      existing = this.pick(await this.fresh.get(), label);
    } catch (err) {
      const e = err as ProviderApiError;
      if (e.errorClass === 'rate_limited') return { kind: 'throttled', reason: e.message, retryAfterMs: e.retryAfterMs ?? 1000 };
      if (e.errorClass === 'auth') {
        // The key cannot even list pods (wrong, revoked, or without pod access): nothing was asked for.
        this.deps.logger.error({ provider: this.id, label, status: e.status, reason: e.message }, 'RunPod refused the create: operator action needed');
        return { kind: 'rejected', reason: e.message };
      }
      return { kind: 'ambiguous', reason: `could not check for an existing pod named ${label}: ${e.message}` };
    }
    if (existing) return { kind: 'created', instanceId: existing.id };

    let res;
    try {
      res = await this.client.createPod({
        name: label,
        image: this.options.image,
        gpu: { id: parsed.gpuId, count: parsed.count },
        cloud: this.options.cloud,
        disk: this.options.diskGb,
        ports: ['22/tcp'],
        env: { PUBLIC_KEY: sshPublicKey.trim() },
      });
    } catch (err) {
      // No answer (timeout, dropped connection): the pod may exist; the host finds it by label.
      return { kind: 'ambiguous', reason: (err as Error).message };
    } finally {
      this.polls.invalidate();
    }
    if (res.status === 201 || res.status === 200) {
      if (isPod(res.json)) return { kind: 'created', instanceId: res.json.id };
      return { kind: 'ambiguous', reason: `RunPod ${res.status} without a pod in the answer` };
    }
    const { result, log } = createResultFor(res.status, problemDetail(res.json, res.text), res.retryAfterMs);
    const fields = { provider: this.id, label, offer: offer.key, status: res.status, result: result.kind, reason: result.reason };
    this.deps.logger[log](fields, log === 'error' ? 'RunPod refused the create: operator action needed' : 'RunPod did not create the pod');
    return result;
  }

  /** The pod named `label`; if a race ever made two, the oldest (the one the first answer named). */
  private pick(pods: RunpodPod[], label: string): RunpodPod | undefined {
    const named = pods.filter((p) => p.name === label && p.status !== 'TERMINATED');
    if (named.length > 1) this.deps.logger.warn({ provider: this.id, label, ids: named.map((p) => p.id) }, 'several RunPod pods carry one label');
    return named.sort((a, b) => (a.createdAt ?? '').localeCompare(b.createdAt ?? ''))[0];
  }

  private info(pod: RunpodPod): InstanceInfo {
    const state = podState(pod.status);
    const direct = pod.ssh?.direct;
    const info: InstanceInfo = { instanceId: pod.id, label: pod.name, state, providerState: pod.status };
    if (state === 'running' && direct && typeof direct.host === 'string' && Number.isInteger(direct.port)) {
      info.ssh = { host: direct.host, port: direct.port, user: direct.username || 'root' };
    }
    return info;
  }

  async findByLabel(label: string): Promise<InstanceInfo | null> {
    const pod = this.pick(await this.fresh.get(), label);
    return pod ? this.info(pod) : null;
  }

  async get(instanceId: string): Promise<InstanceInfo> {
    const listed = (await this.polls.get()).find((p) => p.id === instanceId);
    if (listed) return this.info(listed);
    // Not in the shared list: created after it was read, or gone. Only the pod's own read says which.
    const pod = await this.client.getPod(instanceId);
    return pod ? this.info(pod) : { instanceId, label: '', state: 'gone' };
  }

  async destroy(instanceId: string): Promise<void> {
    try {
      await this.client.deletePod(instanceId);
    } finally {
      this.polls.invalidate();
    }
  }

  async listInstances(): Promise<InstanceInfo[]> {
    const pods = await this.fresh.get();
    return pods.filter((p) => p.name.startsWith(this.deps.labelPrefix) && p.status !== 'TERMINATED').map((p) => this.info(p));
  }
}
