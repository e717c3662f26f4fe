import { randomUUID } from 'node:crypto';
import type { Clock } from '../../../clock.js';
import type { Store } from '../../../db/store.js';
import type { Repositories } from '../../../repositories.js';
import { AppError } from '../../../errors/app-error.js';
import type { Principal } from '../../keys/principal.js';
import { RENTAL_JOBS, type JobQueue } from '../../../jobs/job-queue.js';
import type { Logger } from '../../../logger.js';
import type { LedgerService } from '../../billing/ledger.service.js';
import { claimIdempotencyKey, idempotentRequest } from '../../idempotency/idempotency.js';
import type { KeysService, LockedAccount } from '../../keys/keys.service.js';
import type { InventoryService } from '../../inventory/inventory.service.js';
import { creditTerms, waitingTerms, type AdmissionOffer, type AdmissionTerms } from './admission-terms.js';
import { newDeployment, newOrder, rentalDebitTerms, type IntentMatch } from './admission-rows.js';
import { assertCreditLimits, assertFailedAfterUseUnderLimit, assertMeteringCaughtUp } from './admission-guards.js';
import { intentRequestValue, type RentalIntent } from './rental-intent.js';
import type { SecretBox } from '../../credentials/secret-box.js';
import { offerCapabilities, type Offer } from '../../inventory/offer.entity.js';
import type { OfferDto } from '../../inventory/inventory.dto.js';
import { machineColumns, type MachineColumns } from '../store/machine-secrets.js';
import { offerLabel, unmetSetting } from './machine-settings.js';
import { needsOf } from '../../inventory/offer-candidates.js';
import type { Deployment } from '../store/deployment.entity.js';
import { reservedOf } from './credit-reservation.js';
import { FAILED_AFTER_USE_LIMIT, FAILED_AFTER_USE_WINDOW_MS } from './rental-limits.js';
import { terminateAnswer, type DeploymentActor } from '../reads/deployment-access.js';
import { rentalDebitRef } from '../lifecycle/labels.js';
import type { Order } from '../store/order.entity.js';
import { isOneOf, TERMINAL_STATUSES } from '../state/rental-status.js';
import { insertDeployment, requestTermination } from '../state/rental-state.js';
import { notFound, type RentalReadsService } from '../reads/rental-reads.service.js';
import { toRentalDto } from '../wire/rental-dto.js';
import type { RentalDto, TerminateAccepted } from '../wire/rentals.dto.js';

/** The repositories admission and termination requests read and write. */
export type RentalRequestsRepos = Pick<
  Repositories,
  'accounts' | 'idempotency' | 'rentals' | 'events' | 'jobs' | 'ledger'
>;

/** The offers an intent stands for, cheapest first, and (GPU intent) the match its order stores. */
interface Resolved {
  candidates: AdmissionOffer[];
  match: IntentMatch | null;
  /** No eligible offer is on sale, and the intent asked to wait for one. */
  waiting: boolean;
}

export interface CreateResult {
  /** 201 for a new rental, 200 for a replay of the same Idempotency-Key and body. */
  status: 200 | 201;
  rental: RentalDto;
}

/**
 * Rental admission and termination requests (the reads are RentalReadsService). Admission checks and
 * writes (order, deployment, ledger debit, idempotency record) run in one transaction that holds
 * the account row lock, so concurrent requests of an account are decided one after another.
 * Provisioning and termination themselves are jobs: RENTAL_JOBS (src/jobs/job-queue.ts) names them,
 * lifecycle/rental-lifecycle.ts does them.
 */
export class RentalsService {
  constructor(
    private readonly store: Store<RentalRequestsRepos>,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly ledger: LedgerService,
    private readonly keys: KeysService,
    private readonly jobs: JobQueue,
    private readonly inventory: Pick<InventoryService, 'liveOffer' | 'findCached' | 'intentCandidates'>,
    private readonly reads: Pick<RentalReadsService, 'rental'>,
    private readonly box: Pick<SecretBox, 'seal'>,
    /** The metering period (METERING_EVERY_MS): how stale the account's credits may be before admission waits for metering. */
    private readonly metering: { meteringEveryMs: number },
  ) {}

  /**
   * Admission: one transaction of a handful of statements. The offer comes from the in-memory
   * inventory snapshot; the account row lock and the key's counters are one read; the
   * idempotency claim is written with the rental's id; the provision job row is written with
   * the rental (an outbox), so no rental is admitted without its job. `idemKey` is the checked
   * Idempotency-Key and `intent` the parsed body (the controller's `rentalIntent`): nothing here
   * checks the request's shape again.
   */
  async create(principal: Principal, idemKey: string, intent: RentalIntent): Promise<CreateResult> {
    // The key is part of the intent: one key's request is never answered with another key's rental.
    const request = idempotentRequest(`rental:${principal.accountId}`, idemKey, {
      ...intentRequestValue(intent),
      keyId: principal.keyId,
    });

    // Inventory is read outside the lock; an error is raised only after the key was found unused,
    // so a replay is never answered with a newer verdict on the offer.
    let resolved: Resolved | AppError;
    try {
      resolved = await this.resolve(intent);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      resolved = err;
    }

    const rentalId = randomUUID();
    // Sealed before the lock is taken: the secrets are bound to the rental's id, known already.
    const machine = machineColumns(this.box, rentalId, intent.machine);
    const outcome = await this.store.pipelined(async (r, tx) => {
      // Issued together, so they reach the server as one request (a pipelined transaction) and run there
      // in this order: the account lock first, then the claim under it (a concurrent twin waits
      // on the lock and then sees a replay), then the account's reservations, which cannot
      // change until this transaction ends (the key's share of them too), then the key's recent
      // rentals that failed after their machines worked for it.
      const now = this.clock.now();
      const [{ account, usage }, claim, reserving, failedAfterUseAt] = await Promise.all([
        this.keys.lockAccountWithUsage(r.accounts, principal.key),
        claimIdempotencyKey(r.idempotency, this.clock, request, rentalId),
        r.rentals.deployments.reserving(principal.accountId),
        r.rentals.deployments.failedAfterUse(
          principal.keyId,
          new Date(now.getTime() - FAILED_AFTER_USE_WINDOW_MS),
          FAILED_AFTER_USE_LIMIT,
        ),
      ]);
      if (claim.kind === 'replay') {
        // Nothing changes: rolled back, the lock's write leaves nothing for a cluster to certify.
        tx.rollBackAtEnd();
        return { replayOf: claim.resourceId, created: null, wake: null };
      }
      if (resolved instanceof AppError) throw resolved;
      const terms =
        resolved.waiting && intent.kind === 'INTENT'
          ? waitingTerms(account, principal, intent)
          : creditTerms(account, principal, intent.budgetMinor, resolved.candidates, intent.terminateAfterSeconds);
      assertFailedAfterUseUnderLimit(failedAfterUseAt, now);
      // Credits are judged only once metering has charged what the running rentals used.
      assertMeteringCaughtUp(reserving, now, this.metering.meteringEveryMs);
      assertCreditLimits(account, principal, usage, reservedOf(reserving, principal.keyId), terms);
      // The rental's rows and its job row, issued together again (one request to the server).
      const created = this.insertRental(r, rentalId, account, principal, intent, resolved, terms, machine);
      const wake = this.jobs.nowIn(
        r.jobs,
        RENTAL_JOBS.provision,
        { deploymentId: created.deployment.id },
        { uniqueKey: created.deployment.id },
      );
      const [, wakeUp] = await Promise.all([created.written, wake]);
      return { replayOf: null, created, wake: wakeUp };
    });

    if (outcome.created === null) return this.replay(outcome.replayOf);
    const { order, deployment, first } = outcome.created;
    try {
      await outcome.wake();
    } catch (err) {
      // The job row is committed; a worker finds it at its next poll.
      this.logger.warn({ err, deploymentId: deployment.id }, 'could not wake the job processor');
    }
    const facts = first ? { gpuName: first.name, gpuCount: first.gpuCount, provider: first.provider } : undefined;
    return { status: 201, rental: toRentalDto(order, deployment, facts) };
  }

  /**
   * Candidates for the intent, cheapest first; no live provider search. An explicit offer must
   * honour the machine settings (else 422 naming the setting); a GPU intent is matched only to
   * offers that do, and one that may wait is admitted to wait when none is on sale.
   */
  private async resolve(intent: RentalIntent): Promise<Resolved> {
    if (intent.kind === 'OFFER') {
      // Any offer the cache ever had is admitted; one the provider no longer has fails at
      // provisioning as OFFER_NOT_FOUND with its credits reversed (docs/api.md, Rentals).
      // Live offers come from the in-memory snapshot; only one that left it costs a query.
      const offer: OfferDto | Offer | null =
        (await this.inventory.liveOffer(intent.offerId)) ?? (await this.inventory.findCached(intent.offerId));
      if (!offer)
        throw new AppError(
          'OFFER_NOT_FOUND',
          `Offer ${intent.offerId} is not known. See GET /api/v1/offers for current offers.`,
        );
      const caps = 'capabilities' in offer ? offer.capabilities : offerCapabilities(offer);
      const unmet = unmetSetting(intent.machine, caps, offerLabel(offer.name, offer.provider));
      if (unmet) throw new AppError('VALIDATION_FAILED', `Invalid request: ${unmet}`);
      return { candidates: [offer], match: null, waiting: false };
    }
    if (intent.refusal) throw intent.refusal;
    try {
      // Legacy rentals drop candidates that cannot run the purchased hours, so fetch spares.
      const { slug, candidates, modelsOnSale } = await this.inventory.intentCandidates(
        intent,
        20,
        needsOf(intent.machine),
      );
      return { candidates, match: { slug, modelsOnSale }, waiting: false };
    } catch (err) {
      // A model nobody knows is refused even so: no offer of it will ever appear.
      if (
        !(err instanceof AppError) ||
        err.code !== 'NO_MATCHING_OFFER' ||
        intent.waitForCapacitySeconds === null ||
        !intent.match.known
      )
        throw err;
      return { candidates: [], match: { slug: intent.match.key, modelsOnSale: [] }, waiting: true };
    }
  }

  /**
   * Issues the writes of the order, its deployment and (legacy) the debit without waiting for
   * them, so the caller can send its own with them; `written` settles when they are done.
   */
  private insertRental(
    r: RentalRequestsRepos,
    rentalId: string,
    account: LockedAccount,
    principal: Principal,
    intent: RentalIntent,
    resolved: Resolved,
    terms: AdmissionTerms,
    machine: MachineColumns,
  ): { order: Order; deployment: Deployment; first: AdmissionOffer | undefined; written: Promise<unknown> } {
    const rental = {
      id: rentalId,
      accountId: principal.accountId,
      keyId: principal.keyId,
      funding: 'CREDITS' as const,
      now: this.clock.now(),
    };
    const order = newOrder(rental, intent, resolved.match, terms, machine);
    const deployment = newDeployment(randomUUID(), order, terms);
    const writes: Promise<unknown>[] = [r.rentals.orders.insert(order), insertDeployment(r, deployment)];
    const debit = rentalDebitTerms(order, terms);
    if (debit) {
      const entry = {
        accountId: principal.accountId,
        kind: 'RENTAL_DEBIT' as const,
        ...debit,
        externalRef: rentalDebitRef(rentalId),
        keyId: principal.keyId,
        rentalId,
      };
      writes.push(this.ledger.post(r, entry, account));
    }
    return { order, deployment, first: terms.candidates[0], written: Promise.all(writes) };
  }

  /** The first answer again; its job was written with it, so nothing is queued. */
  private async replay(rentalId: string): Promise<CreateResult> {
    return { status: 200, rental: await this.reads.rental(rentalId) };
  }

  /**
   * Queues a lifecycle job after the state it acts on has committed. A failure is logged, not
   * returned: the state is already written, and the reconciler re-drives deployments left waiting.
   */
  private async enqueue(
    name: typeof RENTAL_JOBS.provision | typeof RENTAL_JOBS.terminate,
    deploymentId: string,
  ): Promise<void> {
    try {
      await this.jobs.now(name, { deploymentId }, { uniqueKey: deploymentId });
    } catch (err) {
      this.logger.error({ err, job: name, deploymentId }, 'could not queue a rental job');
    }
  }

  /**
   * Asks for termination; repeatable. A deployment that is starting or running is marked
   * TERMINATING with the request time, and the terminate job destroys and verifies it. A
   * deployment already terminating or finished is left as it is. `deploymentId` may also be the
   * rental id, resolved to its deployment under the same access rules.
   */
  async terminate(principal: DeploymentActor, deploymentId: string): Promise<TerminateAccepted> {
    const { enqueue, after } = await this.store.transaction(async (r) => {
      const d = await r.rentals.reads.lockDeploymentOrRental(principal, deploymentId);
      if (!d) throw notFound('deployment');
      if (isOneOf(TERMINAL_STATUSES, d.status)) return { enqueue: null, after: d };
      await requestTermination(r, d.id, 'REQUESTED', this.clock.now());
      const after = await r.rentals.deployments.get(d.id);
      // AWAITING_PAYMENT keeps its status (the card payment path owns it) but carries the request.
      return { enqueue: d.status !== 'AWAITING_PAYMENT' ? d.id : null, after };
    });
    if (enqueue) await this.enqueue(RENTAL_JOBS.terminate, enqueue);
    return terminateAnswer(after);
  }
}
