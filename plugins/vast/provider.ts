import { createWithLabel, listThenGet, pickByLabel } from '../../src/providers/kit/create-steps.js';
import { LabelLock } from '../../src/providers/kit/label-lock.js';
import { SharedRead } from '../../src/providers/provider-http.js';
import type { CreateResult, InstanceInfo, OfferRef, Provider, ProviderCapabilities, ProviderDeps, ProviderOffer } from '../../src/providers/provider.js';
import { VastClient, VAST_MIN_INTERVALS_MS, type VastBucket, type VastInstance } from './client.js';
import { classifyVastError, createFailure, describeAnswer, vastErrorCode } from './errors.js';
import { mapVastOffer, offerSearchBody } from './offers.js';
import type { VastOptions } from './options.js';
import { vastState } from './states.js';

/** Knobs tests turn to stay fast; production uses Vast's documented limits. */
export interface VastTuning {
  intervalsMs?: Partial<Record<VastBucket, number>>;
  timeoutMs?: number;
  backoffMs?: number;
  maxBackoffMs?: number;
  /** How long one list answer serves `get` and `listInstances`. Default: the list's min interval. */
  listTtlMs?: number;
}

/** Vast keeps labels up to this length. */
export const VAST_MAX_LABEL = 256;
const VAST_USER = 'root';
/** Refusals of a key attachment that no retry or other instance can fix. */
const FATAL_KEY_CODES = ['team_ssh_keys_not_supported', 'no_ssh_key_for_vm'];
const isVastId = (id: string) => /^[1-9]\d{0,15}$/.test(id);

/** The direct SSH endpoint, once Vast reports both the address and the mapped port 22. */
export function vastSsh(inst: VastInstance): InstanceInfo['ssh'] {
  const host = inst.public_ipaddr?.trim();
  const port = Number(inst.ports?.['22/tcp']?.[0]?.HostPort);
  if (!host || !Number.isSafeInteger(port) || port <= 0 || port > 65_535) return undefined;
  return { host, port, user: VAST_USER };
}

/**
 * Vast.ai instances rented from on-demand asks. Each instance carries our label; our SSH key is
 * attached to it after the create (`POST /api/v0/instances/{id}/ssh/`). A key whose attachment
 * did not go through is kept in memory and attached again on the next `get` or `findByLabel`,
 * so a create that timed out and is adopted by label still lets the deployment's key in.
 */
export class VastProvider implements Provider {
  readonly id = 'vast';
  readonly capabilities: ProviderCapabilities = { labels: true, sshKeyPerInstance: true, listInstances: true };
  private readonly client: VastClient;
  private readonly all: SharedRead<VastInstance[]>;
  /** label → public key still to attach. */
  private readonly pendingKeys = new Map<string, string>();
  /** instance id → the key attached to it by this process, so a repeated create does not attach twice. */
  private readonly attached = new Map<string, string>();
  /** Instances whose key Vast refused for good: they can never be reached, so they read as failed. */
  private readonly keyRefused = new Map<string, string>();
  /** Creates per label one at a time, so two calls for one label make one instance. */
  private readonly creating = new LabelLock();

  constructor(
    private readonly options: VastOptions,
    private readonly deps: ProviderDeps,
    tuning: VastTuning = {},
  ) {
    this.client = new VastClient({ apiUrl: options.apiUrl, apiKey: options.apiKey, logger: deps.logger, ...tuning });
    const ttl = tuning.listTtlMs ?? tuning.intervalsMs?.list ?? VAST_MIN_INTERVALS_MS.list;
    this.all = new SharedRead(() => this.client.listInstances(), ttl);
  }

  async listOffers(): Promise<ProviderOffer[]> {
    const raw = await this.client.searchOffers(offerSearchBody(this.options));
    const out: ProviderOffer[] = [];
    const seen = new Set<string>();
    for (const o of raw) {
      const mapped = mapVastOffer(o, this.options.diskGb);
      if (typeof mapped === 'string') {
        this.deps.logger.debug({ provider: this.id, ask: o.id, why: mapped }, 'vast offer skipped');
      } else if (!seen.has(mapped.key)) {
        seen.add(mapped.key);
        out.push(mapped);
      }
    }
    return out;
  }

  create(label: string, offer: OfferRef, sshPublicKey: string): Promise<CreateResult> {
    return this.creating.run(label, () => this.createOnce(label, offer, sshPublicKey));
  }

  private async createOnce(label: string, offer: OfferRef, sshPublicKey: string): Promise<CreateResult> {
    if (!label || label.length > VAST_MAX_LABEL) return { kind: 'rejected', reason: `vast labels are 1 to ${VAST_MAX_LABEL} characters; got ${label.length}` };
    if (!isVastId(offer.key)) return { kind: 'rejected', reason: `offer key "${offer.key}" is not a Vast ask id` };
    // Kept before anything is sent: an answer lost on the way still leaves us the key to attach.
    this.pendingKeys.set(label, sshPublicKey);
    return createWithLabel({
      label,
      lookup: () => this.findRaw(label),
      adopt: async (existing) => {
        await this.ensureKey(String(existing.id), label);
        return { kind: 'created', instanceId: String(existing.id) };
      },
      send: () => this.sendCreate(label, offer),
      // Keeps the key only while an instance may exist under the label.
      settle: (result) => {
        if (result.kind !== 'ambiguous') this.pendingKeys.delete(label);
      },
    });
  }

  /** `PUT /api/v0/asks/{id}/` and what its answer means; throws only when no answer came. */
  private async sendCreate(label: string, offer: OfferRef): Promise<CreateResult> {
    const path = `/api/v0/asks/${offer.key}/`;
    const res = await this.client.createInstance(offer.key, {
      client_id: 'me',
      image: this.options.image,
      disk: this.options.diskGb,
      label,
      runtype: 'ssh_direct',
      // Sent explicitly: without it a schedule failure can leave a stopped instance billing storage.
      cancel_unavail: true,
    });
    const body = res.json as { success?: unknown; new_contract?: unknown } | null;
    if (res.status === 200 && body?.success === true && Number.isSafeInteger(body.new_contract)) {
      const instanceId = String(body.new_contract);
      this.all.invalidate();
      await this.ensureKey(instanceId, label);
      return { kind: 'created', instanceId };
    }
    const failure = res.status === 200 ? { kind: 'ambiguous' as const, reason: describeAnswer(`vast PUT ${path}: no new_contract`, res) } : createFailure(`vast PUT ${path}`, res);
    if (failure.kind === 'rejected') this.deps.logger.error({ provider: this.id, label, reason: failure.reason }, 'vast refused the create request: check VAST_PROVIDER_* options and the account');
    return failure;
  }

  /**
   * Attaches the label's pending key to the instance. Failures are logged, never thrown: the
   * instance exists and must not be lost; the next poll tries again. A refusal that asking again
   * cannot fix (the key may not manage SSH keys) marks the instance failed so the host destroys
   * it. Any other refusal stops the retries but leaves the instance alone: Vast may be refusing a
   * key it already has, and the host's SSH check decides whether the machine is usable.
   */
  private async ensureKey(instanceId: string, label: string): Promise<void> {
    const key = this.pendingKeys.get(label);
    if (!key) return;
    if (this.attached.get(instanceId) === key) {
      this.pendingKeys.delete(label);
      return;
    }
    const what = `vast POST /api/v0/instances/${instanceId}/ssh/`;
    let res;
    try {
      res = await this.client.attachKey(instanceId, key);
    } catch (err) {
      this.deps.logger.warn({ provider: this.id, instanceId, label, err: (err as Error).message }, 'attaching the SSH key got no answer; trying again on the next poll');
      return;
    }
    if (res.status === 200 && (res.json as { success?: unknown } | null)?.success !== false) {
      this.pendingKeys.delete(label);
      this.attached.set(instanceId, key);
      return;
    }
    const rule = classifyVastError(res);
    const reason = describeAnswer(what, res);
    if (rule.read === 'rate_limited' || rule.read === 'unavailable' || rule.read === 'bad_response') {
      this.deps.logger.warn({ provider: this.id, instanceId, label, reason }, 'attaching the SSH key failed; trying again on the next poll');
      return;
    }
    this.pendingKeys.delete(label);
    if (rule.read === 'auth' || FATAL_KEY_CODES.includes(vastErrorCode(res) ?? '')) {
      this.keyRefused.set(instanceId, reason);
      this.deps.logger.error({ provider: this.id, instanceId, label, reason }, 'vast refused our SSH key for the instance; it will read as failed');
    } else {
      this.deps.logger.error({ provider: this.id, instanceId, label, reason }, 'vast refused our SSH key; not retrying (the host SSH check decides readiness)');
    }
  }

  private async info(inst: VastInstance): Promise<InstanceInfo> {
    const instanceId = String(inst.id);
    const label = inst.label ?? '';
    if (label) await this.ensureKey(instanceId, label);
    const refused = this.keyRefused.get(instanceId);
    const state = refused ? 'failed' : vastState(inst.actual_status);
    const out: InstanceInfo = { instanceId, label, state, providerState: `${inst.actual_status ?? 'null'}${refused ? ' (ssh key refused)' : ''}` };
    const ssh = vastSsh(inst);
    if (ssh) out.ssh = ssh;
    return out;
  }

  private async findRaw(label: string): Promise<VastInstance | null> {
    const listed = await this.client.listInstances({ label: { eq: label } });
    return pickByLabel(listed, label, { labelOf: (i) => i.label ?? undefined, older: (a, b) => a.id - b.id, idOf: (i) => String(i.id), logger: this.deps.logger.child({ provider: this.id }) });
  }

  async findByLabel(label: string, sshPublicKey?: string): Promise<InstanceInfo | null> {
    const inst = await this.findRaw(label);
    if (!inst) return null;
    // Adoption by a process that did not make the create (a restart): the host's key is the one to deliver.
    if (sshPublicKey && !this.pendingKeys.has(label) && this.attached.get(String(inst.id)) !== sshPublicKey) this.pendingKeys.set(label, sshPublicKey);
    return this.info(inst);
  }

  async get(instanceId: string): Promise<InstanceInfo> {
    if (!isVastId(instanceId)) return { instanceId, label: '', state: 'gone' };
    const inst = await listThenGet(this.all, instanceId, (i) => String(i.id), (id) => this.client.showInstance(id));
    if (!inst) return { instanceId, label: '', state: 'gone', providerState: 'destroyed' };
    return this.info(inst);
  }

  async destroy(instanceId: string): Promise<void> {
    if (!isVastId(instanceId)) return;
    await this.client.destroyInstance(instanceId);
    this.all.invalidate();
    this.keyRefused.delete(instanceId);
    this.attached.delete(instanceId);
  }

  async listInstances(): Promise<InstanceInfo[]> {
    const mine = (await this.all.get()).filter((i) => typeof i.label === 'string' && i.label.startsWith(this.deps.labelPrefix));
    return Promise.all(mine.map((i) => this.info(i)));
  }

  async afterDestroyed(label: string): Promise<void> {
    this.pendingKeys.delete(label);
  }

  async close(): Promise<void> {
    this.pendingKeys.clear();
    this.attached.clear();
  }
}
