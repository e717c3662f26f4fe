import type { GpuMatchedBy } from '../../inventory/gpu-match.js';
import type { MachineSettingsRequest } from './machine-settings.dto.js';
import type {
  ApiTerminationReason,
  DeploymentBillingModel,
  FailureCode,
  MachinePhase,
  RentalStatus,
  ReversalStatus,
} from '../state/rental-status.js';

/**
 * Rent one exact cached offer. Never substituted: if the provider no longer has it at
 * provisioning time the rental fails with OFFER_NOT_FOUND and its credits are reversed.
 */
export interface OfferRentalRequest {
  /**
   * The exact offer id from GET /api/v1/offers.
   * @pattern ^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$
   */
  offerId: string;
  /**
   * The most the whole rental may cost (not per GPU), in USD cents: 500 = $5.00. At least 500
   * on every account (422 BUDGET_TOO_SMALL below: a smaller cap stops the machine minutes after
   * it starts). LEGACY_PREPAID: required, buys whole hours. ACCOUNT_BALANCE: optional; with it the
   * rental is MAX_SPEND_METERED and terminated once it has cost this much (or the key's per-rental
   * cap, if lower). Check `billing.budgetRequired` on GET /api/v1/me before omitting it.
   * @isInt
   * @maximum 1000000000
   */
  budgetMinor?: number;
  /**
   * What runs on the machine: image, environment, startup script, ports, disk. Optional; see each
   * setting. An offer that cannot honour a setting is refused with 422 naming it.
   */
  machine?: MachineSettingsRequest;
  /**
   * A lease: the rental is terminated (reason EXPIRED) this many seconds after it becomes ACTIVE,
   * whatever its billing model; 60 up to the offer's maximumDurationSeconds. Above the key's
   * `maxRentalSeconds` it is refused with 422 (never shortened); without it, a key's
   * `maxRentalSeconds` is the lease. Shown as `endsAt` once ACTIVE.
   * @isInt
   * @minimum 60
   * @maximum 31536000
   */
  terminateAfterSeconds?: number;
}

/** GPUs in a GPU-intent rental. */
export type GpuCount = 1 | 2 | 4 | 8;

/**
 * Rent by intent: the cheapest cached offers of this GPU model and count at or under the price
 * ceiling (up to three, cheapest first) are tried in order when a candidate is unavailable.
 */
export interface GpuIntentRentalRequest {
  /**
   * A GPU family (`H100`, `4090`, `A100`: the cheapest offer of any model of it, so `A100` may
   * be a 40 GB part) or a precise model (`H100 SXM`, `h100-sxm`, `A100 80GB`); spacing, case and
   * vendor words are normalized (`NVIDIA H100 SXM`, `h100sxm` and `H100-SXM` are the same model).
   * The count belongs in gpuCount; a count in the name (`2x H100`) must equal it (else 422).
   * The rental's `matchedBy` and `matchNote` say what was chosen. See GET /api/v1/gpus for slugs and families.
   * @minLength 1
   * @maxLength 100
   */
  gpuModel: string;
  /** GPUs in the instance: 1, 2, 4 or 8. */
  gpuCount: GpuCount;
  /**
   * The most per hour for the whole instance, in USD cents (350 = $3.50); never exceeded.
   * @isInt
   * @minimum 1
   * @maximum 100000000
   */
  maxHourlyPriceMinor: number;
  /**
   * The most the whole rental may cost, in USD cents (500 = $5.00), at least 500; as for an explicit offer.
   * @isInt
   * @maximum 1000000000
   */
  budgetMinor?: number;
  /**
   * What runs on the machine: image, environment, startup script, ports, disk. Optional; see each
   * setting. An offer that cannot honour a setting is refused with 422 naming it.
   */
  machine?: MachineSettingsRequest;
  /**
   * A lease: the rental is terminated (reason EXPIRED) this many seconds after it becomes ACTIVE,
   * whatever its billing model; 60 up to the offer's maximumDurationSeconds. Above the key's
   * `maxRentalSeconds` it is refused with 422 (never shortened); without it, a key's
   * `maxRentalSeconds` is the lease. Shown as `endsAt` once ACTIVE.
   * @isInt
   * @minimum 60
   * @maximum 31536000
   */
  terminateAfterSeconds?: number;
  /**
   * When no eligible offer is on sale now, wait up to this many seconds (60 to 86,400) instead of
   * failing: the rental stays PENDING in phase `waiting_for_capacity`, holding its credit
   * reservation, and starts as soon as the inventory shows an eligible offer; at the deadline it
   * fails with NO_CAPACITY and what it held is released. Metered billing (ACCOUNT_BALANCE) only.
   * @isInt
   * @minimum 60
   * @maximum 86400
   */
  waitForCapacitySeconds?: number;
}

/** Exactly one of the two shapes, with no other properties. */
export type CreateRentalRequest = OfferRentalRequest | GpuIntentRentalRequest;

export interface QuoteDto {
  /** Customer cents per hour for the whole instance. */
  hourlyPriceMinor: number;
  /** Purchased runtime of a LEGACY_PREPAID rental; null for ACCOUNT_BALANCE and MAX_SPEND_METERED. */
  durationSeconds: number | null;
  /** What LEGACY_PREPAID debited at admission; 0 for metered rentals (usage is charged as it accrues). */
  totalMinor: number;
  currency: string;
  /**
   * How the rental is paid: `PREPAID` (totalMinor debited at admission for durationSeconds) or
   * `PER_SECOND` (nothing up front: usage at hourlyPriceMinor per second while ACTIVE; see usageMinor).
   */
  charging: 'PREPAID' | 'PER_SECOND';
  /** The quote in words, e.g. "Charged per second while ACTIVE at 299 cents per hour ($2.99); nothing is taken up front." */
  note: string;
}

/** An exposed port of a rental's machine. */
export interface EndpointDto {
  /** @isInt */
  port: number;
  /**
   * Where the port answers over HTTP(S).
   * @format uri
   */
  url: string;
}

/** What runs on a rental's machine, as asked; environment values and the script are never shown. */
export interface MachineDto {
  /** The container image asked for; null: the provider's default. */
  image: string | null;
  /** Names of the environment variables set (their values are sealed and never returned). */
  envNames: string[];
  /** SHA-256 (hex) of the startup script; null without one. The script itself is never returned. */
  startupScriptSha256: string | null;
  /** Ports asked to be exposed over HTTP(S); see `endpoints`. */
  ports: number[];
  /** Disk asked for, in GB; null: the offer's default. */
  diskGb: number | null;
}

export interface DeploymentDto {
  id: string;
  /** The rental (order) this deployment belongs to. */
  rentalId: string;
  /** PENDING, PROVISIONING, ACTIVE, TERMINATING, TERMINATED, FAILED (AWAITING_PAYMENT for unpaid card orders). */
  status: RentalStatus;
  /** Name of the GPU model the rental runs (or will try first), e.g. `NVIDIA H100 SXM`. */
  gpuName: string | null;
  /** GPUs in the machine. */
  gpuCount: number | null;
  /** Id of the provider plugin running (or about to run) the machine, e.g. `local`, `runpod`. */
  provider: string | null;
  /**
   * Why the rental was ended, once someone ended it: USER (a terminate call or the owner's
   * Terminate button), SPEND_CAP (usage reached the rental's cap), KEY_BUDGET (the key's total
   * budget ran out), CREDITS (the account's credits ran out), EXPIRED (a prepaid rental reached
   * its purchased end), IDLE (its GPUs stayed idle for the key's `idleTerminateMinutes` and
   * through the grace after `rental.idle_warning`). Null while it runs and for rentals that
   * failed before running.
   */
  terminationReason: ApiTerminationReason | null;
  /** Fixed at admission; never changes afterwards. */
  billingModel: DeploymentBillingModel;
  /** Whole purchased hours; null for ACCOUNT_BALANCE and MAX_SPEND_METERED. */
  hoursPurchased: number | null;
  /** Purchased runtime in seconds; null for ACCOUNT_BALANCE and MAX_SPEND_METERED. */
  durationSeconds: number | null;
  /**
   * When the rental ends by itself, once ACTIVE: the end of a LEGACY_PREPAID purchase or of a
   * lease (`terminateAfterSeconds`, or the key's `maxRentalSeconds`), whichever comes first; it is
   * then terminated with reason EXPIRED. Null when it has no end.
   * @format date-time
   */
  endsAt: string | null;
  /** While PENDING or PROVISIONING: where provisioning stands; null otherwise. */
  phase: MachinePhase | null;
  /**
   * When the deployment entered `phase`.
   * @format date-time
   */
  phaseSince: string | null;
  /** Once ACTIVE: the public URL of each port asked for in `machine.ports`. */
  endpoints: EndpointDto[];
  /**
   * The verified destruction time, once TERMINATED; null before, and always null for card-funded rentals.
   * @format date-time
   */
  endedAt: string | null;
  /**
   * When the deployment became ACTIVE.
   * @format date-time
   */
  startedAt: string | null;
  /** Customer cents per hour of the offer being run. */
  hourlyPriceMinor: number;
  /** Metered rentals: usage at which the rental is stopped: budgetMinor, or the key's per-rental cap when none was given (a larger budgetMinor is refused). */
  spendCapMinor: number | null;
  /**
   * Usage charged so far, in cents: a metered rental's ACTIVE time; for any rental that failed or
   * ended before ACTIVE after its machine ran its script or image and let the check in, that time.
   */
  usageMinor: number;
  /**
   * The internet traffic the machine moved and what it cost, when its offer bills traffic per GB
   * (`trafficPricePerGb` on the offer); null: its traffic is free. Charged as used, beside
   * `usageMinor`, as TRAFFIC ledger entries; time and traffic together stay within `spendCapMinor`.
   */
  traffic: RentalTrafficDto | null;
  /** The cached offer of the current (or last) create attempt. */
  offerId: string | null;
  providerId: string | null;
  /** @format date-time */
  terminateRequestedAt: string | null;
  /** @format date-time */
  createdAt: string;
}

/** A rental's internet traffic, as its instance's billed counters last showed it. */
export interface RentalTrafficDto {
  /**
   * Bytes the machine has sent, in all (1 GB = 2^30 bytes).
   * @isInt
   */
  sentBytes: number;
  /**
   * Bytes the machine has received, in all.
   * @isInt
   */
  receivedBytes: number;
  /**
   * The rental's per-GB prices, in millionths of a USD (markup included).
   */
  pricePerGb: RentalTrafficPriceDto;
  /**
   * Traffic charged so far, in cents (taken from the credits at each metering sweep, posted to the ledger hourly).
   * @isInt
   */
  chargedMinor: number;
  /**
   * When the counters were last read from the provider; null: not yet.
   * @format date-time
   */
  readAt: string | null;
}

/** Per-GB traffic prices, in millionths of a USD. */
export interface RentalTrafficPriceDto {
  /** @isInt */
  upMicroUsd: number;
  /** @isInt */
  downMicroUsd: number;
}

export interface RentalDto {
  /** Equals orderId. */
  rentalId: string;
  orderId: string;
  deploymentId: string | null;
  /** PENDING, PROVISIONING, ACTIVE, TERMINATING, TERMINATED, FAILED (AWAITING_PAYMENT for unpaid card orders). */
  status: RentalStatus;
  /** Name of the GPU model the rental runs (or will try first), e.g. `NVIDIA H100 SXM`. */
  gpuName: string | null;
  /**
   * How gpuName was chosen: `offer` (the offerId asked for), `model` (gpuModel named that model,
   * or its parts of one VRAM size) or `family` (gpuModel named a family, e.g. `A100`: the cheapest
   * offer of any of its models, which may not be the one meant).
   */
  matchedBy: GpuMatchedBy;
  /**
   * The choice in words, and how to name another model of the family.
   * @example "The offer named by offerId, as asked; it is never substituted."
   */
  matchNote: string;
  /** GPUs in the machine. */
  gpuCount: number | null;
  /** Id of the provider plugin running (or about to run) the machine, e.g. `local`, `runpod`. */
  provider: string | null;
  /**
   * Why the rental was ended, once someone ended it: USER (a terminate call or the owner's
   * Terminate button), SPEND_CAP (usage reached the rental's cap), KEY_BUDGET (the key's total
   * budget ran out), CREDITS (the account's credits ran out), EXPIRED (a prepaid rental reached
   * its purchased end), IDLE (its GPUs stayed idle for the key's `idleTerminateMinutes` and
   * through the grace after `rental.idle_warning`). Null while it runs and for rentals that
   * failed before running.
   */
  terminationReason: ApiTerminationReason | null;
  /**
   * Same as deployment.endedAt.
   * @format date-time
   */
  endedAt: string | null;
  deployment: DeploymentDto | null;
  /** What runs on the machine, as asked (`machine` of the request). */
  machine: MachineDto;
  /** While PENDING or PROVISIONING: where provisioning stands (`waiting_for_capacity` while a GPU intent waits); null otherwise. */
  phase: MachinePhase | null;
  /**
   * When the rental entered `phase`.
   * @format date-time
   */
  phaseSince: string | null;
  /** Once ACTIVE: the public URL of each port in `machine.ports`. */
  endpoints: EndpointDto[];
  /**
   * Same as deployment.endsAt: when the rental ends by itself (prepaid purchase or lease), once ACTIVE.
   * @format date-time
   */
  endsAt: string | null;
  /** The lease in force, counted from ACTIVE: `terminateAfterSeconds`, else the key's `maxRentalSeconds`; null without one. */
  leaseSeconds: number | null;
  /**
   * A GPU intent that asked to wait for capacity: until when it waits PENDING for an eligible offer
   * (then it fails with NO_CAPACITY); null otherwise.
   * @format date-time
   */
  waitForCapacityUntil: string | null;
  quote: QuoteDto;
  billingModel: DeploymentBillingModel;
  /** CREDITS for API rentals, CARD for the human checkout path. */
  funding: 'CREDITS' | 'CARD';
  /** Offer ids chosen at admission, in the order they are tried (cheapest first). */
  candidateOfferIds: string[];
  /** When FAILED: a stable code, e.g. OFFER_NOT_FOUND or NO_MATCHING_OFFER; null otherwise. */
  failureCode: FailureCode | null;
  /** When FAILED: a customer-safe explanation; null otherwise. */
  failureReason: string | null;
  /** When FAILED: whether the rental's debit has been returned (PENDING, then SUCCEEDED); null otherwise. */
  reversalStatus: ReversalStatus | null;
  /** @format date-time */
  createdAt: string;
}

/** `meta` of a rentals page: the envelope's fields and where the next page starts. */
export interface RentalPageMeta {
  requestId: string;
  apiVersion: string;
  /** Pass as `cursor` for the next (older) page; null on the last page. */
  nextCursor: string | null;
}

/** A page of rentals, newest first. */
export interface RentalPage {
  data: RentalDto[];
  meta: RentalPageMeta;
}

/** The answer to a terminate request, first or repeated: where the deployment stands now. */
export interface TerminateAccepted {
  /** Always true: the request is recorded (or there was nothing left to terminate). */
  accepted: boolean;
  deploymentId: string;
  rentalId: string;
  /**
   * The status after the request: TERMINATING until destruction is verified, then TERMINATED;
   * TERMINATED or FAILED when it had already finished; AWAITING_PAYMENT for an unpaid card order,
   * which then never starts.
   */
  status: RentalStatus;
  /**
   * When termination was first asked for (by a caller, the owner, the rental's end or a spending
   * limit); null when nothing asked for it (a rental that failed before it ran).
   * @format date-time
   */
  terminateRequestedAt: string | null;
  /** The status in words, and what to do next. */
  message: string;
}

/** SSH access to an ACTIVE deployment. Contains a private key: keep it secret. */
export interface CredentialsDto {
  deploymentId: string;
  host: string;
  port: number;
  user: string;
  /** OpenSSH private key (ed25519) generated for this deployment only. Save it with mode 600. */
  privateKey: string;
  /** The matching public key installed on the instance. */
  publicKey: string;
  /** File name `sshCommand` expects the private key in. */
  privateKeyFile: string;
  /** A ready command line, once the private key is saved as `privateKeyFile`. */
  sshCommand: string;
  /** @format date-time */
  revealedAt: string;
}
