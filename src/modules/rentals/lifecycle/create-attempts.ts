import type { Provider } from '../../../providers/provider.js';
import { slugsOfMatch } from '../../inventory/offer-candidates.js';
import { offerCapabilities, offerTrafficCost, type Offer } from '../../inventory/offer.entity.js';
import { offerLabel, unmetSetting } from '../admission/machine-settings.js';
import { orderGpuMatch } from '../admission/rental-intent.js';
import { MAX_CANDIDATES } from '../admission/rental-limits.js';
import type { Deployment } from '../store/deployment.entity.js';
import { DeploymentAttempt, type AttemptOutcome } from '../store/deployment-attempt.entity.js';
import type { Order } from '../store/order.entity.js';
import { decideCreateStep, NOTHING_CREATED } from './create-step.js';
import type { AttemptAssignment } from '../store/rentals.repository.js';
import { machineSettingsOf, wrapStartupScript } from '../store/machine-secrets.js';
import { instanceLabel } from './labels.js';
import { enqueueFor, type LifecycleDeps, type LifecycleTiming } from './lifecycle-deps.js';
import type { Reversal } from './reversal.js';

type RunOutcome = 'done' | 'created' | 'asked';

/**
 * The create half of provisioning: one label per attempt, recorded before its call, and what a
 * label turns up adopted, so a run repeated after a crash never creates a second machine.
 */
export class CreateAttempts {
  constructor(
    private readonly deps: Pick<LifecycleDeps, 'store' | 'clock' | 'logger' | 'providers' | 'jobs' | 'box'>,
    private readonly timing: LifecycleTiming,
    private readonly reversal: Reversal,
  ) {}

  private now(): Date {
    return this.deps.clock.now();
  }

  private poll(deploymentId: string, delayMs: number): Promise<void> {
    return enqueueFor(this.deps.jobs, 'rental.provision', deploymentId, delayMs);
  }

  private lastAttempt(deploymentId: string): Promise<DeploymentAttempt | null> {
    return this.deps.store.read((r) => r.rentals.attempts.last(deploymentId));
  }

  private find(deploymentId: string): Promise<Deployment | null> {
    return this.deps.store.read((r) => r.rentals.deployments.find(deploymentId));
  }

  /** The create candidates, cheapest first, from the order (never a live provider search). */
  private async candidates(order: Order, d: Deployment): Promise<Offer[]> {
    const { store } = this.deps;
    let ids = order.candidateOfferIds ?? (order.offerId ? [order.offerId] : null);
    // Only an intent admitted before its candidates were kept has none: its stored match finds them.
    const match = !ids && order.requestKind === 'INTENT' ? orderGpuMatch(order) : null;
    if (match) {
      const shape = {
        slugs: slugsOfMatch(match),
        gpuCount: order.gpuCount,
        maxHourlyPriceMinor: order.maxHourlyPriceMinor,
      };
      const rows = await store.read((r) => r.inventory.offers.cheapestOfShape(shape, MAX_CANDIDATES));
      ids = rows.map((o) => o.id);
    }
    if (!ids && d.offerId) ids = [d.offerId];
    const wanted = ids ?? [];
    const found = await store.read((r) => r.inventory.offers.byIds(wanted));
    const byId = new Map(found.map((o) => [o.id, o]));
    const limit = order.requestKind === 'OFFER' ? 1 : MAX_CANDIDATES;
    return (ids ?? [])
      .map((id) => byId.get(id))
      .filter((o): o is Offer => !!o)
      .slice(0, limit);
  }

  async markAttempt(
    a: DeploymentAttempt,
    outcome: AttemptOutcome,
    detail: string | null,
    patch: Partial<DeploymentAttempt> = {},
  ): Promise<void> {
    const fields = {
      instanceId: null,
      ...patch,
      outcome,
      detail: detail?.slice(0, 512) ?? null,
      updatedAt: this.now(),
    };
    await this.deps.store.read((r) => r.rentals.attempts.recordOutcome(a.id, fields));
  }

  private async adopt(d: Deployment, a: DeploymentAttempt, instanceId: string, outcome: AttemptOutcome): Promise<void> {
    await this.markAttempt(a, outcome, null, { instanceId });
    // Written whatever the status: a termination requested meanwhile must find the instance to destroy.
    await this.deps.store.read((r) => r.rentals.deployments.recordInstance(d.id, instanceId, this.now()));
  }

  /** Runs the create attempts as {@link decideCreateStep} directs; 'done' when this run has nothing further to do. */
  async run(d: Deployment, order: Order): Promise<'done' | 'created'> {
    const candidates = await this.candidates(order, d);
    for (;;) {
      const prev = await this.lastAttempt(d.id);
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
        const fresh = (await this.find(d.id))!;
        if (fresh.terminateRequestedAt || fresh.status !== 'PROVISIONING') {
          await enqueueFor(this.deps.jobs, 'rental.terminate', d.id);
          return 'done';
        }
        const offer = candidates[prev?.attempt ?? 0];
        const attempt = await this.recordAttempt(fresh, (prev?.attempt ?? 0) + 1, offer);
        outcome = await this.callCreate(fresh, order, attempt, offer, this.deps.providers.get(offer.provider));
      }
      if (outcome !== 'asked') return outcome;
      d = (await this.find(d.id))!;
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
    if (metered) {
      patch.hourlyPriceMinor = offer.pricePerHourMinor;
      // The traffic terms of the offer that runs, like its hourly price.
      patch.trafficUpPriceMicro = offer.trafficUpPriceMicro;
      patch.trafficDownPriceMicro = offer.trafficDownPriceMicro;
    }
    await this.deps.store.transaction(async (r) => {
      await r.rentals.attempts.insert(attempt);
      await r.rentals.deployments.assignAttempt(d.id, patch);
      if (metered) await r.rentals.orders.setHourlyPrice(d.orderId, offer.pricePerHourMinor);
    });
    await this.deps.store.read((r) => r.rentals.deployments.setPhase(d.id, 'creating', now));
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
    // Capabilities may have changed since admission (the same rule, asked again of the offer as it is
    // now): a plugin never receives a setting its offer does not declare.
    const unmet = unmetSetting(settings, offerCapabilities(offer), offerLabel(offer.name, offer.provider));
    if (unmet) {
      await this.markAttempt(a, 'UNAVAILABLE', unmet);
      return 'asked';
    }
    // Traffic is charged as used; a purchase paid in whole hours up front has nothing to charge it to.
    if (d.billingModel === 'LEGACY_PREPAID' && offerTrafficCost(offer)) {
      await this.markAttempt(
        a,
        'UNAVAILABLE',
        'the offer bills internet traffic per GB, which a prepaid purchase cannot pay',
      );
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
        trafficPrice: offerTrafficCost(offer),
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
      case 'rejected': {
        // Our request or configuration is wrong: the operator must hear of it, in the log and on
        // GET /api/v1/providers; the customer gets a safe reason.
        this.deps.logger.error(
          { deploymentId: d.id, provider: provider.id, label: a.label, reason: result.reason },
          'provider rejected the create request',
        );
        const errorClass = result.errorClass ?? 'request';
        await this.deps.store.read((r) => r.inventory.providerStatus.recordError(provider.id, errorClass, this.now()));
        await this.markAttempt(a, 'REJECTED', result.reason);
        return 'asked';
      }
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
}
