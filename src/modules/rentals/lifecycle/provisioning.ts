import type { InstanceInfo } from '../../../providers/provider.js';
import { generateDeploymentKeyPair } from '../../../providers/ssh-keys.js';
import { type Offer } from '../../inventory/offer.entity.js';
import type { Deployment } from '../store/deployment.entity.js';
import type { Order } from '../store/order.entity.js';
import { isOneOf, PROVISIONING_STATUSES, type MachinePhase } from '../state/rental-status.js';
import { transition } from '../state/rental-state.js';
import { acceptedEndpoint, acceptedEndpoints } from './accepted-endpoints.js';
import { CreateAttempts } from './create-attempts.js';
import { MachineChecker, type MachineCheck } from './machine-check.js';
import { enqueueFor, type LifecycleDeps, type LifecycleTiming } from './lifecycle-deps.js';
import type { Reversal } from './reversal.js';
import { waitsForCapacity, type CapacityWait } from './capacity-wait.js';
import type { Expiring } from './expiring.js';
import { trafficPriceOf } from './traffic.js';
import {
  answered,
  postTimeBeforeActive,
  runsRentersSettings,
  WORKED_BUT_UNCHECKED_REASON,
} from './time-before-active.js';

/**
 * The provision job: seals the deployment's SSH key, makes create attempts (one label each,
 * recorded before the call), adopts what a label turns up, and polls until SSH answers. Every
 * step reads MySQL first, so a run repeated or resumed after a crash converges.
 */
export class Provisioning {
  constructor(
    private readonly deps: Pick<LifecycleDeps, 'store' | 'clock' | 'logger' | 'providers' | 'jobs' | 'box' | 'ledger'>,
    private readonly timing: LifecycleTiming,
    private readonly reversal: Reversal,
    private readonly capacity: CapacityWait,
    private readonly expiring: Pick<Expiring, 'schedule'>,
    // `rental.provision` runs several at once per worker: one account's machines get only their share.
    private readonly checker = new MachineChecker(deps, timing.sshTimeoutMs),
    private readonly creates = new CreateAttempts(deps, timing, reversal),
  ) {}

  private now(): Date {
    return this.deps.clock.now();
  }

  private poll(deploymentId: string, delayMs: number): Promise<void> {
    return enqueueFor(this.deps.jobs, 'rental.provision', deploymentId, delayMs);
  }

  private find(deploymentId: string): Promise<Deployment | null> {
    return this.deps.store.read((r) => r.rentals.deployments.find(deploymentId));
  }

  private order(orderId: string): Promise<Order> {
    return this.deps.store.read((r) => r.rentals.orders.get(orderId));
  }

  async provision(deploymentId: string): Promise<void> {
    const { store } = this.deps;
    let d = await this.find(deploymentId);
    if (!d) return;
    if (d.status === 'FAILED') return this.reversal.settle(d);
    if (!isOneOf(PROVISIONING_STATUSES, d.status)) return;
    if (d.terminateRequestedAt) return enqueueFor(this.deps.jobs, 'rental.terminate', d.id);
    let order = await this.order(d.orderId);
    if (d.status === 'PENDING' && waitsForCapacity(order)) {
      if (!(await this.capacity.look(d, order))) return;
      [d, order] = [(await this.find(deploymentId))!, await this.order(d.orderId)];
    }

    // The key exists (sealed) before any create call, so the instance is never reachable with a key we lost.
    if (!d.sshPrivateKeyEnc) {
      const pair = generateDeploymentKeyPair(`gpu-rental-${d.id}`);
      const sealed = this.deps.box.seal(pair.privateKey, d.id);
      const key = { sshPublicKey: pair.publicKey, sshPrivateKeyEnc: sealed.ciphertext, sshKeyKid: sealed.keyId };
      await store.read((r) => r.rentals.deployments.storeSshKey(deploymentId, key, this.now()));
    }
    if (d.status === 'PENDING')
      await store.transaction((r) => transition(r, deploymentId, ['PENDING'], 'PROVISIONING', { at: this.now() }));
    d = (await this.find(deploymentId))!;
    if (d.status !== 'PROVISIONING') return;

    if (!d.instanceId) {
      if ((await this.creates.run(d, order)) === 'done') return;
      d = (await this.find(deploymentId))!;
      if (!d.instanceId) return;
      if (d.status !== 'PROVISIONING') return enqueueFor(this.deps.jobs, 'rental.terminate', d.id);
    }
    await this.pollUntilActive(d, order);
  }

  /**
   * Polls the instance until it is usable (see {@link checkMachine}): SSH with the rental's own
   * key, the GPUs the offer promised, the startup script started. The rental shows the phase it is
   * in. A machine with fewer GPUs than promised is destroyed and, for a GPU intent, the next
   * candidate is tried.
   */
  private async pollUntilActive(d: Deployment, order: Order): Promise<void> {
    const { store, clock, logger } = this.deps;
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
    // An image pull moves traffic too: the counters are kept from the first poll that shows them.
    if (info.traffic && d.label && trafficPriceOf(d)) {
      const reading = { label: d.label, ...info.traffic };
      await store.read((r) => r.rentals.metering.recordTraffic([reading], clock.now()));
    }
    const ssh = info.state === 'running' ? acceptedEndpoint(this.deps.logger, d, info) : undefined;
    if (ssh && (ssh.host !== d.sshHost || ssh.port !== d.sshPort)) {
      // Recorded as soon as known: a termination before ACTIVE must probe this address.
      await store.read((r) => r.rentals.deployments.recordSshAddress(d.id, ssh));
    }
    // Judged before a check (none starts past the bound) and again after it (its time counts).
    const last = await store.read((r) => r.rentals.attempts.last(d.id));
    const since = last?.createdAt ?? d.statusChangedAt ?? d.createdAt;
    const pastBound = () => clock.now().getTime() - since.getTime() > this.timing.activeBoundMs;
    let phase: MachinePhase | null = info.startupPhase ?? 'booting';
    if (ssh) {
      const want = async () => ({
        gpus: (await this.offerOf(d))?.gpuCount ?? 0,
        startupScript: order.startupScriptSha256 !== null,
      });
      const check = pastBound() ? null : await this.checker.check(d, ssh, info.sshHostKey, await want());
      if (check?.kind === 'usable') return this.activate(d, ssh, acceptedEndpoints(this.deps.logger, d, order, info));
      // Fewer GPUs than promised at a machine's first answer is the cloud's doing; after answers
      // without it, the machine is one whose check keeps failing (its time is charged).
      if (check?.kind === 'gpu_mismatch' && !d.usableAt) return this.gpuMismatch(d, check);
      // From its first answer a machine running the rental's settings works for its renter (time-before-active.ts).
      if (check && answered(check) && runsRentersSettings(order))
        d.usableAt ??= await store.read((r) => r.rentals.deployments.recordUsable(d.id, clock.now()));
      // Not checked (past the bound, or the account's checks fill its slots): the phase stays.
      phase = check?.kind === 'gpu_mismatch' ? 'checking_gpus' : (check?.phase ?? null);
    }
    if (phase) {
      const shown = phase;
      await store.read((r) => r.rentals.deployments.setPhase(d.id, shown, clock.now()));
    }
    if (pastBound()) {
      const reason = d.usableAt
        ? WORKED_BUT_UNCHECKED_REASON.timeout
        : 'The machine did not become reachable in time; your rental was not started.';
      return this.reversal.fail(d.id, 'PROVISIONING_TIMEOUT', reason);
    }
    await this.poll(d.id, this.timing.pollMs);
  }

  /** The cached offer of the deployment's current attempt (rows of the cache are never deleted). */
  private async offerOf(d: Deployment): Promise<Offer | null> {
    const { offerId } = d;
    return offerId ? ((await this.deps.store.read((r) => r.inventory.offers.byIds([offerId])))[0] ?? null) : null;
  }

  /**
   * Fewer GPUs than promised: the attempt is given up (its machine destroyed; the reconciler
   * destroys it later if this call fails) and the create loop decides: the next candidate of a
   * GPU intent, else the rental fails as GPU_MISMATCH.
   */
  private async gpuMismatch(d: Deployment, check: Extract<MachineCheck, { kind: 'gpu_mismatch' }>): Promise<void> {
    const { store, logger, providers } = this.deps;
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
    const attempt = await store.read((r) => r.rentals.attempts.last(d.id));
    if (attempt)
      await this.creates.markAttempt(
        attempt,
        'GPU_MISMATCH',
        `nvidia-smi -L listed ${check.listed} of ${check.promised} GPUs`,
        { instanceId: d.instanceId },
      );
    await store.read((r) => r.rentals.deployments.clearInstance(d.id, this.now()));
    await this.provision(d.id);
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
    const moved = await this.deps.store.transaction(async (r) => {
      const ok = await transition(r, d.id, ['PROVISIONING'], 'ACTIVE', {
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
      if (ok && !legacy) await postTimeBeforeActive(this.deps.ledger, r, d, started.getTime());
      return ok;
    });
    if (moved && endsAt) {
      await enqueueFor(this.deps.jobs, 'rental.expire', d.id, endsAt.getTime() - started.getTime());
      await this.expiring.schedule(d.id, started, endsAt);
    }
    if (!moved && (await this.find(d.id))?.status === 'TERMINATING')
      await enqueueFor(this.deps.jobs, 'rental.terminate', d.id);
  }
}
