import { describeGpuChoice } from '../../inventory/gpu-match.js';
import type { Deployment } from '../store/deployment.entity.js';
import type { Order } from '../store/order.entity.js';
import type { MachineColumns } from '../store/machine-secrets.js';
import type { RentalIntent } from './rental-intent.js';

import type { AdmissionOffer, AdmissionTerms } from './admission-terms.js';

// The rows a new rental writes, from its terms: the order, the deployment and the purchase debit.

/** Who a new rental belongs to, and when it was admitted. */
export interface NewRental {
  id: string;
  accountId: string;
  keyId: string;
  funding: Order['funding'];
  now: Date;
}

/** What a GPU intent was matched to at admission (see `IntentCandidates` in offer-candidates.ts). */
export interface IntentMatch {
  /** The order's stored match (`GpuMatch.key`). */
  slug: string;
  /** The match's models with an offer the intent could rent then; none while it waits for capacity. */
  modelsOnSale: readonly string[];
}

/**
 * The order row of a new rental. A card order waits for its payment (AWAITING_PAYMENT); a
 * credit-funded one is PENDING provisioning. `match` is the GPU intent's (null for an offer): its
 * match note is decided here, once, from the models then on sale.
 */
export function newOrder(
  rental: NewRental,
  intent: RentalIntent,
  match: IntentMatch | null,
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
    gpuSlug: match?.slug ?? null,
    gpuMatch: gpu ? gpu.match : null,
    gpuCount: gpu ? gpu.gpuCount : null,
    maxHourlyPriceMinor: gpu ? gpu.maxHourlyPriceMinor : null,
    matchNote: gpu ? describeGpuChoice(gpu.gpuModel, first?.name ?? null, match?.modelsOnSale, gpu.match).note : null,
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
    // Set with each attempt from the offer it runs (create-attempts.ts), like a metered hourly price.
    trafficUpPriceMicro: null,
    trafficDownPriceMicro: null,
    trafficUpBytes: 0,
    trafficDownBytes: 0,
    trafficReadAt: null,
    trafficMinor: 0,
    postedTrafficMinor: 0,
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
