import { budgetOverKeyCapMessage, budgetTooSmallMessage } from '../../../vocabulary/budget-hints.js';
import { AppError } from '../../../errors/app-error.js';
import type { Account } from '../../accounts/account.entity.js';
import { accountBalanceEligible, assertNotFrozen } from '../../accounts/billing-eligibility.js';
import { formatUsd } from '../../../vocabulary/money.js';
import { topUpAdvice } from '../../billing/top-up-advice.js';
import type { Offer } from '../../inventory/offer.entity.js';
import type { Principal } from '../../keys/principal.js';
import { MAX_CANDIDATES, MIN_BUDGET_MINOR } from './rental-limits.js';
import type { DeploymentBillingModel } from '../state/rental-status.js';
import { leaseSeconds } from './machine-settings.js';
import type { GpuIntent } from './rental-intent.js';

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

/**
 * The one budget floor of every rental, credit-funded or card-funded, whatever the billing model:
 * a smaller cap stops the machine minutes after it starts.
 */
function assertBudgetOverFloor(budgetMinor: number, first: Pick<AdmissionOffer, 'pricePerHourMinor'>): void {
  if (budgetMinor < MIN_BUDGET_MINOR)
    throw new AppError('BUDGET_TOO_SMALL', budgetTooSmallMessage(budgetMinor, first.pricePerHourMinor));
}

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
  if (budget !== null) assertBudgetOverFloor(budget, candidates[0]);
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
  assertBudgetOverFloor(budgetMinor, offer);
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
