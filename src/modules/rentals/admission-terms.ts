import { budgetOverKeyCapMessage, budgetTooSmallMessage } from '../../../clients/sdk/src/hints.js';
import { AppError } from '../../errors/app-error.js';
import type { Account } from '../accounts/account.entity.js';
import { accountBalanceEligible, assertNotFrozen } from '../accounts/billing-eligibility.js';
import { outstandingReservationMinor, type Reserved } from './credit-reservation.js';
import { formatUsd } from '../billing/money.js';
import { topUpAdvice } from '../billing/top-up-advice.js';
import type { Offer } from '../inventory/offer.entity.js';
import type { Principal } from '../keys/principal.js';
import type { KeyUsage } from '../keys/keys.service.js';
import { assertFreeSlot } from './concurrency-slot.js';
import type { Deployment } from './deployment.entity.js';
import type { Order } from './order.entity.js';
import {
  FAILED_AFTER_USE_LIMIT,
  FAILED_AFTER_USE_WINDOW_MS,
  MAX_CANDIDATES,
  METERING_LAG_MIN_MS,
  METERING_LAG_PERIODS,
  MIN_BUDGET_MINOR,
} from './rental-limits.js';
import { chargeEnd } from './lifecycle/metering.js';
import type { DeploymentBillingModel } from './rental-status.js';
import type { MachineColumns } from './machine-secrets.js';
import { leaseSeconds } from './machine-settings.js';
import type { GpuIntent, RentalIntent } from './rental-intent.js';

// The terms of one admission, credit-funded or card-funded, as plain functions of what was read:
// no database here, so each rule is decided once and tested without one. The services read the
// rows, call these, and write what they return. The request itself is parsed in rental-intent.ts.

/** What admission needs of an offer: the snapshot's entry or a cached row. */
export type AdmissionOffer = Pick<
  Offer,
  'id' | 'name' | 'gpuCount' | 'pricePerHourMinor' | 'currency' | 'maximumDurationSeconds' | 'provider'
>;

/** What admission decided about money and machines, before anything is written. */
export interface AdmissionTerms {
  billingModel: DeploymentBillingModel;
  /** Whole purchased hours (LEGACY_PREPAID); null for metered rentals. */
  hours: number | null;
  durationSeconds: number | null;
  /** Paid at admission: debited from credits, or charged to the card. */
  totalMinor: number;
  spendCapMinor: number | null;
  /**
   * The offers provisioning tries, in order; the first sets the quoted price. Empty while a GPU
   * intent waits for capacity: provisioning chooses them when an eligible offer appears.
   */
  candidates: AdmissionOffer[];
  /** The quoted price per hour: the first candidate's, or the ceiling of an intent waiting for capacity. */
  hourlyPriceMinor: number;
  currency: string;
  /** The lease in force (see `leaseSeconds` in machine-settings.ts); null: none. */
  leaseSeconds: number | null;
}

/** The account's side of admission, as read under its row lock. */
export type PayingAccount = Pick<Account, 'billingModel' | 'frozen' | 'balanceMinor'>;

/** The caller's side of admission: its key's limits and its scopes. */
export type AdmittingKey = Pick<Principal, 'key' | 'scopes'>;

/** Whole purchased hours (docs/rentals-and-money.md): never more than the budget or the offer allows. */
export function purchasedHours(
  budgetMinor: number,
  offer: Pick<Offer, 'pricePerHourMinor' | 'maximumDurationSeconds'>,
): number {
  return Math.min(Math.floor(budgetMinor / offer.pricePerHourMinor), Math.floor(offer.maximumDurationSeconds / 3600));
}

/** Largest budget the card path accepts for an offer: its price over its whole maximum duration. */
export function maxCheckoutBudget(offer: Pick<Offer, 'pricePerHourMinor' | 'maximumDurationSeconds'>): number {
  return Math.floor((offer.pricePerHourMinor * offer.maximumDurationSeconds) / 3600);
}

/** LEGACY_PREPAID terms of `hours` of `first`, falling back only to `fallbacks` that can run them. */
function prepaid(
  hours: number,
  first: AdmissionOffer,
  fallbacks: AdmissionOffer[],
  lease: number | null,
): AdmissionTerms {
  return {
    billingModel: 'LEGACY_PREPAID',
    hours,
    durationSeconds: hours * 3600,
    totalMinor: hours * first.pricePerHourMinor,
    spendCapMinor: null,
    // Fallbacks must be able to run what was bought; the quoted price holds whichever one runs.
    candidates: fallbacks.filter((o) => o.maximumDurationSeconds >= hours * 3600).slice(0, MAX_CANDIDATES),
    hourlyPriceMinor: first.pricePerHourMinor,
    currency: first.currency,
    leaseSeconds: lease,
  };
}

/** The lease of a rental of `first`; fallbacks that cannot run that long are left out by {@link runLease}. */
function leaseOf(
  caller: AdmittingKey,
  terminateAfterSeconds: number | null,
  first: AdmissionOffer | null,
): number | null {
  return leaseSeconds({
    terminateAfterSeconds,
    keyMaxRentalSeconds: caller.key.maxRentalSeconds ?? null,
    // An intent waiting for capacity has no offer yet: provisioning keeps to offers that run the lease.
    offerMaximumDurationSeconds: first?.maximumDurationSeconds ?? Number.MAX_SAFE_INTEGER,
  });
}

/**
 * A prepaid rental must be able to run what it buys: hours beyond its lease would be paid for and
 * never run, so such a purchase is refused (never shortened), saying what budget fits the lease.
 */
function assertLeaseRunsPurchase(hours: number, first: AdmissionOffer, lease: number | null): void {
  if (lease === null || hours * 3600 <= lease) return;
  const fits = Math.floor(lease / 3600);
  throw new AppError(
    'VALIDATION_FAILED',
    `Invalid request: budgetMinor: it buys ${hours} whole hour${hours === 1 ? '' : 's'}, longer than the rental's lease of ${lease} seconds (terminateAfterSeconds, or the key's maxRentalSeconds). ` +
      (fits >= 1
        ? `Send budgetMinor of at most ${fits * first.pricePerHourMinor} (${fits} hour${fits === 1 ? '' : 's'} at ${first.pricePerHourMinor} cents), or a longer lease.`
        : 'A prepaid rental buys whole hours, so its lease must be at least 3600 seconds.'),
  );
}

/** Candidates that can run the whole lease. */
function runLease(candidates: AdmissionOffer[], lease: number | null): AdmissionOffer[] {
  return lease === null ? candidates : candidates.filter((o) => o.maximumDurationSeconds >= lease);
}

/**
 * The billing model and purchase of a credit-funded rental, from the account's model and the
 * budget asked for (docs/rentals-and-money.md); `candidates` are cheapest first.
 */
export function creditTerms(
  account: PayingAccount,
  caller: AdmittingKey,
  budget: number | null,
  offers: AdmissionOffer[],
  terminateAfterSeconds: number | null = null,
): AdmissionTerms {
  const lease = leaseOf(caller, terminateAfterSeconds, offers[0]);
  // The lease is checked against the cheapest offer; fallbacks that cannot run it are dropped.
  const candidates = [offers[0], ...runLease(offers.slice(1), lease)];
  assertNotFrozen(account, 'start rentals');
  if (account.balanceMinor < 0) {
    throw new AppError(
      'ACCOUNT_FROZEN',
      `This account's credits are negative (${account.balanceMinor} cents); it cannot start rentals. ${topUpAdvice(caller.scopes)}`,
    );
  }
  // One floor for every billing model: a smaller cap stops the machine minutes after it starts.
  if (budget !== null && budget < MIN_BUDGET_MINOR) {
    throw new AppError('BUDGET_TOO_SMALL', budgetTooSmallMessage(budget, candidates[0].pricePerHourMinor));
  }
  if (accountBalanceEligible(account)) {
    // A budget the key cannot honour is refused, not silently lowered to the key's cap.
    if (budget !== null && budget > caller.key.maxPerRentalMinor) {
      throw new AppError('KEY_LIMIT_EXCEEDED', budgetOverKeyCapMessage(budget, caller.key.maxPerRentalMinor));
    }
    return {
      billingModel: budget === null ? 'ACCOUNT_BALANCE' : 'MAX_SPEND_METERED',
      hours: null,
      durationSeconds: null,
      totalMinor: 0,
      spendCapMinor: budget ?? caller.key.maxPerRentalMinor,
      candidates: candidates.slice(0, MAX_CANDIDATES),
      hourlyPriceMinor: candidates[0].pricePerHourMinor,
      currency: candidates[0].currency,
      leaseSeconds: lease,
    };
  }
  if (budget === null) {
    throw new AppError(
      'BUDGET_REQUIRED',
      `This account is billed LEGACY_PREPAID: budgetMinor is required, in USD cents, at least ${MIN_BUDGET_MINOR} (${formatUsd(MIN_BUDGET_MINOR)}) and enough for one whole hour at the offer's price.`,
    );
  }
  // An offer whose maximum duration is under an hour cannot sell a whole hour.
  const usable = candidates.filter((o) => o.maximumDurationSeconds >= 3600);
  const first = usable[0] ?? candidates[0];
  const hours = purchasedHours(budget, first);
  if (hours < 1) {
    throw new AppError(
      'BUDGET_TOO_SMALL',
      first.maximumDurationSeconds < 3600
        ? 'This offer allows less than one hour, the smallest LEGACY_PREPAID purchase.'
        : `budgetMinor (USD cents) buys no whole hour: one hour costs ${first.pricePerHourMinor} cents (${formatUsd(first.pricePerHourMinor)}). Next: send budgetMinor of at least ${first.pricePerHourMinor}.`,
    );
  }
  assertLeaseRunsPurchase(hours, first, lease);
  return prepaid(hours, first, usable, lease);
}

/**
 * The terms of a GPU intent admitted to wait for capacity: metered (only a metered rental can wait,
 * since nothing is bought before the machine is known), reserving at the intent's price ceiling
 * until provisioning chooses its offers.
 */
export function waitingTerms(account: PayingAccount, caller: AdmittingKey, intent: GpuIntent): AdmissionTerms {
  assertNotFrozen(account, 'start rentals');
  if (!accountBalanceEligible(account)) {
    throw new AppError(
      'VALIDATION_FAILED',
      'Invalid request: waitForCapacitySeconds: only accounts billed by usage (ACCOUNT_BALANCE) can wait for capacity; this account is LEGACY_PREPAID. Send the rental without it when an offer is available.',
    );
  }
  const ceiling: AdmissionOffer = {
    id: '',
    name: intent.gpuModel,
    gpuCount: intent.gpuCount,
    pricePerHourMinor: intent.maxHourlyPriceMinor,
    currency: 'USD',
    maximumDurationSeconds: Number.MAX_SAFE_INTEGER,
    provider: '',
  };
  const terms = creditTerms(account, caller, intent.budgetMinor, [ceiling], intent.terminateAfterSeconds);
  return { ...terms, candidates: [] };
}

/**
 * The terms of a card order for `offer` (LEGACY_PREPAID, paid by card, so neither credits nor
 * the key's budget are asked): whole hours of the offer, up to its whole maximum duration.
 */
export function cardTerms(offer: AdmissionOffer, budgetMinor: number, caller: AdmittingKey): AdmissionTerms {
  const max = maxCheckoutBudget(offer);
  if (budgetMinor > max) {
    throw new AppError(
      'VALIDATION_FAILED',
      `Invalid request: budgetMinor: must be at most ${max} for this offer (its price over its maximum duration).`,
    );
  }
  const hours = purchasedHours(budgetMinor, offer);
  if (hours < 1) {
    throw new AppError(
      'BUDGET_TOO_SMALL',
      `budgetMinor buys no whole hour of this offer; one hour costs ${offer.pricePerHourMinor}.`,
    );
  }
  const lease = leaseOf(caller, null, offer);
  assertLeaseRunsPurchase(hours, offer, lease);
  return prepaid(hours, offer, [offer], lease);
}

/**
 * Key limits and credits of a credit-funded rental, from what was read under the account lock
 * (the key's counters and the reservations of the account's live metered rentals), so parallel
 * admissions cannot overshoot. Reservations count against the key's budget as they count against
 * the account's credits: a rental's unspent first hour is money its key may still spend.
 */
export function assertCreditLimits(
  account: PayingAccount,
  caller: AdmittingKey,
  usage: KeyUsage,
  reserved: Reserved,
  terms: AdmissionTerms,
): void {
  const key = caller.key;
  const remainingKeyBudget = key.budgetLimitMinor - usage.netSpentMinor - reserved.keyMinor;
  // A metered rental needs its own reservation (credit-reservation.ts) out of unreserved credits.
  const price = terms.hourlyPriceMinor;
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
  assertFreeSlot(caller, usage);
  if (account.balanceMinor - reserved.accountMinor < needed) {
    const held =
      reserved.accountMinor > 0 ? ` (${reserved.accountMinor} of them reserved by its running metered rentals)` : '';
    throw new AppError(
      'INSUFFICIENT_CREDITS',
      `This rental needs ${needed} cents of credits; the account has ${account.balanceMinor}${held}. ${topUpAdvice(caller.scopes)}`,
    );
  }
}

/** Seconds until `ms` (at least one), as a `Retry-After` value. */
const secondsUntil = (ms: number, now: Date) => Math.max(1, Math.ceil((ms - now.getTime()) / 1000));

/**
 * THE limit on rentals whose machines worked for the key without ever passing the check
 * (`recent`: when each first let the check in, newest first, within the last
 * {@link FAILED_AFTER_USE_WINDOW_MS}): at {@link FAILED_AFTER_USE_LIMIT} the key starts nothing more
 * until the oldest of them leaves the window. Their time was charged; the limit keeps a key from
 * making a habit of it.
 */
export function assertFailedAfterUseUnderLimit(recent: readonly Date[], now: Date): void {
  if (recent.length < FAILED_AFTER_USE_LIMIT) return;
  const liftsAt = recent[FAILED_AFTER_USE_LIMIT - 1].getTime() + FAILED_AFTER_USE_WINDOW_MS;
  const wait = secondsUntil(liftsAt, now);
  throw new AppError(
    'RATE_LIMITED',
    `This key's last ${FAILED_AFTER_USE_LIMIT} rentals failed within ${FAILED_AFTER_USE_WINDOW_MS / 3600_000} hours after their machines ran its startup script or image without passing the service's check (the startup marker or the GPUs were missing, or the check was held up), so it can start rentals again at ${new Date(liftsAt).toISOString()}, in ${wait} s. ` +
      'A startup script must leave ~/.gpr/startup-started and nvidia-smi in place.',
    { 'Retry-After': String(wait) },
  );
}

/**
 * THE metering-lag rule: the account's credits are exact only up to where metering has charged
 * its running rentals. While one of them (`rentals`: its live metered rentals) has gone uncharged
 * for longer than {@link METERING_LAG_PERIODS} periods of `meteringEveryMs` (as while the worker
 * is away), the balance holds money those rentals have used, so no credit-funded rental is
 * admitted against it; the refusal lifts once metering catches up.
 */
export function assertMeteringCaughtUp(
  rentals: readonly Pick<Deployment, 'meteredUntil' | 'endsAt' | 'terminateRequestedAt'>[],
  now: Date,
  meteringEveryMs: number,
): void {
  const nowMs = now.getTime();
  const lagMs = Math.max(
    0,
    ...rentals.map((r) => (r.meteredUntil ? chargeEnd(r, nowMs) - r.meteredUntil.getTime() : 0)),
  );
  if (lagMs <= Math.max(METERING_LAG_PERIODS * meteringEveryMs, METERING_LAG_MIN_MS)) return;
  const wait = secondsUntil(nowMs + meteringEveryMs, now);
  throw new AppError(
    'UNAVAILABLE',
    `Billing is catching up: this account's running rentals have not been charged for the last ${Math.floor(lagMs / 1000)} s (the service's metering is behind, as while its worker restarts), so no new rental starts on credits they may have used. Retry in ${wait} s.`,
    { 'Retry-After': String(wait) },
  );
}

/** Who a new rental belongs to, and when it was admitted. */
export interface NewRental {
  id: string;
  accountId: string;
  keyId: string;
  funding: Order['funding'];
  now: Date;
}

/**
 * The order row of a new rental. A card order waits for its payment (AWAITING_PAYMENT); a
 * credit-funded one is PENDING provisioning. `slug` is the GPU intent's stored match (null for an offer).
 */
export function newOrder(
  rental: NewRental,
  intent: RentalIntent,
  slug: string | null,
  terms: AdmissionTerms,
  machine: MachineColumns,
): Order {
  const first = terms.candidates[0] as AdmissionOffer | undefined;
  const gpu = intent.kind === 'INTENT' ? intent : null;
  // Only an intent with no candidate yet waits (admission decided it may).
  const waitSeconds = gpu && !first ? gpu.waitForCapacitySeconds : null;
  return {
    id: rental.id,
    accountId: rental.accountId,
    keyId: rental.keyId,
    funding: rental.funding,
    billingModel: terms.billingModel,
    status: rental.funding === 'CARD' ? 'AWAITING_PAYMENT' : 'PENDING',
    requestKind: intent.kind,
    offerId: gpu ? null : (first?.id ?? null),
    candidateOfferIds: terms.candidates.map((o) => o.id),
    gpuModel: gpu ? gpu.gpuModel : null,
    gpuSlug: slug,
    gpuCount: gpu ? gpu.gpuCount : null,
    maxHourlyPriceMinor: gpu ? gpu.maxHourlyPriceMinor : null,
    budgetMinor: intent.budgetMinor,
    hourlyPriceMinor: terms.hourlyPriceMinor,
    durationSeconds: terms.durationSeconds,
    totalMinor: terms.totalMinor,
    currency: terms.currency,
    failureCode: null,
    failureReason: null,
    reversalStatus: null,
    ...machine,
    terminateAfterSeconds: intent.terminateAfterSeconds,
    waitForCapacityUntil: waitSeconds === null ? null : new Date(rental.now.getTime() + waitSeconds * 1000),
    createdAt: rental.now,
    updatedAt: rental.now,
  };
}

/** The deployment row of a new rental's `order`: the machine it will try first, nothing started yet. */
export function newDeployment(id: string, order: Order, terms: AdmissionTerms): Deployment {
  const first = terms.candidates[0] as AdmissionOffer | undefined;
  const now = order.createdAt;
  const waiting = order.waitForCapacityUntil !== null;
  return {
    id,
    orderId: order.id,
    accountId: order.accountId,
    keyId: order.keyId,
    status: order.status,
    billingModel: terms.billingModel,
    hoursPurchased: terms.hours,
    durationSeconds: terms.durationSeconds,
    startedAt: null,
    endsAt: null,
    endedAt: null,
    providerId: first?.provider ?? null,
    offerId: first?.id ?? null,
    hourlyPriceMinor: terms.hourlyPriceMinor,
    spendCapMinor: terms.spendCapMinor,
    attempt: 0,
    label: null,
    instanceId: null,
    sshHost: null,
    sshPort: null,
    sshUser: null,
    sshHostKey: null,
    sshPublicKey: null,
    sshPrivateKeyEnc: null,
    sshKeyKid: null,
    meteredUntil: null,
    usageMinor: 0,
    postedUsageMinor: 0,
    postedUntil: null,
    terminateRequestedAt: null,
    terminationReason: null,
    verifyAttempts: 0,
    lastCheckDetail: null,
    phase: waiting ? 'waiting_for_capacity' : null,
    phaseSince: waiting ? now : null,
    endpoints: null,
    leaseSeconds: terms.leaseSeconds,
    usableAt: null,
    statusChangedAt: now,
    createdAt: now,
    updatedAt: now,
  };
}

/** The ledger debit of a prepaid rental's purchase, or null when nothing is paid at admission. */
export function rentalDebitTerms(
  order: Order,
  terms: AdmissionTerms,
): { amountMinor: number; description: string } | null {
  if (terms.totalMinor <= 0) return null;
  return {
    amountMinor: -terms.totalMinor,
    description: `Rental ${order.id}: ${terms.hours} h at ${order.hourlyPriceMinor} cents/h`,
  };
}
