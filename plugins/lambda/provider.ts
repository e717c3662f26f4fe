import type { Logger } from '../../src/logger.js';
import { createWithLabel } from '../../src/providers/kit/create-steps.js';
import { LabelLock } from '../../src/providers/kit/label-lock.js';
import { StateWatch } from '../../src/providers/kit/state-watch.js';
import { ProviderApiError, SharedRead } from '../../src/providers/provider-http.js';
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
import { checkLambda } from './check.js';
import {
  describeFailure,
  failureError,
  LAMBDA_LIMITS,
  LambdaClient,
  refusalReason,
  type LambdaFailure,
} from './client.js';
import { lambdaUserData, MAX_USER_DATA_BYTES, userDataProblem, withoutSecrets } from './machine.js';
import { offersFromInstanceTypes, parseOfferKey } from './offers.js';
import type { LambdaOptions } from './options.js';
import { LambdaSshKeys } from './ssh-keys.js';
import { lambdaState, lambdaStateReading } from './states.js';
import type { LambdaInstance, LambdaInstanceTypes } from './types.js';

/** The tag that carries our label: instance names can be edited in Lambda's dashboard, tags are ours. */
export const LABEL_TAG_KEY = 'gpr-label';
/** Lambda's limit on instance and SSH key names. */
export const MAX_LABEL_LENGTH = 64;
/** Lambda's images log in as `ubuntu`. */
export const LAMBDA_SSH_USER = 'ubuntu';
/** Least wait before asking again after a failure that happened before any launch was sent. */
const PRE_LAUNCH_RETRY_MS = 5000;

const labelTag = (i: LambdaInstance) => i.tags?.find((t) => t.key === LABEL_TAG_KEY)?.value;

/** Our label of an instance: its tag, else (instances tagged by nobody) its name. */
export function labelOf(i: LambdaInstance): string {
  return labelTag(i) ?? i.name ?? '';
}

/**
 * The instance carrying `label`: tags are matched first, because a name may have been edited
 * (even to another deployment's label); a name counts only on an instance without our tag.
 */
export function matchLabel(instances: LambdaInstance[], label: string): LambdaInstance | undefined {
  const live = instances.filter((i) => i.status !== 'terminated');
  return live.find((i) => labelTag(i) === label) ?? live.find((i) => labelTag(i) === undefined && i.name === label);
}

/** One launch: the offer's instance type and region, the deployment's key and the machine's settings. */
interface LaunchPlan {
  label: string;
  offer: OfferRef;
  target: { instanceType: string; region: string };
  publicKey: string;
  machine: MachineSettings;
  /** The cloud-init script carrying the settings; null when there are none. */
  userData: string | null;
}

/**
 * Lambda Cloud on-demand instances through the API v1 (documents 1.8.3 to 1.9.3, and the live
 * answers recorded beyond them): offers from `/instance-types`, one launch per label with a
 * per-deployment registered SSH key, states through one table (unknown ones bounded by the kit's
 * `StateWatch`), failures through one table, polls served by one shared `GET /instances`.
 */
export class LambdaProvider implements Provider {
  readonly id = 'lambda';
  readonly capabilities: ProviderCapabilities = { labels: true, sshKeyPerInstance: true, listInstances: true };

  private readonly client: LambdaClient;
  private readonly keys: LambdaSshKeys;
  private readonly log: Logger;
  private readonly running: SharedRead<LambdaInstance[]>;
  // Two creates for one label in this process would each launch: the second waits for the first.
  private readonly creating = new LabelLock();
  private readonly watch: StateWatch;

  constructor(
    private readonly options: LambdaOptions,
    private readonly deps: ProviderDeps,
  ) {
    this.log = deps.logger.child({ provider: 'lambda' });
    this.client = new LambdaClient({
      apiUrl: options.apiUrl,
      apiKey: options.apiKey,
      logger: this.log,
      drift: deps.drift,
      tuning: options.tuning,
    });
    this.keys = new LambdaSshKeys(this.client, this.log);
    const t = options.tuning;
    this.running = new SharedRead(
      () => this.fetchInstances(),
      t.listTtlMs ?? t.apiIntervalMs ?? LAMBDA_LIMITS.apiIntervalMs,
      t.now,
    );
    this.watch = new StateWatch({
      providerId: 'lambda',
      logger: this.log,
      drift: deps.drift,
      where: 'instance status',
      now: t.now,
      boundMs: t.unknownStateBoundMs,
    });
  }

  async listOffers(): Promise<ProviderOffer[]> {
    const r = await this.client.call<LambdaInstanceTypes>('api', 'GET', '/instance-types');
    if (!r.ok) throw failureError('GET /instance-types', r);
    if (!r.data || typeof r.data !== 'object')
      throw this.client.drift.badResponse(
        'GET /api/v1/instance-types data',
        r.data,
        'lambda GET /instance-types: data is not an object',
      );
    return offersFromInstanceTypes(r.data, {
      regions: this.options.regions,
      maximumDurationSeconds: this.options.maximumDurationSeconds,
    });
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
    publicKey: string,
    machine: MachineSettings,
  ): Promise<CreateResult> {
    if (label.length > MAX_LABEL_LENGTH)
      return { kind: 'rejected', reason: `label ${label} is longer than Lambda's ${MAX_LABEL_LENGTH}-character limit` };
    const target = parseOfferKey(offer.key);
    if (!target) return { kind: 'rejected', reason: `offer key "${offer.key}" is not <instance type>@<region>` };
    // Settings Lambda could not take are refused before anything is registered or launched.
    const problem = userDataProblem(machine);
    if (problem) return { kind: 'rejected', reason: `lambda cannot set up the machine: ${problem}` };
    const userData = lambdaUserData(machine, LAMBDA_SSH_USER);
    const size = userData === null ? 0 : Buffer.byteLength(userData, 'utf8');
    if (size > MAX_USER_DATA_BYTES) {
      return {
        kind: 'rejected',
        reason: `lambda cannot set up the machine: its variables and startup script make ${size} bytes of user_data, over Lambda's ${MAX_USER_DATA_BYTES}`,
      };
    }

    // No idempotency key exists: an instance already carrying the label is this attempt's.
    return createWithLabel({
      label,
      lookup: async () => matchLabel(await this.fetchInstances(), label) ?? null,
      adopt: (existing) => ({ kind: 'created', instanceId: existing.id }),
      send: () => this.launch({ label, offer, target, publicKey, machine, userData }),
    });
  }

  /** Registers the label's SSH key, then launches; failures before the launch are Lambda's own step. */
  private async launch(l: LaunchPlan): Promise<CreateResult> {
    const { label, offer, target, publicKey, userData } = l;
    let key: { ok: true } | LambdaFailure;
    try {
      key = await this.keys.ensure(label, publicKey);
    } catch (err) {
      return this.beforeLaunch('registering the SSH key', err);
    }
    if (!key.ok) return this.beforeLaunch('registering the SSH key', key);

    const body = {
      region_name: target.region,
      instance_type_name: target.instanceType,
      ssh_key_names: [label],
      name: label,
      tags: [{ key: LABEL_TAG_KEY, value: label }],
      // Only when the rental asked for something: a launch without settings stays as it always was.
      ...(userData === null ? {} : { user_data: userData }),
    };
    let r;
    try {
      r = await this.client.call<{ instance_ids?: unknown }>('launch', 'POST', '/instance-operations/launch', body);
    } catch (err) {
      this.running.invalidate();
      return { kind: 'ambiguous', reason: `launch got no answer: ${(err as Error).message}` };
    }
    this.running.invalidate();
    if (r.ok) {
      const ids = r.data?.instance_ids;
      const id = Array.isArray(ids) ? ids[0] : undefined;
      if (typeof id !== 'string' || id === '') {
        this.client.drift.unknownFieldShape('POST /api/v1/instance-operations/launch data', r.data);
        return { kind: 'ambiguous', reason: 'launch answered without an instance id' };
      }
      // Variable names are not secret (rentals show them); values and the script never reach a log.
      const settings =
        userData === null
          ? {}
          : { envNames: Object.keys(l.machine.env), startupScript: l.machine.startupScript !== null };
      this.log.info({ label, instanceId: id, offerKey: offer.key, ...settings }, 'lambda instance launched');
      return { kind: 'created', instanceId: id };
    }
    // Lambda's words about a launch that carried the agent's secrets are cleaned before any log line holds them.
    const told =
      userData === null
        ? r
        : {
            ...r,
            message: withoutSecrets(r.message, l.machine),
            suggestion: r.suggestion && withoutSecrets(r.suggestion, l.machine),
          };
    const reason = refusalReason(`launch ${offer.key}`, told);
    switch (r.rule.create) {
      case 'throttled':
        return { kind: 'throttled', reason, retryAfterMs: r.retryAfterMs ?? this.client.waitMs('launch') };
      case 'ambiguous':
        return { kind: 'ambiguous', reason };
      case 'unavailable':
        // Lambda said no for sure (a 404 on launch names the instance type or region: the offer is gone).
        await this.releaseAfterFailedLaunch(label);
        return { kind: 'unavailable', reason };
      case 'rejected':
        await this.releaseAfterFailedLaunch(label);
        return { kind: 'rejected', reason, errorClass: r.rule.read === 'auth' ? 'auth' : 'request' };
    }
  }

  /**
   * A failure before any launch was sent: nothing exists for this label. Transient ones ask the
   * host to come back with the same label (`throttled`), which is exactly the safe retry.
   */
  private beforeLaunch(what: string, failure: unknown): CreateResult {
    if (failure instanceof Error) {
      const cls = failure instanceof ProviderApiError ? failure.errorClass : 'internal';
      const reason = `${what} failed before any launch: ${failure.message}`;
      if (cls === 'auth' || cls === 'request') return { kind: 'rejected', reason, errorClass: cls };
      const told = failure instanceof ProviderApiError ? failure.retryAfterMs : undefined;
      return { kind: 'throttled', reason, retryAfterMs: Math.max(told ?? 0, PRE_LAUNCH_RETRY_MS) };
    }
    const f = failure as LambdaFailure;
    const reason = refusalReason(`${what} (before any launch)`, f);
    if (f.rule.read === 'gone' || f.rule.create === 'rejected')
      return { kind: 'rejected', reason, errorClass: f.rule.read === 'auth' ? 'auth' : 'request' };
    if (f.rule.create === 'unavailable') return { kind: 'unavailable', reason };
    return { kind: 'throttled', reason, retryAfterMs: Math.max(f.retryAfterMs ?? 0, PRE_LAUNCH_RETRY_MS) };
  }

  /** Lambda said no for sure, so the key registered for this label has nothing left to open. */
  private async releaseAfterFailedLaunch(label: string): Promise<void> {
    try {
      await this.keys.release(label);
    } catch (err) {
      this.log.warn(
        { label, err: (err as Error).message },
        'could not delete the ssh key of a refused launch; afterDestroyed or a later attempt will',
      );
    }
  }

  async findByLabel(label: string): Promise<InstanceInfo | null> {
    const hit = matchLabel(await this.fetchInstances(), label);
    return hit ? this.info(hit) : null;
  }

  async get(instanceId: string): Promise<InstanceInfo> {
    const listed = (await this.running.get()).find((i) => i.id === instanceId);
    if (listed) return this.info(listed);
    // Not in the (possibly slightly older) list: only the instance's own answer may say gone.
    const r = await this.client.call<LambdaInstance>('api', 'GET', `/instances/${encodeURIComponent(instanceId)}`);
    if (r.ok) return this.info(r.data);
    if (r.rule.read === 'gone') {
      this.watch.forget(instanceId);
      return { instanceId, label: '', state: 'gone', providerState: 'not found', httpStatus: r.status };
    }
    throw failureError(`GET /instances/${instanceId}`, r);
  }

  /**
   * Terminates one instance (one id per call: an unknown id fails the whole batch). Idempotent:
   * an id Lambda no longer knows is done, and any other refusal but a refused key or the rate
   * limit (live: `global/unknown` for an instance already terminating; documented: terminate
   * unavailable with `vm-is-terminating`) is settled by the instance's own state: terminating,
   * terminated or gone means the terminate we asked for has happened.
   */
  async destroy(instanceId: string): Promise<void> {
    const r = await this.client.call<object>('api', 'POST', '/instance-operations/terminate', {
      instance_ids: [instanceId],
    });
    this.running.invalidate();
    if (r.ok || r.rule.read === 'gone') return this.watch.forget(instanceId);
    if (r.rule.read !== 'auth' && r.rule.read !== 'rate_limited') {
      const ending = await this.statusIfEnding(instanceId);
      if (ending) {
        this.log.info(
          { instanceId, status: ending, failure: describeFailure(r) },
          'lambda refused the terminate of an instance already ending; counted as done',
        );
        return this.watch.forget(instanceId);
      }
    }
    throw failureError(`terminate ${instanceId}`, r);
  }

  /** The instance's status when it is terminating, terminated or gone; null when it is not, or the read failed. */
  private async statusIfEnding(instanceId: string): Promise<string | null> {
    let now;
    try {
      now = await this.client.call<LambdaInstance>('api', 'GET', `/instances/${encodeURIComponent(instanceId)}`);
    } catch {
      return null;
    }
    if (!now.ok) return now.rule.read === 'gone' ? 'gone' : null;
    const state = lambdaState(now.data?.status);
    return state === 'terminating' || state === 'gone' ? (now.data?.status ?? state) : null;
  }

  async listInstances(): Promise<InstanceInfo[]> {
    const all = await this.fetchInstances();
    return all
      .filter((i) => i.status !== 'terminated' && labelOf(i).startsWith(this.deps.labelPrefix))
      .map((i) => this.info(i));
  }

  async afterDestroyed(label: string): Promise<void> {
    await this.keys.release(label);
  }

  /** Read-only: the instance types (the key, the offers by drop reason), the SSH keys and the instance list (`check.ts`). */
  check(): Promise<ProviderCheck> {
    return checkLambda(this.client, this.options);
  }

  async close(): Promise<void> {
    this.running.invalidate();
  }

  private async fetchInstances(): Promise<LambdaInstance[]> {
    const r = await this.client.call<LambdaInstance[]>('api', 'GET', '/instances');
    if (!r.ok) throw failureError('GET /instances', r);
    if (!Array.isArray(r.data))
      throw this.client.drift.badResponse(
        'GET /api/v1/instances data',
        r.data,
        'lambda GET /instances: data is not a list',
      );
    return r.data;
  }

  private info(i: LambdaInstance): InstanceInfo {
    const raw = typeof i.status === 'string' ? i.status : '';
    const out: InstanceInfo = {
      instanceId: i.id,
      label: labelOf(i),
      state: this.watch.read(i.id, raw, lambdaStateReading(raw)),
      providerState: i.status,
    };
    if (i.ip) out.ssh = { host: i.ip, port: this.options.sshPort, user: LAMBDA_SSH_USER };
    // Lambda says only that the machine boots (no image is pulled); no port is ever exposed, so no endpoints.
    if (raw === 'booting') out.startupPhase = 'booting';
    return out;
  }
}
