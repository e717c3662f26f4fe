import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import type { Clock } from '../../clock.js';
import { insertEntity } from '../../db/entity-rows.js';
import { inSqlTransaction, type Sql } from '../../db/sql.js';
import { inTransaction } from '../../db/transaction.js';
import { AppError } from '../../errors/app-error.js';
import type { Principal } from '../keys/principal.js';
import { RENTAL_JOBS, type JobQueue } from '../../jobs/job-queue.js';
import type { Logger } from '../../logger.js';
import { accountBalanceEligible, assertNotFrozen } from '../accounts/billing-eligibility.js';
import { outstandingReservationMinor, reservedMinor, type Reserved } from '../billing/credit-reservation.js';
import type { LedgerService } from '../billing/ledger.service.js';
import { topUpAdvice } from '../billing/top-up-advice.js';
import { budgetOverKeyCapMessage, budgetTooSmallMessage } from '../../../clients/sdk/src/hints.js';
import { formatCents } from '../../../clients/sdk/src/money.js';
import { claimIdempotencyKey, idempotentRequest, requireIdempotencyKey } from '../idempotency/idempotency.js';
import { gpuIntentName } from '../inventory/gpu-match.js';
import { gpuSlug } from '../inventory/gpu-slug.js';
import { findIntentCandidates } from '../inventory/offer-candidates.js';
import { Offer } from '../inventory/offer.entity.js';
import type { KeysService, KeyUsage, LockedAccount } from '../keys/keys.service.js';
import type { InventoryService } from '../inventory/inventory.service.js';
import { Deployment } from './deployment.entity.js';
import { assertFreeSlot } from './concurrency-slot.js';
import { lockDeploymentOrRentalFor, terminateAnswer, type DeploymentActor } from './deployment-access.js';
import { rentalDebitRef } from './lifecycle/labels.js';
import { Order } from './order.entity.js';
import { MAX_CANDIDATES, MIN_BUDGET_MINOR } from './rental-limits.js';
import { isOneOf, TERMINAL_STATUSES, type DeploymentBillingModel } from './rental-status.js';
import { insertDeployment, requestTermination } from './rental-state.js';
import { notFound, type RentalReadsService } from './rental-reads.service.js';
import { toRentalDto } from './rental-views.js';
import type { CreateRentalRequest, GpuIntentRentalRequest, RentalDto, TerminateAccepted } from './rentals.dto.js';


/** What admission needs of an offer: the snapshot's entry or a cached row. */
type AdmissionOffer = Pick<Offer, 'id' | 'name' | 'gpuCount' | 'pricePerHourMinor' | 'currency' | 'maximumDurationSeconds' | 'provider'>;

interface Resolved {
  requestKind: 'OFFER' | 'INTENT';
  candidates: AdmissionOffer[];
  slug: string | null;
}

/** What admission decided about money, before anything is written. */
interface Terms {
  billingModel: DeploymentBillingModel;
  hours: number | null;
  durationSeconds: number | null;
  totalMinor: number;
  spendCapMinor: number | null;
  candidates: AdmissionOffer[];
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
 * Provisioning and termination themselves are jobs (see rental-jobs.names.ts).
 */
export class RentalsService {
  constructor(
    private readonly ds: DataSource,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly ledger: LedgerService,
    private readonly keys: KeysService,
    private readonly jobs: JobQueue,
    private readonly inventory: Pick<InventoryService, 'liveOffer' | 'findCached'>,
    private readonly reads: Pick<RentalReadsService, 'rental'>,
  ) {}

  /**
   * Admission: one transaction of a handful of statements. The offer comes from the in-memory
   * inventory snapshot; the account row lock and the key's counters are one read; the
   * idempotency claim is written with the rental's id; the provision job row is written with
   * the rental (an outbox), so no rental is admitted without its job.
   */
  async create(principal: Principal, idempotencyKeyHeader: string | undefined, body: CreateRentalRequest): Promise<CreateResult> {
    const idemKey = requireIdempotencyKey(idempotencyKeyHeader);
    // The key is part of the intent: one key's request is never answered with another key's rental.
    const request = idempotentRequest(`rental:${principal.accountId}`, idemKey, { ...canonicalIntent(body), keyId: principal.keyId });

    // Inventory is read outside the lock; an error is raised only after the key was found unused,
    // so a replay is never answered with a newer verdict on the offer.
    let resolved: Resolved | AppError;
    try {
      resolved = await this.resolve(body);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      resolved = err;
    }

    const rentalId = randomUUID();
    const outcome = await inSqlTransaction(this.ds, async (m) => {
      // Issued together, so they reach the server as one request (SqlTransaction) and run there
      // in this order: the account lock first, then the claim under it (a concurrent twin waits
      // on the lock and then sees a replay), then the account's reservations, which cannot
      // change until this transaction ends (the key's share of them too).
      const [{ account, usage }, claim, reserved] = await Promise.all([
        this.keys.lockAccountWithUsage(m, principal.key),
        claimIdempotencyKey(m, this.clock, request, rentalId),
        reservedMinor(m, principal.accountId, principal.keyId),
      ]);
      if (claim.kind === 'replay') return { replayOf: claim.resourceId, created: null, wake: null };
      if (resolved instanceof AppError) throw resolved;
      const terms = this.decide(account, principal, body, resolved);
      this.enforceLimits(account, principal, usage, reserved, terms);
      // The rental's rows and its job row, issued together again (one request to the server).
      const created = this.insertRental(m, rentalId, account, principal, body, resolved, terms);
      const wake = this.jobs.nowIn(m, RENTAL_JOBS.provision, { deploymentId: created.deployment.id }, { uniqueKey: created.deployment.id });
      const [, wakeUp] = await Promise.all([created.written, wake]);
      return { replayOf: null, created, wake: wakeUp };
    });

    if (outcome.created === null) return this.replay(outcome.replayOf);
    const { order, deployment, machine } = outcome.created;
    try {
      await outcome.wake();
    } catch (err) {
      // The job row is committed; a worker finds it at its next poll.
      this.logger.warn({ err, deploymentId: deployment.id }, 'could not wake the job processor');
    }
    return { status: 201, rental: toRentalDto(order, deployment, { gpuName: machine.name, gpuCount: machine.gpuCount, provider: machine.provider }) };
  }

  /** Candidates for the request, cheapest first; no live provider search. */
  private async resolve(body: CreateRentalRequest): Promise<Resolved> {
    if ('offerId' in body) {
      const id = body.offerId.toLowerCase();
      // Any offer the cache ever had is admitted; one the provider no longer has fails at
      // provisioning as OFFER_NOT_FOUND with its credits reversed (docs/api.md, Rentals).
      // Live offers come from the in-memory snapshot; only one that left it costs a query.
      const offer = (await this.inventory.liveOffer(id)) ?? (await this.inventory.findCached(id));
      if (!offer) throw new AppError('OFFER_NOT_FOUND', `Offer ${body.offerId} is not known. See GET /api/v1/offers for current offers.`);
      return { requestKind: 'OFFER', candidates: [offer], slug: null };
    }
    // Legacy rentals drop candidates that cannot run the purchased hours, so fetch spares.
    const gpuModel = gpuIntentName(body.gpuModel, body.gpuCount);
    const { slug, candidates } = await findIntentCandidates(this.ds, this.clock.now(), { ...body, gpuModel }, 20);
    return { requestKind: 'INTENT', candidates, slug };
  }

  /** The billing model and purchase, from the account's model and the request (docs/rentals-and-money.md). */
  private decide(account: LockedAccount, principal: Principal, body: CreateRentalRequest, resolved: Resolved): Terms {
    assertNotFrozen(account, 'start rentals');
    if (account.balanceMinor < 0) {
      throw new AppError('ACCOUNT_FROZEN', `This account's credits are negative (${account.balanceMinor} cents); it cannot start rentals. ${topUpAdvice(principal.scopes)}`);
    }
    const budget = body.budgetMinor;
    // One floor for every billing model: a smaller cap stops the machine minutes after it starts.
    if (budget !== undefined && budget < MIN_BUDGET_MINOR) {
      throw new AppError('BUDGET_TOO_SMALL', budgetTooSmallMessage(budget, resolved.candidates[0].pricePerHourMinor));
    }
    if (accountBalanceEligible(account)) {
      // A budget the key cannot honour is refused, not silently lowered to the key's cap.
      if (budget !== undefined && budget > principal.key.maxPerRentalMinor) {
        throw new AppError('KEY_LIMIT_EXCEEDED', budgetOverKeyCapMessage(budget, principal.key.maxPerRentalMinor));
      }
      const cap = budget ?? principal.key.maxPerRentalMinor;
      return {
        billingModel: budget === undefined ? 'ACCOUNT_BALANCE' : 'MAX_SPEND_METERED',
        hours: null,
        durationSeconds: null,
        totalMinor: 0,
        spendCapMinor: cap,
        candidates: resolved.candidates.slice(0, MAX_CANDIDATES),
      };
    }
    if (budget === undefined) {
      throw new AppError(
        'BUDGET_REQUIRED',
        `This account is billed LEGACY_PREPAID: budgetMinor is required, in USD cents, at least ${MIN_BUDGET_MINOR} (${formatCents(MIN_BUDGET_MINOR)}) and enough for one whole hour at the offer's price.`,
      );
    }
    // An offer whose maximum duration is under an hour cannot sell a whole hour.
    const usable = resolved.candidates.filter((o) => o.maximumDurationSeconds >= 3600);
    const first = usable[0] ?? resolved.candidates[0];
    const hours = Math.min(Math.floor(budget / first.pricePerHourMinor), Math.floor(first.maximumDurationSeconds / 3600));
    if (hours < 1) {
      throw new AppError(
        'BUDGET_TOO_SMALL',
        first.maximumDurationSeconds < 3600
          ? 'This offer allows less than one hour, the smallest LEGACY_PREPAID purchase.'
          : `budgetMinor (USD cents) buys no whole hour: one hour costs ${first.pricePerHourMinor} cents (${formatCents(first.pricePerHourMinor)}). Next: send budgetMinor of at least ${first.pricePerHourMinor}.`,
      );
    }
    // Fallbacks must be able to run what was bought; the quoted price holds whichever one runs.
    const candidates = usable.filter((o) => o.maximumDurationSeconds >= hours * 3600).slice(0, MAX_CANDIDATES);
    return {
      billingModel: 'LEGACY_PREPAID',
      hours,
      durationSeconds: hours * 3600,
      totalMinor: hours * first.pricePerHourMinor,
      spendCapMinor: null,
      candidates,
    };
  }

  /**
   * Key limits and credits, from what was read under the account lock (the key's counters and
   * the reservations of the account's live metered rentals), so parallel admissions cannot
   * overshoot. Reservations count against the key's budget as they count against the account's
   * credits: a rental's unspent first hour is money its key may still spend.
   */
  private enforceLimits(account: LockedAccount, principal: Principal, usage: KeyUsage, reserved: Reserved, terms: Terms): void {
    const key = principal.key;
    const remainingKeyBudget = key.budgetLimitMinor - usage.netSpentMinor - reserved.keyMinor;
    // A metered rental needs its own reservation (credit-reservation.ts) out of unreserved credits.
    const price = terms.candidates[0].pricePerHourMinor;
    const needed =
      terms.billingModel === 'LEGACY_PREPAID'
        ? terms.totalMinor
        : outstandingReservationMinor({ hourlyPriceMinor: price, spendCapMinor: terms.spendCapMinor, usageMinor: 0 });

    if (terms.billingModel === 'LEGACY_PREPAID' && terms.totalMinor > key.maxPerRentalMinor) {
      throw new AppError(
        'KEY_LIMIT_EXCEEDED',
        `This rental costs ${terms.totalMinor} cents; this key may spend at most ${key.maxPerRentalMinor} cents per rental.`,
      );
    }
    if (needed > remainingKeyBudget) {
      throw new AppError(
        'KEY_LIMIT_EXCEEDED',
        `This rental needs ${needed} cents of this key's budget; ${Math.max(0, remainingKeyBudget)} cents of its ${key.budgetLimitMinor} remain` +
          (reserved.keyMinor > 0 ? ` (${reserved.keyMinor} reserved by its running metered rentals).` : '.'),
      );
    }
    assertFreeSlot(principal, usage);
    if (account.balanceMinor - reserved.accountMinor < needed) {
      const held = reserved.accountMinor > 0 ? ` (${reserved.accountMinor} of them reserved by its running metered rentals)` : '';
      throw new AppError(
        'INSUFFICIENT_CREDITS',
        `This rental needs ${needed} cents of credits; the account has ${account.balanceMinor}${held}. ${topUpAdvice(principal.scopes)}`,
      );
    }
  }

  /**
   * Issues the writes of the order, its deployment and (legacy) the debit without waiting for
   * them, so the caller can send its own with them; `written` settles when they are done.
   */
  private insertRental(
    m: Sql,
    rentalId: string,
    account: LockedAccount,
    principal: Principal,
    body: CreateRentalRequest,
    resolved: Resolved,
    terms: Terms,
  ): { order: Order; deployment: Deployment; machine: AdmissionOffer; written: Promise<unknown> } {
    const now = this.clock.now();
    const first = terms.candidates[0];
    const intent = 'offerId' in body ? null : (body as GpuIntentRentalRequest);
    const order: Order = {
      id: rentalId,
      accountId: principal.accountId,
      keyId: principal.keyId,
      funding: 'CREDITS',
      billingModel: terms.billingModel,
      status: 'PENDING',
      requestKind: resolved.requestKind,
      offerId: intent ? null : first.id,
      candidateOfferIds: terms.candidates.map((o) => o.id),
      // The name as matched: a count written into it is gpuCount's (gpuIntentName has checked they agree).
      gpuModel: intent ? gpuIntentName(intent.gpuModel, intent.gpuCount) : null,
      gpuSlug: resolved.slug,
      gpuCount: intent ? intent.gpuCount : null,
      maxHourlyPriceMinor: intent ? intent.maxHourlyPriceMinor : null,
      budgetMinor: body.budgetMinor ?? null,
      hourlyPriceMinor: first.pricePerHourMinor,
      durationSeconds: terms.durationSeconds,
      totalMinor: terms.totalMinor,
      currency: first.currency,
      failureCode: null,
      failureReason: null,
      reversalStatus: null,
      createdAt: now,
      updatedAt: now,
    };
    const deployment: Deployment = {
      id: randomUUID(),
      orderId: rentalId,
      accountId: principal.accountId,
      keyId: principal.keyId,
      status: 'PENDING',
      billingModel: terms.billingModel,
      hoursPurchased: terms.hours,
      durationSeconds: terms.durationSeconds,
      startedAt: null,
      endsAt: null,
      endedAt: null,
      providerId: first.provider,
      offerId: first.id,
      hourlyPriceMinor: first.pricePerHourMinor,
      spendCapMinor: terms.spendCapMinor,
      attempt: 0,
      label: null,
      instanceId: null,
      sshHost: null,
      sshPort: null,
      sshUser: null,
      sshPublicKey: null,
      sshPrivateKeyEnc: null,
      sshKeyKid: null,
      meteredUntil: null,
      usageMinor: 0,
      terminateRequestedAt: null,
      terminationReason: null,
      verifyAttempts: 0,
      lastCheckDetail: null,
      statusChangedAt: now,
      createdAt: now,
      updatedAt: now,
    };
    const writes: Promise<unknown>[] = [insertEntity(m, Order, order), insertDeployment(m, deployment)];
    if (terms.totalMinor > 0) {
      const debit = {
        accountId: principal.accountId,
        kind: 'RENTAL_DEBIT' as const,
        amountMinor: -terms.totalMinor,
        externalRef: rentalDebitRef(rentalId),
        description: `Rental ${rentalId}: ${terms.hours} h at ${first.pricePerHourMinor} cents/h`,
        keyId: principal.keyId,
        rentalId,
      };
      writes.push(this.ledger.post(m, debit, account));
    }
    return { order, deployment, machine: first, written: Promise.all(writes) };
  }

  /** The first answer again; its job was written with it, so nothing is queued. */
  private async replay(rentalId: string): Promise<CreateResult> {
    return { status: 200, rental: await this.reads.rental(rentalId) };
  }

  /**
   * Queues a lifecycle job after the state it acts on has committed. A failure is logged, not
   * returned: the state is already written, and the reconciler re-drives deployments left waiting.
   */
  private async enqueue(name: typeof RENTAL_JOBS.provision | typeof RENTAL_JOBS.terminate, deploymentId: string): Promise<void> {
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
    const id = deploymentId.toLowerCase();
    const { enqueue, after } = await inTransaction(this.ds, async (m) => {
      const d = await lockDeploymentOrRentalFor(m, principal, id);
      if (!d) throw notFound('deployment');
      if (isOneOf(TERMINAL_STATUSES, d.status)) return { enqueue: null, after: d };
      await requestTermination(m, d.id, 'REQUESTED', this.clock.now());
      const after = await m.getRepository(Deployment).findOneByOrFail({ id: d.id });
      // AWAITING_PAYMENT keeps its status (the card payment path owns it) but carries the request.
      return { enqueue: d.status !== 'AWAITING_PAYMENT' ? d.id : null, after };
    });
    if (enqueue) await this.enqueue(RENTAL_JOBS.terminate, enqueue);
    return terminateAnswer(after);
  }
}

/** The request as a value: equal intents hash equal whatever their spelling or field order. */
function canonicalIntent(body: CreateRentalRequest): Record<string, unknown> {
  if ('offerId' in body) return { kind: 'OFFER', offerId: body.offerId.toLowerCase(), budgetMinor: body.budgetMinor ?? null };
  return {
    kind: 'INTENT',
    gpuSlug: gpuSlug(body.gpuModel),
    gpuCount: Number(body.gpuCount),
    maxHourlyPriceMinor: body.maxHourlyPriceMinor,
    budgetMinor: body.budgetMinor ?? null,
  };
}
