import { In, type EntityManager } from 'typeorm';
import type { Services } from '../../../container.js';
import { inTransaction } from '../../../db/transaction.js';
import { DestructionVerifier } from '../../../providers/destruction-verifier.js';
import type { InstanceInfo, Provider } from '../../../providers/provider.js';
import { sshProbe, type SshTarget } from '../../../providers/ssh-probe.js';
import { generateDeploymentKeyPair } from '../../../providers/ssh-keys.js';
import { SecretBox } from '../../credentials/secret-box.js';
import { slugsOfGpuKey } from '../../inventory/offer-candidates.js';
import { Offer } from '../../inventory/offer.entity.js';
import { LedgerEntry } from '../../billing/ledger-entry.entity.js';
import { Deployment } from '../deployment.entity.js';
import { DeploymentAttempt, type AttemptOutcome } from '../deployment-attempt.entity.js';
import { Order, type RentalStatus } from '../order.entity.js';
import { RENTAL_JOBS } from '../rental-jobs.names.js';
import { rentalDebitRef } from '../rentals.service.js';

/** Prefix of every instance label (main.ts hands it to the plugins as `labelPrefix`, so reconciliation finds only our instances). */
export const LABEL_PREFIX = 'gpr-';
/** GPU-intent rentals make at most this many create calls. */
export const MAX_CREATE_ATTEMPTS = 3;

/** Timing of the lifecycle; tests shorten it. */
export interface LifecycleTiming {
  /** Delay between provisioning polls. */
  pollMs: number;
  /** How long an ambiguous create is looked for by label before the rental fails. */
  adoptBoundMs: number;
  /** How long an instance may take to become reachable before the rental fails. */
  activeBoundMs: number;
  /** First delay between destruction verifications; doubles up to `verifyMaxDelayMs`. */
  verifyBaseDelayMs: number;
  verifyMaxDelayMs: number;
  /** Failed verifications after which every further one logs an alert. */
  verifyAlertAfter: number;
  /** A deployment left this long in PENDING/PROVISIONING/TERMINATING is re-driven by the reconciler. */
  stuckAfterMs: number;
  sshTimeoutMs: number;
}

export const DEFAULT_TIMING: LifecycleTiming = {
  pollMs: 1000,
  adoptBoundMs: 60_000,
  activeBoundMs: 15 * 60_000,
  verifyBaseDelayMs: 1000,
  verifyMaxDelayMs: 60_000,
  verifyAlertAfter: 5,
  stuckAfterMs: 5 * 60_000,
  sshTimeoutMs: 3000,
};

/** Deterministic per deployment and attempt, so a re-run looks up exactly the instance it may have made. */
export function instanceLabel(deploymentId: string, attempt: number): string {
  return `${LABEL_PREFIX}${deploymentId}-${attempt}`;
}

export const reversalRef = (rentalId: string) => `rental:${rentalId}:reversal`;
export const usageRef = (deploymentId: string, untilMs: number) => `usage:${deploymentId}:${untilMs}`;

const LIVE: RentalStatus[] = ['PENDING', 'PROVISIONING', 'ACTIVE', 'TERMINATING'];
const METERED = ['ACCOUNT_BALANCE', 'MAX_SPEND_METERED'];

/**
 * Provisioning, termination with verified destruction, metering and reconciliation. Every method
 * reads the deployment from MySQL, acts, and writes the outcome back with a status-conditional
 * update, so a run repeated or resumed after a crash converges on the same state.
 */
export class RentalLifecycle {
  private readonly box: SecretBox;
  private readonly timing: LifecycleTiming;

  constructor(
    private readonly s: Services,
    timing: Partial<LifecycleTiming> = {},
  ) {
    this.box = SecretBox.fromConfig(s.config);
    this.timing = { ...DEFAULT_TIMING, pollMs: s.config.rentalPollMs, verifyBaseDelayMs: s.config.rentalPollMs, ...timing };
  }

  private now(): Date {
    return this.s.clock.now();
  }

  private load(id: string): Promise<Deployment | null> {
    return this.s.ds.getRepository(Deployment).findOneBy({ id });
  }

  /** Moves deployment and order to `status` only when the deployment is still in one of `from`. */
  private async setStatus(m: EntityManager, d: Deployment, from: RentalStatus[], status: RentalStatus, extra: Partial<Deployment> = {}): Promise<boolean> {
    const now = this.now();
    const res = await m.update(Deployment, { id: d.id, status: In(from) }, { ...extra, status, statusChangedAt: now, updatedAt: now });
    if (!res.affected) return false;
    await m.update(Order, { id: d.orderId }, { status, updatedAt: now });
    return true;
  }

  private async enqueue(name: string, deploymentId: string, delayMs = 0): Promise<void> {
    if (delayMs <= 0) await this.s.jobs.now(name, { deploymentId }, { uniqueKey: deploymentId });
    // Agenda runs on wall time; the delay is relative to it, not to the injected clock.
    else await this.s.jobs.schedule(new Date(Date.now() + delayMs), name, { deploymentId }, { uniqueKey: deploymentId });
  }

  /** Where the instance answers SSH, kept as soon as the provider says: termination probes it. */
  private async recordSshAddress(d: Deployment, ssh: { host: string; port: number; user: string }): Promise<void> {
    await this.s.ds.getRepository(Deployment).update({ id: d.id }, { sshHost: ssh.host, sshPort: ssh.port, sshUser: ssh.user });
  }

  private privateKey(d: Deployment): string {
    return this.box.open(d.sshPrivateKeyEnc!, d.sshKeyKid!, d.id);
  }

  private target(d: Deployment, ssh?: { host: string; port: number; user: string }): SshTarget | null {
    const host = ssh?.host ?? d.sshHost;
    if (!host || !d.sshPrivateKeyEnc) return null;
    return { host, port: ssh?.port ?? d.sshPort!, user: ssh?.user ?? d.sshUser!, privateKey: this.privateKey(d) };
  }

  // ---------------------------------------------------------------- provisioning

  async provision(deploymentId: string): Promise<void> {
    let d = await this.load(deploymentId);
    if (!d) return;
    if (d.status === 'FAILED') return this.settleReversal(d);
    if (d.status !== 'PENDING' && d.status !== 'PROVISIONING') return;
    if (d.terminateRequestedAt) return this.enqueue(RENTAL_JOBS.terminate, d.id);
    const order = await this.s.ds.getRepository(Order).findOneByOrFail({ id: d.orderId });

    // The key exists (sealed) before any create call, so the instance is never reachable with a key we lost.
    if (!d.sshPrivateKeyEnc) {
      const pair = generateDeploymentKeyPair(`gpu-rental-${d.id}`);
      const sealed = this.box.seal(pair.privateKey, d.id);
      await this.s.ds
        .createQueryBuilder()
        .update(Deployment)
        .set({ sshPublicKey: pair.publicKey, sshPrivateKeyEnc: sealed.ciphertext, sshKeyKid: sealed.keyId, updatedAt: this.now() })
        .where('id = :id AND ssh_private_key_enc IS NULL', { id: d.id })
        .execute();
      d = (await this.load(d.id))!;
    }
    if (d.status === 'PENDING') {
      await inTransaction(this.s.ds, (m) => this.setStatus(m, d!, ['PENDING'], 'PROVISIONING'));
      d = (await this.load(d.id))!;
      if (d.status !== 'PROVISIONING') return;
    }

    if (!d.instanceId) {
      const outcome = await this.createInstance(d, order);
      if (outcome === 'done') return;
      d = (await this.load(d.id))!;
      if (!d.instanceId) return;
      if (d.status !== 'PROVISIONING') return this.enqueue(RENTAL_JOBS.terminate, d.id);
    }
    await this.pollUntilActive(d, order);
  }

  /** The create candidates, cheapest first, from the order (never a live provider search). */
  private async candidates(order: Order, d: Deployment): Promise<Offer[]> {
    const repo = this.s.ds.getRepository(Offer);
    let ids = order.candidateOfferIds ?? (order.offerId ? [order.offerId] : null);
    if (!ids && order.requestKind === 'INTENT' && order.gpuSlug) {
      const rows = await repo
        .createQueryBuilder('o')
        .where('o.slug IN (:...slugs) AND o.gpu_count = :c AND o.price_per_hour_minor <= :max', { slugs: slugsOfGpuKey(order.gpuSlug), c: order.gpuCount, max: order.maxHourlyPriceMinor })
        .orderBy('o.price_per_hour_minor', 'ASC')
        .addOrderBy('o.id', 'ASC')
        .take(MAX_CREATE_ATTEMPTS)
        .getMany();
      ids = rows.map((o) => o.id);
    }
    if (!ids && d.offerId) ids = [d.offerId];
    const found = await repo.findBy({ id: In(ids ?? []) });
    const byId = new Map(found.map((o) => [o.id, o]));
    const limit = order.requestKind === 'OFFER' ? 1 : MAX_CREATE_ATTEMPTS;
    return (ids ?? []).map((id) => byId.get(id)).filter((o): o is Offer => !!o).slice(0, limit);
  }

  /** The newest attempt on record; read from the attempts table, which is written before the call. */
  private async lastAttempt(d: Deployment): Promise<DeploymentAttempt | null> {
    return this.s.ds.getRepository(DeploymentAttempt).findOne({ where: { deploymentId: d.id }, order: { attempt: 'DESC' } });
  }

  private async markAttempt(a: DeploymentAttempt, outcome: AttemptOutcome, instanceId: string | null, detail: string | null): Promise<void> {
    await this.s.ds.getRepository(DeploymentAttempt).update({ id: a.id }, { outcome, instanceId, detail: detail?.slice(0, 512) ?? null, updatedAt: this.now() });
  }

  private async adopt(d: Deployment, a: DeploymentAttempt, instanceId: string, outcome: AttemptOutcome): Promise<void> {
    await this.markAttempt(a, outcome, instanceId, null);
    // Written whatever the status: a termination requested meanwhile must find the instance to destroy.
    await this.s.ds.getRepository(Deployment).update({ id: d.id }, { instanceId, updatedAt: this.now() });
  }

  /** Runs the create attempts; 'done' when the job has nothing further to do in this run. */
  private async createInstance(d: Deployment, order: Order): Promise<'done' | 'created'> {
    const candidates = await this.candidates(order, d);
    for (;;) {
      const prev = await this.lastAttempt(d);
      if (prev && prev.outcome !== 'UNAVAILABLE') {
        const provider = this.s.providers.get(prev.providerId);
        // A re-run first asks for the label: the previous run may have created the instance and crashed.
        const found = await provider.findByLabel(prev.label);
        if (found) {
          await this.adopt(d, prev, found.instanceId, prev.outcome === 'AMBIGUOUS' ? 'ADOPTED' : 'CREATED');
          return 'created';
        }
        if (prev.outcome === 'AMBIGUOUS') {
          if (this.now().getTime() - prev.createdAt.getTime() >= this.timing.adoptBoundMs) {
            await this.markAttempt(prev, 'NOT_FOUND', null, 'no instance carried the label within the bound');
            await this.fail(d, 'PROVISIONING_FAILED', 'The provider did not confirm the machine; your rental was not started.');
            return 'done';
          }
          await this.enqueue(RENTAL_JOBS.provision, d.id, this.timing.pollMs);
          return 'done';
        }
        if (prev.outcome === 'STARTED') {
          // Crashed during the call and nothing carries the label: the same label is safe to ask again.
          const offer = candidates.find((o) => o.id === prev.offerId);
          if (offer) {
            const r = await this.callCreate(d, prev, offer, provider);
            if (r !== 'next') return r;
            d = (await this.load(d.id))!;
            continue;
          }
        }
        if (prev.outcome === 'FAILED' || prev.outcome === 'NOT_FOUND' || prev.outcome === 'CREATED' || prev.outcome === 'ADOPTED') {
          await this.fail(d, 'PROVISIONING_FAILED', 'The machine could not be started; your rental was not started.');
          return 'done';
        }
      }
      const next = (prev?.attempt ?? 0) + 1;
      const offer = candidates[next - 1];
      if (!offer) {
        if (order.requestKind === 'OFFER') {
          await this.fail(d, 'OFFER_NOT_FOUND', 'The requested offer is no longer available from the provider.');
        } else {
          await this.fail(d, 'NO_CAPACITY', 'None of the matching offers had capacity; your rental was not started.');
        }
        return 'done';
      }
      // Re-read: a termination may have come in between attempts.
      const fresh = (await this.load(d.id))!;
      if (fresh.terminateRequestedAt || fresh.status !== 'PROVISIONING') {
        await this.enqueue(RENTAL_JOBS.terminate, d.id);
        return 'done';
      }
      const label = instanceLabel(d.id, next);
      const now = this.now();
      // Recorded before the call, so a crash during it leaves the label to look for.
      const attempt = this.s.ds.getRepository(DeploymentAttempt).create({
        deploymentId: d.id,
        attempt: next,
        offerId: offer.id,
        providerId: offer.provider,
        label,
        outcome: 'STARTED',
        instanceId: null,
        detail: null,
        createdAt: now,
        updatedAt: now,
      });
      const patch: Partial<Deployment> = { attempt: next, label, offerId: offer.id, providerId: offer.provider, updatedAt: now };
      // Metered rentals pay the price of the offer that runs; legacy keeps the quoted price.
      if (d.billingModel !== 'LEGACY_PREPAID') patch.hourlyPriceMinor = offer.pricePerHourMinor;
      await inTransaction(this.s.ds, async (m) => {
        await m.insert(DeploymentAttempt, attempt);
        await m.update(Deployment, { id: d.id }, patch);
        if (d.billingModel !== 'LEGACY_PREPAID') await m.update(Order, { id: d.orderId }, { hourlyPriceMinor: offer.pricePerHourMinor });
      });
      d = (await this.load(d.id))!;
      const r = await this.callCreate(d, attempt, offer, this.s.providers.get(offer.provider));
      if (r === 'created' || r === 'done') return r;
      d = (await this.load(d.id))!;
    }
  }

  private async callCreate(d: Deployment, a: DeploymentAttempt, offer: Offer, provider: Provider): Promise<'done' | 'created' | 'next'> {
    let result;
    try {
      result = await provider.create(a.label, { id: offer.id, key: offer.providerOfferKey, name: offer.name, gpuCount: offer.gpuCount }, d.sshPublicKey!);
    } catch (err) {
      result = { kind: 'ambiguous' as const, reason: (err as Error).message };
    }
    if (result.kind === 'created') {
      await this.adopt(d, a, result.instanceId, 'CREATED');
      return 'created';
    }
    if (result.kind === 'unavailable') {
      await this.markAttempt(a, 'UNAVAILABLE', null, result.reason);
      return 'next';
    }
    await this.markAttempt(a, 'AMBIGUOUS', null, result.reason);
    this.s.logger.warn({ deploymentId: d.id, label: a.label }, 'ambiguous create; looking the instance up by label');
    const found = await provider.findByLabel(a.label);
    if (found) {
      await this.adopt(d, a, found.instanceId, 'ADOPTED');
      return 'created';
    }
    await this.enqueue(RENTAL_JOBS.provision, d.id, this.timing.pollMs);
    return 'done';
  }

  private async pollUntilActive(d: Deployment, order: Order): Promise<void> {
    const provider = this.s.providers.get(d.providerId!);
    let info: InstanceInfo;
    try {
      info = await provider.get(d.instanceId!);
    } catch (err) {
      this.s.logger.warn({ err, deploymentId: d.id }, 'provider get failed; polling again');
      return this.enqueue(RENTAL_JOBS.provision, d.id, this.timing.pollMs);
    }
    if (info.state === 'failed' || info.state === 'gone' || info.state === 'stopped') {
      await this.fail(d, 'PROVISIONING_FAILED', 'The machine failed to start; your rental was not started.');
      return;
    }
    if (info.state === 'running' && info.ssh && (info.ssh.host !== d.sshHost || info.ssh.port !== d.sshPort)) {
      // Recorded as soon as known: a termination before ACTIVE must probe this address.
      await this.recordSshAddress(d, info.ssh);
    }
    if (info.state === 'running' && info.ssh) {
      const probe = await sshProbe({ ...info.ssh, privateKey: this.privateKey(d) }, { timeoutMs: this.timing.sshTimeoutMs });
      if (probe.ok) {
        const started = this.now();
        const legacy = d.billingModel === 'LEGACY_PREPAID';
        const endsAt = legacy && d.durationSeconds ? new Date(started.getTime() + d.durationSeconds * 1000) : null;
        const moved = await inTransaction(this.s.ds, (m) =>
          this.setStatus(m, d, ['PROVISIONING'], 'ACTIVE', {
            startedAt: started,
            endsAt,
            meteredUntil: legacy ? null : started,
            sshHost: info.ssh!.host,
            sshPort: info.ssh!.port,
            sshUser: info.ssh!.user,
          }),
        );
        if (moved && endsAt) await this.s.jobs.schedule(new Date(Date.now() + (endsAt.getTime() - started.getTime())), RENTAL_JOBS.expire, { deploymentId: d.id }, { uniqueKey: d.id });
        if (!moved) {
          const now = await this.load(d.id);
          if (now?.status === 'TERMINATING') await this.enqueue(RENTAL_JOBS.terminate, d.id);
        }
        return;
      }
    }
    const since = (await this.lastAttempt(d))?.createdAt ?? d.statusChangedAt ?? d.createdAt;
    if (this.now().getTime() - since.getTime() > this.timing.activeBoundMs) {
      await this.fail(d, 'PROVISIONING_TIMEOUT', 'The machine did not become reachable in time; your rental was not started.');
      return;
    }
    void order;
    await this.enqueue(RENTAL_JOBS.provision, d.id, this.timing.pollMs);
  }

  /** FAILED with a customer-safe reason, reversal PENDING, then the instance destroyed and the reversal settled. */
  async fail(d: Deployment, code: string, reason: string): Promise<void> {
    const now = this.now();
    await inTransaction(this.s.ds, async (m) => {
      const moved = await this.setStatus(m, d, ['PENDING', 'PROVISIONING'], 'FAILED', { endedAt: null });
      if (moved) await m.update(Order, { id: d.orderId }, { failureCode: code, failureReason: reason, reversalStatus: 'PENDING', updatedAt: now });
    });
    const fresh = (await this.load(d.id))!;
    if (fresh.instanceId && fresh.providerId) {
      try {
        await this.s.providers.get(fresh.providerId).destroy(fresh.instanceId);
      } catch (err) {
        // The reconciler destroys instances of failed deployments it finds later.
        this.s.logger.warn({ err, deploymentId: d.id }, 'destroying the instance of a failed rental failed');
      }
    }
    await this.settleReversal(fresh);
  }

  /**
   * Gives back exactly what the rental took, once: a credit-funded legacy debit returns as credits,
   * a card-funded order's payment returns to the card; metered rentals owe nothing. A refund the
   * payment provider cannot make now leaves the reversal PENDING for the reconciler to retry.
   */
  async settleReversal(d: Deployment): Promise<void> {
    const order = await this.s.ds.getRepository(Order).findOneByOrFail({ id: d.orderId });
    if (order.reversalStatus !== 'PENDING') return;
    if (order.funding === 'CARD') {
      try {
        await this.s.payments.sessions.refundOrder(order.id);
      } catch (err) {
        this.s.logger.error({ err, rentalId: order.id }, 'card refund of a failed rental did not go through; the reconciler retries');
        return;
      }
    }
    await inTransaction(this.s.ds, async (m) => {
      const debit = await m.getRepository(LedgerEntry).findOneBy({ externalRef: rentalDebitRef(order.id) });
      if (debit && debit.amountMinor < 0) {
        await this.s.ledger.post(m, {
          accountId: order.accountId,
          kind: 'REVERSAL',
          amountMinor: -debit.amountMinor,
          externalRef: reversalRef(order.id),
          description: `Rental ${order.id} failed: debit returned`,
          keyId: order.keyId,
          rentalId: order.id,
        });
      }
      await m.update(Order, { id: order.id, reversalStatus: 'PENDING' }, { reversalStatus: 'SUCCEEDED', updatedAt: this.now() });
    });
  }

  // ---------------------------------------------------------------- termination

  /** Starts termination for `reason` (idempotent) and queues the terminate job. */
  async requestTermination(deploymentId: string, reason: string): Promise<void> {
    const d = await this.load(deploymentId);
    if (!d) return;
    const now = this.now();
    await inTransaction(this.s.ds, async (m) => {
      const res = await m
        .createQueryBuilder()
        .update(Deployment)
        .set({ status: 'TERMINATING', statusChangedAt: now, updatedAt: now })
        .where('id = :id AND status IN (:...from)', { id: d.id, from: ['PENDING', 'PROVISIONING', 'ACTIVE'] })
        .execute();
      await m
        .createQueryBuilder()
        .update(Deployment)
        .set({ terminateRequestedAt: now, terminationReason: reason })
        .where('id = :id AND terminate_requested_at IS NULL', { id: d.id })
        .execute();
      if (res.affected) await m.update(Order, { id: d.orderId }, { status: 'TERMINATING', updatedAt: now });
    });
    await this.enqueue(RENTAL_JOBS.terminate, d.id);
  }

  /** Legacy rentals end themselves at endsAt. */
  async expire(deploymentId: string): Promise<void> {
    const d = await this.load(deploymentId);
    if (!d || d.status !== 'ACTIVE' || !d.endsAt) return;
    if (this.now().getTime() < d.endsAt.getTime()) {
      await this.s.jobs.schedule(new Date(Date.now() + (d.endsAt.getTime() - this.now().getTime())), RENTAL_JOBS.expire, { deploymentId }, { uniqueKey: deploymentId });
      return;
    }
    await this.requestTermination(deploymentId, 'EXPIRED');
  }

  async terminate(deploymentId: string): Promise<void> {
    let d = await this.load(deploymentId);
    if (!d || d.status === 'TERMINATED' || d.status === 'FAILED') return;
    if (d.status !== 'TERMINATING') {
      if (!d.terminateRequestedAt) return;
      await this.requestTermination(d.id, d.terminationReason ?? 'REQUESTED');
      d = (await this.load(d.id))!;
      if (d.status !== 'TERMINATING') return;
    }
    let instanceId = d.instanceId;
    let provider: Provider | null = d.providerId ? this.s.providers.get(d.providerId) : null;
    if (!instanceId && d.label && provider) {
      // A create may have happened without its answer being recorded.
      const a = await this.lastAttempt(d);
      const found = await this.s.providers.get(a?.providerId ?? d.providerId!).findByLabel(d.label);
      if (found) {
        instanceId = found.instanceId;
        await this.s.ds.getRepository(Deployment).update({ id: d.id }, { instanceId, updatedAt: this.now() });
      } else if (a?.outcome === 'STARTED') {
        // The provision job is (or was) mid-call; look again shortly rather than miss its instance.
        await this.retryVerify(d, 'create call of the last attempt has no recorded outcome yet');
        return;
      }
    }
    if (!instanceId || !provider) return this.markTerminated(d);

    let target = this.target(d);
    if (!target && d.sshPrivateKeyEnc) {
      // Ended before ACTIVE: ask for the address while the instance still exists, so the probe
      // after the destroy knocks on the door the machine really had.
      let info: InstanceInfo;
      try {
        info = await provider.get(instanceId);
      } catch (err) {
        return this.retryVerify(d, `reading the instance before destroying it failed: ${(err as Error).message}`);
      }
      if (info.ssh) {
        await this.recordSshAddress(d, info.ssh);
        target = this.target(d, info.ssh);
      }
    }
    try {
      await provider.destroy(instanceId);
    } catch (err) {
      return this.retryVerify(d, `destroy failed: ${(err as Error).message}`);
    }
    // Without an address the provider never gave one: nobody could have got in, so its word is the check.
    const check = target
      ? await new DestructionVerifier({ sshTimeoutMs: this.timing.sshTimeoutMs }).verify(provider, instanceId, target)
      : { verified: (await provider.get(instanceId)).state === 'gone', detail: 'provider reports gone; it never reported an SSH address' };
    if (!check.verified) return this.retryVerify(d, check.detail);
    await this.s.ds.getRepository(Deployment).update({ id: d.id }, { lastCheckDetail: check.detail.slice(0, 512) });
    await this.markTerminated(d);
  }

  private async retryVerify(d: Deployment, detail: string): Promise<void> {
    const n = d.verifyAttempts + 1;
    await this.s.ds.getRepository(Deployment).update({ id: d.id }, { verifyAttempts: n, lastCheckDetail: detail.slice(0, 512), updatedAt: this.now() });
    if (n >= this.timing.verifyAlertAfter) {
      this.s.logger.error({ deploymentId: d.id, verifyAttempts: n, detail }, 'ALERT: instance not verifiably destroyed; still retrying');
    }
    const delay = Math.min(this.timing.verifyMaxDelayMs, this.timing.verifyBaseDelayMs * 2 ** Math.min(n - 1, 20));
    await this.enqueue(RENTAL_JOBS.terminate, d.id, delay);
  }

  /** TERMINATED at the verified time (written once), settling the last metered usage in the same transaction. */
  private async markTerminated(d: Deployment): Promise<void> {
    const order = await this.s.ds.getRepository(Order).findOneByOrFail({ id: d.orderId });
    const verifiedAt = this.now();
    const endedAt = order.funding === 'CARD' && d.billingModel === 'LEGACY_PREPAID' ? null : verifiedAt;
    await inTransaction(this.s.ds, async (m) => {
      const locked = await m.getRepository(Deployment).createQueryBuilder('d').setLock('pessimistic_write').where('d.id = :id', { id: d.id }).getOne();
      if (!locked || locked.status !== 'TERMINATING') return;
      if (METERED.includes(locked.billingModel) && locked.meteredUntil && locked.startedAt) {
        await this.postUsage(m, locked, locked.terminateRequestedAt ?? verifiedAt);
      }
      await this.setStatus(m, locked, ['TERMINATING'], 'TERMINATED', locked.endedAt ? {} : { endedAt });
    });
  }

  /** Usage from metered_until to `until` (capped at spend_cap), one ledger entry; returns the amount. */
  private async postUsage(m: EntityManager, d: Deployment, until: Date): Promise<number> {
    const { amount, untilMs } = accrual(d, until.getTime());
    if (untilMs <= d.meteredUntil!.getTime()) return 0;
    if (amount > 0) {
      await this.s.ledger.post(m, {
        accountId: d.accountId,
        kind: 'USAGE',
        amountMinor: -amount,
        externalRef: usageRef(d.id, untilMs),
        description: `Usage of deployment ${d.id}`,
        keyId: d.keyId,
        rentalId: d.orderId,
      });
    }
    await m.update(Deployment, { id: d.id }, { usageMinor: d.usageMinor + amount, meteredUntil: new Date(untilMs), updatedAt: this.now() });
    return amount;
  }

  // ---------------------------------------------------------------- metering

  /**
   * One sweep: for every ACTIVE or TERMINATING metered deployment, usage up to now (or up to the
   * termination request) in a handful of statements, then terminates rentals at a limit.
   * Returns the number of ledger entries posted.
   */
  async meter(): Promise<number> {
    const nowMs = this.now().getTime();
    const posted = await inTransaction(this.s.ds, async (m) => {
      const rows: Deployment[] = await m
        .getRepository(Deployment)
        .createQueryBuilder('d')
        .setLock('pessimistic_write')
        .where('d.billing_model IN (:...models) AND d.status IN (:...st) AND d.metered_until IS NOT NULL AND d.started_at IS NOT NULL', {
          models: METERED,
          st: ['ACTIVE', 'TERMINATING'],
        })
        .orderBy('d.id')
        .getMany();
      const due = rows
        .map((d) => ({ d, ...accrual(d, d.terminateRequestedAt ? Math.min(nowMs, d.terminateRequestedAt.getTime()) : nowMs) }))
        .filter((x) => x.untilMs > x.d.meteredUntil!.getTime());
      if (due.length === 0) return 0;
      const accountIds = [...new Set(due.map((x) => x.d.accountId))].sort();
      const balances: { id: string; balance_minor: string | number }[] = await m.query(
        `SELECT id, balance_minor FROM accounts WHERE id IN (?) ORDER BY id FOR UPDATE`,
        [accountIds],
      );
      const bal = new Map(balances.map((r) => [r.id, Number(r.balance_minor)]));
      const created = this.now();
      const entries: unknown[][] = [];
      for (const x of due) {
        if (x.amount <= 0) continue;
        const after = bal.get(x.d.accountId)! - x.amount;
        bal.set(x.d.accountId, after);
        entries.push([x.d.accountId, x.d.keyId, x.d.orderId, 'USAGE', -x.amount, after, usageRef(x.d.id, x.untilMs), `Usage of deployment ${x.d.id}`, created]);
      }
      if (entries.length > 0) {
        await m.query(
          `INSERT INTO ledger_entries (account_id, key_id, rental_id, kind, amount_minor, balance_after_minor, external_ref, description, created_at) VALUES ?`,
          [entries],
        );
        const ids = [...bal.keys()];
        await m.query(`UPDATE accounts SET balance_minor = CASE id ${ids.map(() => 'WHEN ? THEN ?').join(' ')} END WHERE id IN (?)`, [
          ...ids.flatMap((id) => [id, bal.get(id)]),
          ids,
        ]);
      }
      const dIds = due.map((x) => x.d.id);
      await m.query(
        `UPDATE deployments SET
           usage_minor = usage_minor + CASE id ${due.map(() => 'WHEN ? THEN ?').join(' ')} END,
           metered_until = CASE id ${due.map(() => 'WHEN ? THEN ?').join(' ')} END
         WHERE id IN (?)`,
        [...due.flatMap((x) => [x.d.id, x.amount]), ...due.flatMap((x) => [x.d.id, new Date(x.untilMs)]), dIds],
      );
      return entries.length;
    });
    await this.enforceLimits();
    return posted;
  }

  /** Terminates metered rentals at their spend cap, their key's budget, or the end of the account's credits. */
  private async enforceLimits(): Promise<void> {
    const rows: { id: string; reason: string }[] = await this.s.ds.query(
      `SELECT d.id,
              CASE WHEN d.spend_cap_minor IS NOT NULL AND d.usage_minor >= d.spend_cap_minor THEN 'SPEND_CAP'
                   WHEN k.budget_limit_minor <= COALESCE(ks.net, 0) THEN 'KEY_BUDGET'
                   WHEN a.balance_minor <= 0 THEN 'CREDITS' END AS reason
         FROM deployments d
         JOIN accounts a ON a.id = d.account_id
         JOIN api_keys k ON k.id = d.key_id
         LEFT JOIN (SELECT key_id, -SUM(amount_minor) AS net FROM ledger_entries
                     WHERE kind IN ('RENTAL_DEBIT', 'USAGE', 'REVERSAL') AND key_id IN
                       (SELECT key_id FROM deployments WHERE status = 'ACTIVE' AND billing_model IN (?))
                     GROUP BY key_id) ks ON ks.key_id = d.key_id
        WHERE d.status = 'ACTIVE' AND d.billing_model IN (?)
       HAVING reason IS NOT NULL`,
      [METERED, METERED],
    );
    for (const r of rows) await this.requestTermination(r.id, r.reason);
  }

  // ---------------------------------------------------------------- reconciler

  /** Destroys labelled instances no live deployment owns; re-drives deployments stuck past the bound. */
  async reconcile(): Promise<{ destroyed: string[]; redriven: string[] }> {
    const destroyed: string[] = [];
    for (const provider of this.s.providers.all()) {
      if (!provider.capabilities.listInstances) continue;
      let instances: InstanceInfo[];
      try {
        instances = await provider.listInstances();
      } catch (err) {
        this.s.logger.warn({ err, provider: provider.id }, 'reconciler could not list instances');
        continue;
      }
      const ours = instances.filter((i) => i.label.startsWith(LABEL_PREFIX));
      if (ours.length === 0) continue;
      const live: { label: string }[] = await this.s.ds.query(
        `SELECT a.label FROM deployment_attempts a JOIN deployments d ON d.id = a.deployment_id
          WHERE a.label IN (?) AND d.status IN (?)`,
        [ours.map((i) => i.label), LIVE],
      );
      const keep = new Set(live.map((r) => r.label));
      for (const i of ours) {
        if (keep.has(i.label)) continue;
        try {
          await provider.destroy(i.instanceId);
          destroyed.push(i.instanceId);
          this.s.logger.warn({ provider: provider.id, instanceId: i.instanceId, label: i.label }, 'reconciler destroyed an orphaned instance');
        } catch (err) {
          this.s.logger.error({ err, instanceId: i.instanceId }, 'reconciler could not destroy an orphaned instance');
        }
      }
    }
    const cutoff = new Date(this.now().getTime() - this.timing.stuckAfterMs);
    const stuck: { id: string; status: RentalStatus }[] = await this.s.ds.query(
      `SELECT id, status FROM deployments WHERE status IN ('PENDING', 'PROVISIONING', 'TERMINATING') AND status_changed_at < ?`,
      [cutoff],
    );
    for (const d of stuck) {
      await this.enqueue(d.status === 'TERMINATING' ? RENTAL_JOBS.terminate : RENTAL_JOBS.provision, d.id);
    }
    // A reversal left PENDING (a refund the payment provider refused for the moment) is retried;
    // the provision job of a FAILED deployment only settles its reversal.
    const unsettled: { id: string }[] = await this.s.ds.query(
      `SELECT d.id FROM deployments d JOIN orders o ON o.id = d.order_id
        WHERE d.status = 'FAILED' AND o.reversal_status = 'PENDING' AND d.status_changed_at < ?`,
      [cutoff],
    );
    for (const d of unsettled) await this.enqueue(RENTAL_JOBS.provision, d.id);
    // Backstop for the one-off expiry job: if it was lost (a crash between ACTIVE and scheduling
    // it), a paid-up legacy rental would otherwise run past what was bought.
    const overdue: { id: string }[] = await this.s.ds.query(
      `SELECT id FROM deployments WHERE status = 'ACTIVE' AND billing_model = 'LEGACY_PREPAID' AND ends_at IS NOT NULL AND ends_at <= ?`,
      [this.now()],
    );
    for (const d of overdue) await this.requestTermination(d.id, 'EXPIRED');
    return { destroyed, redriven: [...stuck.map((d) => d.id), ...unsettled.map((d) => d.id), ...overdue.map((d) => d.id)] };
  }
}

/** Usage owed from metered_until to `untilMs`, whole seconds since start, priced cumulatively so rounding never drifts. */
function accrual(d: Deployment, untilMs: number): { amount: number; untilMs: number } {
  const start = d.startedAt!.getTime();
  const secs = Math.max(0, Math.floor((untilMs - start) / 1000));
  const end = start + secs * 1000;
  let total = Math.floor((secs * d.hourlyPriceMinor) / 3600);
  if (d.spendCapMinor !== null) total = Math.min(total, d.spendCapMinor);
  return { amount: Math.max(0, total - d.usageMinor), untilMs: Math.max(end, d.meteredUntil!.getTime()) };
}

/**
 * Fails a PENDING/PROVISIONING rental with a customer-safe reason and settles its reversal
 * (legacy: the admission debit credited back once under `rental:<id>:reversal`; metered: nothing
 * was charged). Safe to call repeatedly; a deployment in any other status is left alone.
 */
export async function failRental(services: Services, deploymentId: string, code: string, reason: string): Promise<void> {
  const lifecycle = new RentalLifecycle(services);
  const d = await services.ds.getRepository(Deployment).findOneBy({ id: deploymentId });
  if (!d) return;
  if (d.status === 'FAILED') {
    await lifecycle.settleReversal(d);
    return;
  }
  await lifecycle.fail(d, code, reason);
}
