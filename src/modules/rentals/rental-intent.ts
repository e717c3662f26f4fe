import { AppError } from '../../errors/app-error.js';
import { gpuIntentName, matchGpuQuery, type GpuMatch } from '../inventory/gpu-match.js';
import type { MachineSettings } from '../../providers/provider.js';
import { machineIntentValue, parseMachineSettings, type MachinePolicy } from './machine-settings.js';
import type { CreateRentalRequest } from './rentals.dto.js';

// A rental request as one value, parsed once: admission's first line turns the body into this,
// and everything after it (the idempotency hash, the inventory, the terms) receives it.

/** What both shapes of a rental may ask beyond the machine's model: its settings and a lease. */
interface IntentExtras {
  /** What runs on the machine, checked against the operator's policy (DEFAULT_MACHINE_SETTINGS when none). */
  machine: MachineSettings;
  /** The lease asked for, in seconds from ACTIVE; null: none (a key's maximum may still apply). */
  terminateAfterSeconds: number | null;
}

/** An explicit offer asked for by id (lower-cased), with the budget if one was given. */
export interface OfferIntent extends IntentExtras {
  kind: 'OFFER';
  offerId: string;
  budgetMinor: number | null;
}

/** A GPU model, count and price ceiling; the name is parsed here once for the whole admission. */
export interface GpuIntent extends IntentExtras {
  kind: 'INTENT';
  /** The name as matched: a count written into it is gpuCount's, so it is taken out. */
  gpuModel: string;
  /** What the name stands for in the catalog (its `compact` form is the idempotency value). */
  match: GpuMatch;
  gpuCount: number;
  maxHourlyPriceMinor: number;
  budgetMinor: number | null;
  /**
   * Why the request cannot be admitted whatever the inventory holds (a count in the name that
   * disagrees with gpuCount); raised only once the Idempotency-Key is known to be unused.
   */
  refusal: AppError | null;
  /** How long to wait PENDING for an eligible offer when none is on sale; null: refuse at once. */
  waitForCapacitySeconds: number | null;
}

/** A rental request as one value, parsed once; everything after admission's first line receives this. */
export type RentalIntent = OfferIntent | GpuIntent;

/**
 * The request body as an intent. Malformed machine settings are refused here (422, before the
 * Idempotency-Key is looked at, like any malformed body); any other refusal is carried, for
 * admission to raise in order.
 */
export function rentalIntent(body: CreateRentalRequest, policy: MachinePolicy): RentalIntent {
  const budgetMinor = body.budgetMinor ?? null;
  const extras: IntentExtras = {
    machine: parseMachineSettings(body.machine, policy),
    terminateAfterSeconds: body.terminateAfterSeconds ?? null,
  };
  if ('offerId' in body) return { kind: 'OFFER', offerId: body.offerId.toLowerCase(), budgetMinor, ...extras };
  let gpuModel = body.gpuModel.trim();
  let refusal: AppError | null = null;
  try {
    gpuModel = gpuIntentName(body.gpuModel, body.gpuCount);
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    refusal = err;
  }
  // The count is split off the name before matching, so the raw name and the name as matched
  // stand for the same models.
  const match = matchGpuQuery(body.gpuModel);
  const waitForCapacitySeconds = body.waitForCapacitySeconds ?? null;
  return {
    kind: 'INTENT',
    gpuModel,
    match,
    gpuCount: Number(body.gpuCount),
    maxHourlyPriceMinor: body.maxHourlyPriceMinor,
    budgetMinor,
    refusal,
    waitForCapacitySeconds,
    ...extras,
  };
}

/**
 * The intent as the idempotency record hashes it: equal intents hash equal whatever their spelling
 * or field order. Settings, a lease and a wait enter only when asked for, so a plain request hashes
 * as it always did.
 */
export function intentRequestValue(intent: RentalIntent): Record<string, unknown> {
  const machine = intent.machine;
  const asked =
    machine.image !== null ||
    Object.keys(machine.env).length > 0 ||
    machine.startupScript !== null ||
    machine.ports.length > 0 ||
    machine.diskGb !== null;
  const extras = {
    ...(asked ? { machine: machineIntentValue(machine) } : {}),
    ...(intent.terminateAfterSeconds !== null ? { terminateAfterSeconds: intent.terminateAfterSeconds } : {}),
    ...(intent.kind === 'INTENT' && intent.waitForCapacitySeconds !== null
      ? { waitForCapacitySeconds: intent.waitForCapacitySeconds }
      : {}),
  };
  if (intent.kind === 'OFFER')
    return { kind: 'OFFER', offerId: intent.offerId, budgetMinor: intent.budgetMinor, ...extras };
  return {
    kind: 'INTENT',
    gpuSlug: intent.match.compact,
    gpuCount: intent.gpuCount,
    maxHourlyPriceMinor: intent.maxHourlyPriceMinor,
    budgetMinor: intent.budgetMinor,
    ...extras,
  };
}
