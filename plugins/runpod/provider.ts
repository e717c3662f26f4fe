import { createWithLabel, labelLookupFailure, listThenGet, pickByLabel } from '../../src/providers/kit/create-steps.js';
import { LabelLock } from '../../src/providers/kit/label-lock.js';
import { StateWatch } from '../../src/providers/kit/state-watch.js';
import { type ProviderApiError, SharedRead } from '../../src/providers/provider-http.js';
import type {
  CreateResult,
  InstanceInfo,
  MachineSettings,
  OfferRef,
  Provider,
  ProviderCapabilities,
  ProviderDeps,
  ProviderOffer,
} from '../../src/providers/provider.js';
import type { ProviderCheck } from '../../src/providers/provider-check.js';
import { checkRunpod } from './check.js';
import { isPod, RunpodClient, type RunpodClientHooks, type RunpodPod } from './client.js';
import { createResultFor } from './errors.js';
import { podEndpoints, podMachineFields, podStartupPhase, refusedSettings, secretsOf } from './machine.js';
import { mapRunpodGpu, parseOfferKey, RUNPOD_GPU_COUNTS } from './offers.js';
import { cudaConstraintOf, imageCudaVersion, type RunpodOptions } from './options.js';
import { podReading } from './states.js';

/** How long one `GET /v2/pods` answers every `get` poll (many rentals, one list call). */
const DEFAULT_POLL_TTL_MS = 3000;

export interface RunpodProviderHooks extends RunpodClientHooks {
  /** Lifetime of the shared poll list; default 3 s. */
  pollTtlMs?: number;
  /** How long a pod may stay in statuses the state table does not know before it reads as failed; the kit's default otherwise. */
  unknownStateBoundMs?: number;
}

/**
 * RunPod pods through REST v2. The label is the pod's `name`; the deployment's key goes in as
 * `env.PUBLIC_KEY`, which RunPod's official images install for root, with `22/tcp` published so
 * `ssh.direct` (a full SSH endpoint) exists; the proxy carries interactive shells only. A rental's
 * machine settings map as `machine.ts` says: its image, disk, ports behind RunPod's HTTP proxy, and
 * variables and a startup script through a boot script that hands over to the image's own start.
 */
export class RunpodProvider implements Provider {
  readonly id = 'runpod';
  readonly capabilities: ProviderCapabilities = { labels: true, sshKeyPerInstance: true, listInstances: true };
  readonly client: RunpodClient;
  /** Serves `get` polls: one list call for every rental polled within the TTL. */
  private readonly polls: SharedRead<RunpodPod[]>;
  /** Serves `findByLabel`/`listInstances`/create's check: never older than the call, but concurrent callers share it. */
  private readonly fresh: SharedRead<RunpodPod[]>;
  /** Creates for one label queue behind each other, so a racing second create finds the first's pod. */
  private readonly creating = new LabelLock();
  /** Bounds statuses the table does not know. */
  private readonly states: StateWatch;

  constructor(
    private readonly options: RunpodOptions,
    private readonly deps: ProviderDeps,
    hooks: RunpodProviderHooks = {},
  ) {
    this.client = new RunpodClient(options, deps.logger, deps.drift, hooks);
    const now = hooks.now ?? Date.now;
    this.polls = new SharedRead(() => this.client.listPods(), hooks.pollTtlMs ?? DEFAULT_POLL_TTL_MS, now);
    this.fresh = new SharedRead(() => this.client.listPods(), 0, now);
    this.states = new StateWatch({
      providerId: this.id,
      logger: deps.logger,
      drift: deps.drift,
      where: 'pod status',
      now,
      boundMs: hooks.unknownStateBoundMs,
    });
    if (!options.cuda && imageCudaVersion(options.image) === null) {
      deps.logger.warn(
        { provider: this.id, image: options.image },
        'RUNPOD_PROVIDER_IMAGE names no CUDA version in its tag and RUNPOD_PROVIDER_CUDA_VERSIONS is not set: pods are created without a CUDA constraint, and a GeForce pod placed on an older driver may never start',
      );
    }
  }

  async listOffers(): Promise<ProviderOffer[]> {
    const offers: ProviderOffer[] = [];
    // Availability depends on the count asked for (stock of 1 GPU says nothing about 8 on one
    // machine), so each count gets its own catalog read.
    for (const count of RUNPOD_GPU_COUNTS) {
      for (const gpu of await this.client.gpuTypes(this.options.cloud, count)) {
        const offer = mapRunpodGpu(gpu, count, this.options);
        if (offer) offers.push(offer);
      }
    }
    return offers;
  }

  create(label: string, offer: OfferRef, sshPublicKey: string, machine?: MachineSettings): Promise<CreateResult> {
    return this.creating.run(label, () => this.createOnce(label, offer, sshPublicKey, machine));
  }

  private async createOnce(
    label: string,
    offer: OfferRef,
    sshPublicKey: string,
    machine: MachineSettings | undefined,
  ): Promise<CreateResult> {
    const parsed = parseOfferKey(offer.key);
    if (!parsed) return { kind: 'rejected', reason: `offer key "${offer.key}" is not a RunPod offer key` };
    const refused = refusedSettings(machine);
    if (refused) return { kind: 'rejected', reason: refused };
    // RunPod has no idempotency key and no unique names: an earlier create with this label
    // (a throttled retry, a crash) must be found before asking again.
    return createWithLabel({
      label,
      lookup: async () => {
        try {
          return this.pick(await this.fresh.get(), label);
        } catch (err) {
          // The kit gives the verdict and its class; a refused list (the key, the edge) is also
          // told to the operator here, as a refused create is.
          const refused = labelLookupFailure(label, err);
          if (refused.kind === 'rejected')
            this.deps.logger.error(
              { provider: this.id, label, status: (err as ProviderApiError).status, reason: refused.reason },
              'RunPod refused the create: operator action needed',
            );
          throw err;
        }
      },
      adopt: (existing) => ({ kind: 'created', instanceId: existing.id }),
      send: () => this.sendCreate(label, offer, parsed, sshPublicKey, machine),
    });
  }

  /** `POST /v2/pods` and what its answer means; throws only when no answer came (the pod may exist). */
  private async sendCreate(
    label: string,
    offer: OfferRef,
    parsed: { gpuId: string; count: number },
    sshPublicKey: string,
    machine: MachineSettings | undefined,
  ): Promise<CreateResult> {
    const { image, disk, ports, env, args } = podMachineFields(machine, this.options, sshPublicKey.trim());
    let res;
    try {
      res = await this.client.createPod({
        name: label,
        image,
        gpu: { id: parsed.gpuId, count: parsed.count, ...cudaConstraintOf(this.options, image) },
        cloud: this.options.cloud,
        disk,
        ports,
        env,
        ...(args === undefined ? {} : { args }),
      });
    } finally {
      this.polls.invalidate();
    }
    if (res.status === 201 || res.status === 200) {
      if (isPod(res.json)) return { kind: 'created', instanceId: res.json.id };
      this.client.drift.unknownFieldShape('POST /v2/pods', res.json);
      return { kind: 'ambiguous', reason: `RunPod ${res.status} without a pod in the answer` };
    }
    const { result, log } = createResultFor(res, {
      rentalImage: !!machine?.image,
      secrets: secretsOf({ env }, machine),
    });
    const fields = {
      provider: this.id,
      label,
      offer: offer.key,
      status: res.status,
      result: result.kind,
      reason: result.reason,
    };
    this.deps.logger[log](
      fields,
      log === 'error' ? 'RunPod refused the create: operator action needed' : 'RunPod did not create the pod',
    );
    return result;
  }

  /** The pod named `label`; if a race ever made two, the oldest (the one the first answer named). */
  private pick(pods: RunpodPod[], label: string): RunpodPod | null {
    return pickByLabel(pods, label, {
      labelOf: (p) => p.name,
      live: (p) => p.status !== 'TERMINATED',
      older: (a, b) => (a.createdAt ?? '').localeCompare(b.createdAt ?? ''),
      idOf: (p) => p.id,
      logger: this.deps.logger.child({ provider: this.id }),
    });
  }

  private info(pod: RunpodPod): InstanceInfo {
    const state = this.states.read(pod.id, pod.status, podReading(pod.status));
    if (state === 'gone') this.states.forget(pod.id);
    const direct = pod.ssh?.direct;
    const info: InstanceInfo = { instanceId: pod.id, label: pod.name, state, providerState: pod.status };
    if (state === 'running' && direct && typeof direct.host === 'string' && Number.isInteger(direct.port)) {
      info.ssh = { host: direct.host, port: direct.port, user: direct.username || 'root' };
    }
    const endpoints = state === 'running' ? podEndpoints(pod) : [];
    if (endpoints.length > 0) info.endpoints = endpoints;
    const phase = state === 'pending' ? podStartupPhase(pod) : undefined;
    if (phase) info.startupPhase = phase;
    return info;
  }

  async findByLabel(label: string): Promise<InstanceInfo | null> {
    const pod = this.pick(await this.fresh.get(), label);
    return pod ? this.info(pod) : null;
  }

  async get(instanceId: string): Promise<InstanceInfo> {
    const pod = await listThenGet(
      this.polls,
      instanceId,
      (p) => p.id,
      (id) => this.client.getPod(id),
    );
    if (pod) return this.info(pod);
    this.states.forget(instanceId);
    return { instanceId, label: '', state: 'gone' };
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
    return pods
      .filter((p) => p.name.startsWith(this.deps.labelPrefix) && p.status !== 'TERMINATED')
      .map((p) => this.info(p));
  }

  /** Read-only: the pod list's first page (the key, the edge) and the catalog counted by drop reason (`check.ts`). */
  check(): Promise<ProviderCheck> {
    return checkRunpod(this.client, this.options);
  }
}
