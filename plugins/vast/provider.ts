import { createWithLabel, listThenGet, pickByLabel } from '../../src/providers/kit/create-steps.js';
import { LabelLock } from '../../src/providers/kit/label-lock.js';
import { StateWatch } from '../../src/providers/kit/state-watch.js';
import { SharedRead } from '../../src/providers/provider-http.js';
import {
  DEFAULT_MACHINE_SETTINGS,
  type CreateResult,
  type InstanceInfo,
  type MachineSettings,
  type OfferRef,
  type Provider,
  type ProviderCapabilities,
  type ProviderDeps,
  type ProviderOffer,
} from '../../src/providers/provider.js';
import type { ProviderCheck } from '../../src/providers/provider-check.js';
import { checkVast } from './check.js';
import { VastClient, VAST_MIN_INTERVALS_MS, type VastBucket, type VastInstance } from './client.js';
import { classifyVastError, createFailure, describeAnswer, vastErrorCode } from './errors.js';
import {
  vastEndpoints,
  vastMachineFields,
  vastStartupPhase,
  vastTraffic,
  withoutEnvValues,
  type VastMachineFields,
} from './machine.js';
import {
  extraDiskUsdPerHour,
  isVastOfferDrop,
  mapVastOffer,
  offerSearchBody,
  vastOverQuote,
  type VastQuote,
} from './offers.js';
import type { VastOptions } from './options.js';
import { describeVastStatus, isFinalVastStatus, readVastState } from './states.js';

/** Knobs tests turn to stay fast; production uses Vast's documented limits. */
export interface VastTuning {
  intervalsMs?: Partial<Record<VastBucket, number>>;
  timeoutMs?: number;
  backoffMs?: number;
  maxBackoffMs?: number;
  /** How long one list answer serves `get` and `listInstances`. Default: the list's min interval. */
  listTtlMs?: number;
  /** How long a state no table row knows may last before it reads as failed (the kit's default: 10 min). */
  unknownStateBoundMs?: number;
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
 * so a create that timed out and is adopted by label still lets the deployment's key in. A
 * rental's image, disk, variables, startup script and ports go in the create body
 * (`vastMachineFields`); its ports come back as endpoints once Vast maps them.
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
  /** Bounds states the table does not know: logged once, pending for a while, then failed. */
  private readonly states: StateWatch;
  /** instance id → the quote still to compare, when the price could not be read at create. */
  private readonly quotes = new Map<string, VastQuote>();
  /** Instances billing more than they were quoted at that could not be destroyed at create: they read as failed. */
  private readonly repriced = new Map<string, string>();
  /** Instances whose start failure (and its `status_msg`) has been logged. */
  private readonly failureLogged = new Set<string>();

  constructor(
    private readonly options: VastOptions,
    private readonly deps: ProviderDeps,
    tuning: VastTuning = {},
  ) {
    this.client = new VastClient({
      apiUrl: options.apiUrl,
      apiKey: options.apiKey,
      logger: deps.logger,
      drift: deps.drift,
      ...tuning,
    });
    const ttl = tuning.listTtlMs ?? tuning.intervalsMs?.list ?? VAST_MIN_INTERVALS_MS.list;
    this.all = new SharedRead(() => this.client.listInstances(), ttl);
    this.states = new StateWatch({
      providerId: this.id,
      logger: deps.logger,
      drift: deps.drift,
      where: 'instance actual_status',
      now: () => deps.clock.now().getTime(),
      boundMs: tuning.unknownStateBoundMs,
    });
  }

  async listOffers(): Promise<ProviderOffer[]> {
    const raw = await this.client.searchOffers(offerSearchBody(this.options));
    const out: ProviderOffer[] = [];
    const seen = new Set<string>();
    for (const o of raw) {
      const mapped = mapVastOffer(o, this.options.diskGb, this.options);
      if (isVastOfferDrop(mapped)) {
        this.deps.logger.debug(
          { provider: this.id, ask: o.id, reason: mapped.drop, why: mapped.detail },
          'vast offer skipped',
        );
      } else if (!seen.has(mapped.key)) {
        seen.add(mapped.key);
        out.push(mapped);
      }
    }
    return out;
  }

  create(
    label: string,
    offer: OfferRef,
    sshPublicKey: string,
    machine: MachineSettings = DEFAULT_MACHINE_SETTINGS,
  ): Promise<CreateResult> {
    return this.creating.run(label, () => this.createOnce(label, offer, sshPublicKey, machine));
  }

  private async createOnce(
    label: string,
    offer: OfferRef,
    sshPublicKey: string,
    machine: MachineSettings,
  ): Promise<CreateResult> {
    if (!label || label.length > VAST_MAX_LABEL)
      return { kind: 'rejected', reason: `vast labels are 1 to ${VAST_MAX_LABEL} characters; got ${label.length}` };
    if (!isVastId(offer.key)) return { kind: 'rejected', reason: `offer key "${offer.key}" is not a Vast ask id` };
    const fields = vastMachineFields(machine, this.options);
    if ('kind' in fields) return fields;
    // Kept before anything is sent: an answer lost on the way still leaves us the key to attach.
    this.pendingKeys.set(label, sshPublicKey);
    return createWithLabel({
      label,
      lookup: () => this.findRaw(label),
      adopt: async (existing) => {
        await this.ensureKey(String(existing.id), label);
        return { kind: 'created', instanceId: String(existing.id) };
      },
      send: () => this.sendCreate(label, offer, fields),
      // Keeps the key only while an instance may exist under the label.
      settle: (result) => {
        if (result.kind !== 'ambiguous') this.pendingKeys.delete(label);
      },
    });
  }

  /**
   * `PUT /api/v0/asks/{id}/` and what its answer means; throws only when no answer came. A rental
   * without machine settings sends the plugin's image and disk and nothing else of its own.
   */
  private async sendCreate(label: string, offer: OfferRef, fields: VastMachineFields): Promise<CreateResult> {
    const path = `/api/v0/asks/${offer.key}/`;
    const res = await this.client.createInstance(offer.key, {
      client_id: 'me',
      image: fields.image,
      disk: fields.disk,
      label,
      runtype: 'ssh_direct',
      // Sent explicitly: without it a schedule failure can leave a stopped instance billing storage.
      cancel_unavail: true,
      ...(fields.env ? { env: fields.env } : {}),
      ...(fields.onstart ? { onstart: fields.onstart } : {}),
    });
    const body = res.json as { success?: unknown; new_contract?: unknown } | null;
    if (res.status === 200 && body?.success === true && Number.isSafeInteger(body.new_contract)) {
      const instanceId = String(body.new_contract);
      this.all.invalidate();
      const overQuote = await this.checkPrice(instanceId, label, offer);
      if (overQuote) return overQuote;
      await this.ensureKey(instanceId, label);
      return { kind: 'created', instanceId };
    }
    // A refusal is logged once, by the host, with the reason naming the variable to fix.
    if (res.status === 200 && body?.success !== false) {
      this.client.drift.unknownFieldShape('PUT /api/v0/asks/{id}/', res.json);
      return {
        kind: 'ambiguous',
        reason: fields.sent.secrets
          ? `vast PUT ${path}: HTTP 200 without new_contract`
          : describeAnswer(`vast PUT ${path}: no new_contract`, res),
      };
    }
    return createFailure(`vast PUT ${path}`, res, fields.sent);
  }

  /**
   * Why an instance bills more than its quote ({@link vastOverQuote}), priced as its offer was:
   * with the plugin's disk, since a larger disk the rental asked for is Vast's storage price, not
   * a repricing. Undefined when Vast did not say its price yet.
   */
  private overQuote(inst: VastInstance, quote: VastQuote): string | null | undefined {
    const dph = inst.dph_total;
    const atOfferDisk = typeof dph === 'number' ? dph - extraDiskUsdPerHour(inst, this.options.diskGb) : dph;
    return vastOverQuote({ ...inst, dph_total: atOfferDisk }, quote);
  }

  /**
   * Reads the new instance's price (`dph_total`, and its per-GB traffic prices) and compares it
   * with what its offer was quoted at. A host can reprice an ask after accept; renting on would
   * lose money every hour (or every gigabyte), so an instance over the quote is destroyed and the
   * attempt answered `unavailable`, and the host tries its next candidate. When the price cannot be read now, the quote is kept and compared
   * on the next poll instead; an instance over it then reads as failed. When the destroy fails,
   * the instance is answered `created` and reads as failed, so the host destroys it: answering
   * `unavailable` would leave a billing machine under a label the host no longer watches.
   */
  private async checkPrice(instanceId: string, label: string, offer: OfferRef): Promise<CreateResult | null> {
    if (offer.costPerHourMinor === undefined) return null;
    const quote: VastQuote = { costPerHourMinor: offer.costPerHourMinor, trafficPrice: offer.trafficPrice };
    let inst: VastInstance | null;
    try {
      inst = await this.client.showInstance(instanceId);
    } catch (err) {
      this.deps.logger.warn(
        { provider: this.id, instanceId, label, err: (err as Error).message },
        "could not read the new instance's price; comparing it on the next poll",
      );
      inst = null;
    }
    const over = inst ? this.overQuote(inst, quote) : undefined;
    if (over === undefined) {
      this.quotes.set(instanceId, quote);
      return null;
    }
    if (over === null) return null;
    const reason = `vast ask ${offer.key}: ${over}`;
    try {
      await this.client.destroyInstance(instanceId);
      this.all.invalidate();
    } catch (err) {
      this.repriced.set(instanceId, reason);
      this.deps.logger.error(
        { provider: this.id, instanceId, label, reason, err: (err as Error).message },
        'vast repriced the instance and destroying it failed; it will read as failed',
      );
      return null;
    }
    this.deps.logger.warn(
      { provider: this.id, instanceId, label, reason },
      'vast repriced the instance after accept; destroyed it, trying the next offer',
    );
    return { kind: 'unavailable', reason: `${reason}; destroyed` };
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
      this.deps.logger.warn(
        { provider: this.id, instanceId, label, err: (err as Error).message },
        'attaching the SSH key got no answer; trying again on the next poll',
      );
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
      this.deps.logger.warn(
        { provider: this.id, instanceId, label, reason },
        'attaching the SSH key failed; trying again on the next poll',
      );
      return;
    }
    this.pendingKeys.delete(label);
    if (rule.read === 'auth' || FATAL_KEY_CODES.includes(vastErrorCode(res) ?? '')) {
      this.keyRefused.set(instanceId, reason);
      this.deps.logger.error(
        { provider: this.id, instanceId, label, reason },
        'vast refused our SSH key for the instance; it will read as failed',
      );
    } else {
      this.deps.logger.error(
        { provider: this.id, instanceId, label, reason },
        'vast refused our SSH key; not retrying (the host SSH check decides readiness)',
      );
    }
  }

  /** Compares a quote kept at create with the price Vast now states, once it states one. */
  private recheckPrice(inst: VastInstance): void {
    const instanceId = String(inst.id);
    const quote = this.quotes.get(instanceId);
    if (quote === undefined) return;
    const reason = this.overQuote(inst, quote);
    if (reason === undefined) return;
    this.quotes.delete(instanceId);
    if (reason !== null) {
      this.repriced.set(instanceId, reason);
      this.deps.logger.warn(
        { provider: this.id, instanceId, label: inst.label, reason },
        'vast repriced the instance after accept; it will read as failed',
      );
    }
  }

  /** Our state: a refused key or a price over the quote first, then Vast's status fields. */
  private stateOf(inst: VastInstance): { state: InstanceInfo['state']; providerState: string } {
    const instanceId = String(inst.id);
    const status = describeVastStatus(inst);
    if (this.keyRefused.has(instanceId)) return { state: 'failed', providerState: `${status} (ssh key refused)` };
    const repriced = this.repriced.get(instanceId);
    if (repriced) return { state: 'failed', providerState: `${status} (repriced: ${repriced})` };
    const reading = readVastState(inst);
    const state = this.states.read(instanceId, inst.actual_status ?? 'null', reading);
    if (state === 'failed' && !this.failureLogged.has(instanceId)) {
      // Once per instance: the host may read a failed instance several times before it is destroyed.
      this.failureLogged.add(instanceId);
      const statusMsg = inst.status_msg ? withoutEnvValues(inst.status_msg, inst).slice(0, 500) : null;
      this.deps.logger.warn(
        { provider: this.id, instanceId, label: inst.label, providerState: status, statusMsg },
        'vast reports an instance that cannot run',
      );
    }
    // Docker's start errors can quote the container's variables: the rental's values never reach a log.
    const why = reading.kind === 'known' && reading.why ? withoutEnvValues(reading.why, inst) : undefined;
    return { state, providerState: why ? `${status}: ${why.replace(/\s+/g, ' ').slice(0, 300)}` : status };
  }

  private async info(inst: VastInstance): Promise<InstanceInfo> {
    const instanceId = String(inst.id);
    const label = inst.label ?? '';
    this.recheckPrice(inst);
    const { state, providerState } = this.stateOf(inst);
    // Vast's billed counters, on every answer that carries them: a destroyed instance's last ones too.
    const traffic = vastTraffic(inst);
    if (state === 'gone') {
      this.forget(instanceId);
      return { instanceId, label, state, providerState, ...(traffic ? { traffic } : {}) };
    }
    if (label && state !== 'failed') await this.ensureKey(instanceId, label);
    // A refusal found by this very attachment turns the instance failed now, not on the next poll.
    const out: InstanceInfo =
      this.keyRefused.has(instanceId) && state !== 'failed'
        ? { instanceId, label, ...this.stateOf(inst) }
        : { instanceId, label, state, providerState };
    const ssh = vastSsh(inst);
    if (ssh) out.ssh = ssh;
    const endpoints = vastEndpoints(inst);
    if (endpoints) out.endpoints = endpoints;
    const phase = out.state === 'pending' ? vastStartupPhase(inst) : undefined;
    if (phase) out.startupPhase = phase;
    if (traffic) out.traffic = traffic;
    return out;
  }

  /** Drops what this process kept about an instance that is destroyed or gone. */
  private forget(instanceId: string): void {
    this.states.forget(instanceId);
    this.keyRefused.delete(instanceId);
    this.attached.delete(instanceId);
    this.quotes.delete(instanceId);
    this.repriced.delete(instanceId);
    this.failureLogged.delete(instanceId);
  }

  /** The instance carrying `label`, from every page of the label-filtered list; destroyed ones do not count. */
  private async findRaw(label: string): Promise<VastInstance | null> {
    const listed = await this.client.listInstances({ label: { eq: label } });
    return pickByLabel(listed, label, {
      labelOf: (i) => i.label ?? undefined,
      live: (i) => !isFinalVastStatus(i),
      older: (a, b) => a.id - b.id,
      idOf: (i) => String(i.id),
      logger: this.deps.logger.child({ provider: this.id }),
    });
  }

  async findByLabel(label: string, sshPublicKey?: string): Promise<InstanceInfo | null> {
    const inst = await this.findRaw(label);
    if (!inst) return null;
    // Adoption by a process that did not make the create (a restart): the host's key is the one to deliver.
    if (sshPublicKey && !this.pendingKeys.has(label) && this.attached.get(String(inst.id)) !== sshPublicKey)
      this.pendingKeys.set(label, sshPublicKey);
    return this.info(inst);
  }

  async get(instanceId: string): Promise<InstanceInfo> {
    if (!isVastId(instanceId)) return { instanceId, label: '', state: 'gone' };
    const inst = await listThenGet(
      this.all,
      instanceId,
      (i) => String(i.id),
      (id) => this.client.showInstance(id),
    );
    if (!inst) {
      this.forget(instanceId);
      return { instanceId, label: '', state: 'gone', providerState: 'destroyed' };
    }
    return this.info(inst);
  }

  /** Destroys the instance; every recorded form of "already gone" counts as done. */
  async destroy(instanceId: string): Promise<void> {
    if (!isVastId(instanceId)) return;
    await this.client.destroyInstance(instanceId);
    this.all.invalidate();
    this.forget(instanceId);
  }

  async listInstances(): Promise<InstanceInfo[]> {
    const mine = (await this.all.get()).filter(
      (i) => typeof i.label === 'string' && i.label.startsWith(this.deps.labelPrefix) && !isFinalVastStatus(i),
    );
    return Promise.all(mine.map((i) => this.info(i)));
  }

  async afterDestroyed(label: string): Promise<void> {
    this.pendingKeys.delete(label);
  }

  /** Read-only: the key, the account's credit, and one offer search counted by drop reason (`check.ts`). */
  check(): Promise<ProviderCheck> {
    return checkVast(this.client, this.options);
  }

  async close(): Promise<void> {
    this.pendingKeys.clear();
    this.attached.clear();
  }
}
