import { inTransaction } from '../../../db/transaction.js';
import type { InstanceInfo, Provider } from '../../../providers/provider.js';
import { cheapestOffersOfShape, offersByIds } from '../../inventory/offers.repository.js';
import { recordProviderError } from '../../inventory/provider-status.repository.js';
import { describeUntrustedEndpoint, sshEndpointProblem } from '../../../providers/ssh-endpoint.js';
import { generateDeploymentKeyPair } from '../../../providers/ssh-keys.js';
import { slugsOfGpuKey } from '../../inventory/offer-candidates.js';
import { offerCapabilities, type Offer } from '../../inventory/offer.entity.js';
import { offerLabel, unmetSetting } from '../machine-settings.js';
import { MAX_CANDIDATES } from '../rental-limits.js';
import type { Deployment } from '../deployment.entity.js';
import { DeploymentAttempt, type AttemptOutcome } from '../deployment-attempt.entity.js';
import type { Order } from '../order.entity.js';
import { isOneOf, PROVISIONING_STATUSES, type MachinePhase } from '../rental-status.js';
import { transition } from '../rental-state.js';
import { decideCreateStep, NOTHING_CREATED } from './create-step.js';
import {
  assignAttempt,
  clearInstance,
  findDeployment,
  recordUsable,
  insertAttempt,
  lastAttempt,
  recordAttemptOutcome,
  recordInstance,
  recordSshAddress,
  setPhase,
  storeSshKey,
  type AttemptAssignment,
} from '../deployments.repository.js';
import { machineSettingsOf, wrapStartupScript } from '../machine-secrets.js';
import { instanceLabel } from './labels.js';
import { MachineChecker, type MachineCheck } from './machine-check.js';
import { enqueueFor, type LifecycleDeps, type LifecycleTiming } from './lifecycle-deps.js';
import { getOrder, setOrderHourlyPrice } from '../orders.repository.js';
import type { Reversal } from './reversal.js';
import { waitsForCapacity, type CapacityWait } from './capacity-wait.js';
import type { Expiring } from './expiring.js';
import {
  answered,
  postTimeBeforeActive,
  runsRentersSettings,
  WORKED_BUT_UNCHECKED_REASON,
} from './time-before-active.js';

type RunOutcome = 'done' | 'created' | 'asked';

/**
 * The provision job: seals the deployment's SSH key, makes create attempts (one label each,
 * recorded before the call), adopts what a label turns up, and polls until SSH answers. Every
 * step reads MySQL first, so a run repeated or resumed after a crash converges.
 */
export class Provisioning {
  constructor(
    private readonly deps: Pick<LifecycleDeps, 'ds' | 'clock' | 'logger' | 'providers' | 'jobs' | 'box' | 'ledger'>,
    private readonly timing: LifecycleTiming,
    private readonly reversal: Reversal,
    private readonly capacity: CapacityWait,
    private readonly expiring: Pick<Expiring, 'schedule'>,
    // `rental.provision` runs several at once per worker: one account's machines get only their share.
    private readonly checker = new MachineChecker(deps, timing.sshTimeoutMs),
  ) {}

  private now(): Date {
    return this.deps.clock.now();
  }

  private poll(deploymentId: string, delayMs: number): Promise<void> {
    return enqueueFor(this.deps.jobs, 'rental.provision', deploymentId, delayMs);
  }

  async provision(deploymentId: string): Promise<void> {
    const { ds } = this.deps;
    let d = await findDeployment(ds, deploymentId);
    if (!d) return;
    if (d.status === 'FAILED') return this.reversal.settle(d);
    if (!isOneOf(PROVISIONING_STATUSES, d.status)) return;
    if (d.terminateRequestedAt) return enqueueFor(this.deps.jobs, 'rental.terminate', d.id);
    let order = await getOrder(ds, d.orderId);
    if (d.status === 'PENDING' && waitsForCapacity(order)) {
      if (!(await this.capacity.look(d, order))) return;
      [d, order] = [(await findDeployment(ds, deploymentId))!, await getOrder(ds, d.orderId)];
    }

    // The key exists (sealed) before any create call, so the instance is never reachable with a key we lost.
    if (!d.sshPrivateKeyEnc) {
      const pair = generateDeploymentKeyPair(`gpu-rental-${d.id}`);
      const sealed = this.deps.box.seal(pair.privateKey, d.id);
      await storeSshKey(
        ds,
        d.id,
        { sshPublicKey: pair.publicKey, sshPrivateKeyEnc: sealed.ciphertext, sshKeyKid: sealed.keyId },
        this.now(),
      );
    }
    if (d.status === 'PENDING')
      await inTransaction(ds, (m) => transition(m, deploymentId, ['PENDING'], 'PROVISIONING', { at: this.now() }));
    d = (await findDeployment(ds, deploymentId))!;
    if (d.status !== 'PROVISIONING') return;

    if (!d.instanceId) {
      if ((await this.createInstance(d, order)) === 'done') return;
      d = (await findDeployment(ds, deploymentId))!;
      if (!d.instanceId) return;
      if (d.status !== 'PROVISIONING') return enqueueFor(this.deps.jobs, 'rental.terminate', d.id);
    }
    await this.pollUntilActive(d, order);
  }

  /** The create candidates, cheapest first, from the order (never a live provider search). */
  private async candidates(order: Order, d: Deployment): Promise<Offer[]> {
    const { ds } = this.deps;
    let ids = order.candidateOfferIds ?? (order.offerId ? [order.offerId] : null);
    if (!ids && order.requestKind === 'INTENT' && order.gpuSlug) {
      const rows = await cheapestOffersOfShape(
        ds,
        {
          slugs: slugsOfGpuKey(order.gpuSlug),
          gpuCount: order.gpuCount,
          maxHourlyPriceMinor: order.maxHourlyPriceMinor,
        },
        MAX_CANDIDATES,
      );
      ids = rows.map((o) => o.id);
    }
    if (!ids && d.offerId) ids = [d.offerId];
    const found = await offersByIds(ds, ids ?? []);
    const byId = new Map(found.map((o) => [o.id, o]));
    const limit = order.requestKind === 'OFFER' ? 1 : MAX_CANDIDATES;
    return (ids ?? [])
      .map((id) => byId.get(id))
      .filter((o): o is Offer => !!o)
      .slice(0, limit);
  }

  private async markAttempt(
    a: DeploymentAttempt,
    outcome: AttemptOutcome,
    detail: string | null,
    patch: Partial<DeploymentAttempt> = {},
  ): Promise<void> {
    await recordAttemptOutcome(this.deps.ds, a.id, {
      instanceId: null,
      ...patch,
      outcome,
      detail: detail?.slice(0, 512) ?? null,
      updatedAt: this.now(),
    });
  }

  private async adopt(d: Deployment, a: DeploymentAttempt, instanceId: string, outcome: AttemptOutcome): Promise<void> {
    await this.markAttempt(a, outcome, null, { instanceId });
    // Written whatever the status: a termination requested meanwhile must find the instance to destroy.
    await recordInstance(this.deps.ds, d.id, instanceId, this.now());
  }

  /** Runs the create attempts as {@link decideCreateStep} directs; 'done' when this run has nothing further to do. */
  private async createInstance(d: Deployment, order: Order): Promise<'done' | 'created'> {
    const candidates = await this.candidates(order, d);
    for (;;) {
      const prev = await lastAttempt(this.deps.ds, d.id);
      const provider = prev ? this.deps.providers.get(prev.providerId) : null;
      // A re-run first asks for the label: the previous run may have created the instance and crashed.
      const found =
        prev && provider && !NOTHING_CREATED.includes(prev.outcome)
          ? await provider.findByLabel(prev.label, d.sshPublicKey ?? undefined)
          : null;
      const now = this.now().getTime();
      const step = decideCreateStep({
        requestKind: order.requestKind,
        last: prev?.outcome ?? null,
        foundByLabel: !!found,
        sinceAttemptMs: prev ? now - prev.createdAt.getTime() : 0,
        retryInMs: prev?.retryAt ? prev.retryAt.getTime() - now : 0,
        candidatesLeft: candidates.length - (prev?.attempt ?? 0),
        timing: this.timing,
      });
      let outcome: RunOutcome;
      if (step.kind === 'adopt') {
        await this.adopt(d, prev!, found!.instanceId, prev!.outcome === 'AMBIGUOUS' ? 'ADOPTED' : 'CREATED');
        return 'created';
      } else if (step.kind === 'wait' || (step.kind === 'retry-same-label' && step.delayMs > 0)) {
        await this.poll(d.id, step.delayMs);
        return 'done';
      } else if (step.kind === 'fail') {
        if (prev && step.attemptOutcome)
          await this.markAttempt(prev, step.attemptOutcome, 'no instance carried the label within the bound');
        await this.reversal.fail(d.id, step.code, step.reason);
        return 'done';
      } else if (step.kind === 'retry-same-label') {
        // Nothing carries the label and no create is in flight: the same label is safe to ask again.
        const offer = candidates.find((o) => o.id === prev!.offerId);
        if (!offer) {
          await this.markAttempt(prev!, 'UNAVAILABLE', 'the offer of this attempt is no longer cached');
          continue;
        }
        outcome = await this.callCreate(d, order, prev!, offer, provider!);
      } else {
        // Re-read: a termination may have come in between attempts.
        const fresh = (await findDeployment(this.deps.ds, d.id))!;
        if (fresh.terminateRequestedAt || fresh.status !== 'PROVISIONING') {
          await enqueueFor(this.deps.jobs, 'rental.terminate', d.id);
          return 'done';
        }
        const offer = candidates[prev?.attempt ?? 0];
        const attempt = await this.recordAttempt(fresh, (prev?.attempt ?? 0) + 1, offer);
        outcome = await this.callCreate(fresh, order, attempt, offer, this.deps.providers.get(offer.provider));
      }
      if (outcome !== 'asked') return outcome;
      d = (await findDeployment(this.deps.ds, d.id))!;
    }
  }

  /** Records attempt `n` before its call, so a crash during it leaves the label to look for. */
  private async recordAttempt(d: Deployment, n: number, offer: Offer): Promise<DeploymentAttempt> {
    const now = this.now();
    const label = instanceLabel(d.id, n);
    const attempt = Object.assign(new DeploymentAttempt(), {
      deploymentId: d.id,
      attempt: n,
      offerId: offer.id,
      providerId: offer.provider,
      label,
      outcome: 'STARTED',
      instanceId: null,
      detail: null,
      retryAt: null,
      createdAt: now,
      updatedAt: now,
    });
    const patch: AttemptAssignment = {
      attempt: n,
      label,
      offerId: offer.id,
      providerId: offer.provider,
      updatedAt: now,
    };
    // Metered rentals pay the price of the offer that runs; legacy keeps the quoted price.
    const metered = d.billingModel !== 'LEGACY_PREPAID';
    if (metered) patch.hourlyPriceMinor = offer.pricePerHourMinor;
    await inTransaction(this.deps.ds, async (m) => {
      await insertAttempt(m, attempt);
      await assignAttempt(m, d.id, patch);
      if (metered) await setOrderHourlyPrice(m, d.orderId, offer.pricePerHourMinor);
    });
    await setPhase(this.deps.ds, d.id, 'creating', now);
    return attempt;
  }

  /** One create call; 'asked' when the loop must decide again from what was recorded. */
  private async callCreate(
    d: Deployment,
    order: Order,
    a: DeploymentAttempt,
    offer: Offer,
    provider: Provider,
  ): Promise<RunOutcome> {
    const settings = machineSettingsOf(this.deps.box, order);
    // Capabilities may have changed since admission: a plugin never receives a setting its offer does not declare.
    const unmet = unmetSetting(settings, offerCapabilities(offer), offerLabel(offer.name, offer.provider));
    if (unmet) {
      await this.markAttempt(a, 'UNAVAILABLE', unmet);
      return 'asked';
    }
    const machine =
      settings.startupScript === null
        ? settings
        : { ...settings, startupScript: wrapStartupScript(settings.startupScript) };
    let result;
    try {
      const ref = {
        id: offer.id,
        key: offer.providerOfferKey,
        name: offer.name,
        gpuCount: offer.gpuCount,
        costPerHourMinor: offer.costPerHourMinor ?? undefined,
      };
      result = await provider.create(a.label, ref, d.sshPublicKey!, machine);
    } catch (err) {
      result = { kind: 'ambiguous' as const, reason: (err as Error).message };
    }
    switch (result.kind) {
      case 'created':
        await this.adopt(d, a, result.instanceId, 'CREATED');
        return 'created';
      case 'unavailable':
        await this.markAttempt(a, 'UNAVAILABLE', result.reason);
        return 'asked';
      case 'rejected':
        // Our request or configuration is wrong: the operator must hear of it, in the log and on
        // GET /api/v1/providers; the customer gets a safe reason.
        this.deps.logger.error(
          { deploymentId: d.id, provider: provider.id, label: a.label, reason: result.reason },
          'provider rejected the create request',
        );
        await recordProviderError(this.deps.ds, provider.id, result.errorClass ?? 'request', this.now());
        await this.markAttempt(a, 'REJECTED', result.reason);
        return 'asked';
      case 'throttled': {
        const delayMs = Math.max(result.retryAfterMs, this.timing.pollMs);
        await this.markAttempt(a, 'THROTTLED', result.reason, { retryAt: new Date(this.now().getTime() + delayMs) });
        this.deps.logger.warn(
          { deploymentId: d.id, provider: provider.id, retryAfterMs: result.retryAfterMs },
          'provider throttled the create; asking again with the same label',
        );
        await this.poll(d.id, delayMs);
        return 'done';
      }
      case 'ambiguous':
        await this.markAttempt(a, 'AMBIGUOUS', result.reason);
        this.deps.logger.warn(
          { deploymentId: d.id, label: a.label },
          'ambiguous create; looking the instance up by label',
        );
        return 'asked';
    }
  }

  /**
   * Polls the instance until it is usable (see {@link checkMachine}): SSH with the rental's own
   * key, the GPUs the offer promised, the startup script started. The rental shows the phase it is
   * in. A machine with fewer GPUs than promised is destroyed and, for a GPU intent, the next
   * candidate is tried.
   */
  private async pollUntilActive(d: Deployment, order: Order): Promise<void> {
    const { ds, clock, logger } = this.deps;
    const provider = this.deps.providers.get(d.providerId!);
    let info: InstanceInfo;
    try {
      info = await provider.get(d.instanceId!);
    } catch (err) {
      logger.warn({ err, deploymentId: d.id }, 'provider get failed; polling again');
      return this.poll(d.id, this.timing.pollMs);
    }
    if (info.state === 'failed' || info.state === 'gone' || info.state === 'stopped') {
      return this.reversal.fail(
        d.id,
        'PROVISIONING_FAILED',
        d.usableAt ? WORKED_BUT_UNCHECKED_REASON.stopped : 'The machine failed to start; your rental was not started.',
      );
    }
    const ssh = info.state === 'running' ? this.acceptedEndpoint(d, info) : undefined;
    if (ssh && (ssh.host !== d.sshHost || ssh.port !== d.sshPort)) {
      // Recorded as soon as known: a termination before ACTIVE must probe this address.
      await recordSshAddress(ds, d.id, ssh);
    }
    // Judged before a check (none starts past the bound) and again after it (its time counts).
    const since = (await lastAttempt(this.deps.ds, d.id))?.createdAt ?? d.statusChangedAt ?? d.createdAt;
    const pastBound = () => clock.now().getTime() - since.getTime() > this.timing.activeBoundMs;
    let phase: MachinePhase | null = info.startupPhase ?? 'booting';
    if (ssh) {
      const want = async () => ({
        gpus: (await this.offerOf(d))?.gpuCount ?? 0,
        startupScript: order.startupScriptSha256 !== null,
      });
      const check = pastBound() ? null : await this.checker.check(d, ssh, info.sshHostKey, await want());
      if (check?.kind === 'usable') return this.activate(d, ssh, this.acceptedEndpoints(d, order, info));
      // Fewer GPUs than promised at a machine's first answer is the cloud's doing; after answers
      // without it, the machine is one whose check keeps failing (its time is charged).
      if (check?.kind === 'gpu_mismatch' && !d.usableAt) return this.gpuMismatch(d, check);
      // From its first answer a machine running the rental's settings works for its renter (time-before-active.ts).
      if (check && answered(check) && runsRentersSettings(order))
        d.usableAt ??= await recordUsable(ds, d.id, clock.now());
      // Not checked (past the bound, or the account's checks fill its slots): the phase stays.
      phase = check?.kind === 'gpu_mismatch' ? 'checking_gpus' : (check?.phase ?? null);
    }
    if (phase) await setPhase(ds, d.id, phase, clock.now());
    if (pastBound()) {
      const reason = d.usableAt
        ? WORKED_BUT_UNCHECKED_REASON.timeout
        : 'The machine did not become reachable in time; your rental was not started.';
      return this.reversal.fail(d.id, 'PROVISIONING_TIMEOUT', reason);
    }
    await this.poll(d.id, this.timing.pollMs);
  }

  /**
   * The endpoints the provider reported for ports the rental asked for, when they are plain
   * http(s) URLs without credentials; anything else is left out with a warning naming the cloud.
   */
  private acceptedEndpoints(d: Deployment, order: Order, info: InstanceInfo): { port: number; url: string }[] {
    const asked = new Set(order.machinePorts ?? []);
    return (info.endpoints ?? []).filter((e) => {
      let ok = false;
      try {
        const u = new URL(e.url);
        ok =
          asked.has(e.port) &&
          (u.protocol === 'http:' || u.protocol === 'https:') &&
          !u.username &&
          !u.password &&
          e.url.length <= 512;
      } catch {
        ok = false;
      }
      if (!ok)
        this.deps.logger.warn(
          { deploymentId: d.id, providerId: d.providerId, port: e.port },
          'the provider reported an endpoint that cannot be handed on; not using it',
        );
      return ok;
    });
  }

  /** The cached offer of the deployment's current attempt (rows of the cache are never deleted). */
  private async offerOf(d: Deployment): Promise<Offer | null> {
    return d.offerId ? ((await offersByIds(this.deps.ds, [d.offerId]))[0] ?? null) : null;
  }

  /**
   * Fewer GPUs than promised: the attempt is given up (its machine destroyed; the reconciler
   * destroys it later if this call fails) and the create loop decides: the next candidate of a
   * GPU intent, else the rental fails as GPU_MISMATCH.
   */
  private async gpuMismatch(d: Deployment, check: Extract<MachineCheck, { kind: 'gpu_mismatch' }>): Promise<void> {
    const { ds, logger, providers } = this.deps;
    logger.warn(
      {
        deploymentId: d.id,
        providerId: d.providerId,
        offerId: d.offerId,
        listed: check.listed,
        promised: check.promised,
      },
      'machine has fewer GPUs than its offer promised; destroying it',
    );
    try {
      await providers.get(d.providerId!).destroy(d.instanceId!);
    } catch (err) {
      logger.warn(
        { err, deploymentId: d.id },
        'destroying a machine with too few GPUs failed; the reconciler destroys it',
      );
    }
    const attempt = await lastAttempt(ds, d.id);
    if (attempt)
      await this.markAttempt(
        attempt,
        'GPU_MISMATCH',
        `nvidia-smi -L listed ${check.listed} of ${check.promised} GPUs`,
        { instanceId: d.instanceId },
      );
    await clearInstance(ds, d.id, this.now());
    await this.provision(d.id);
  }

  /**
   * The instance's SSH endpoint when it is one we may hand to agents; otherwise none (the machine
   * then never becomes ACTIVE and fails at the provisioning bound), with a warning naming the cloud.
   */
  private acceptedEndpoint(d: Deployment, info: InstanceInfo): InstanceInfo['ssh'] {
    if (!info.ssh) return undefined;
    const problem = sshEndpointProblem(info.ssh);
    if (!problem) return info.ssh;
    this.deps.logger.warn(
      { deploymentId: d.id, providerId: d.providerId, endpoint: describeUntrustedEndpoint(info.ssh) },
      `the provider reported an SSH endpoint that cannot be handed on (${problem}); not using it`,
    );
    return undefined;
  }

  /**
   * ACTIVE from now, with the endpoints of its ports; a rental with an end (a prepaid purchase, a
   * lease) gets it, its expiry job and the job of its `rental.expiring`; metered ones start accruing.
   */
  private async activate(
    d: Deployment,
    ssh: { host: string; port: number; user: string },
    endpoints: { port: number; url: string }[],
  ): Promise<void> {
    const started = this.now();
    const legacy = d.billingModel === 'LEGACY_PREPAID';
    const ends = [legacy ? d.durationSeconds : null, d.leaseSeconds].filter((s): s is number => s !== null && s > 0);
    // A machine that worked for its renter before it passed the check (time-before-active.ts):
    // a purchase's hours run from then; a metered rental pays that time in an entry of its own.
    const from = legacy && d.usableAt ? d.usableAt : started;
    const endsAt = ends.length ? new Date(from.getTime() + Math.min(...ends) * 1000) : null;
    const moved = await inTransaction(this.deps.ds, async (m) => {
      const ok = await transition(m, d.id, ['PROVISIONING'], 'ACTIVE', {
        at: started,
        deployment: {
          startedAt: started,
          endsAt,
          meteredUntil: legacy ? null : started,
          sshHost: ssh.host,
          sshPort: ssh.port,
          sshUser: ssh.user,
          endpoints: endpoints.length ? endpoints : null,
          phase: null,
          phaseSince: null,
        },
      });
      if (ok && !legacy) await postTimeBeforeActive(this.deps.ledger, m, d, started.getTime());
      return ok;
    });
    if (moved && endsAt) {
      await enqueueFor(this.deps.jobs, 'rental.expire', d.id, endsAt.getTime() - started.getTime());
      await this.expiring.schedule(d.id, started, endsAt);
    }
    if (!moved && (await findDeployment(this.deps.ds, d.id))?.status === 'TERMINATING')
      await enqueueFor(this.deps.jobs, 'rental.terminate', d.id);
  }
}
