import { AppError } from '../../../errors/app-error.js';
import { lookupId } from '../../../ids.js';
import { gpuIntentName, matchGpuQuery, type GpuMatch } from '../../inventory/gpu-match.js';
import type { MachineSettings } from '../../../providers/provider.js';
import { machineIntentValue, parseMachineSettings, type MachinePolicy } from './machine-settings.js';
import type { Order } from '../store/order.entity.js';
import type { CreateRentalRequest } from '../wire/rentals.dto.js';

// A rental request as one value, parsed once: the controller turns the body its schema admitted
// into this, and admission (the idempotency hash, the inventory, the terms, the order row) and
// provisioning receive it or what the order keeps of it.

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
  /**
   * What the name stands for in the catalog (its `compact` form is the idempotency value), kept on
   * the order (`gpuMatch`) for provisioning.
   */
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
 * The request body, as its schema admitted it (names, types and bounds), as an intent: the rules
 * no schema states are applied here, once. Machine settings that no offer could honour are
 * refused here (422, like any malformed body); any other refusal is carried, for admission to
 * raise once the Idempotency-Key is known to be unused.
 */
export function rentalIntent(body: CreateRentalRequest, policy: MachinePolicy): RentalIntent {
  const budgetMinor = body.budgetMinor ?? null;
  const extras: IntentExtras = {
    machine: parseMachineSettings(body.machine, policy),
    terminateAfterSeconds: body.terminateAfterSeconds ?? null,
  };
  if ('offerId' in body) return { kind: 'OFFER', offerId: lookupId(body.offerId), budgetMinor, ...extras };
  // One parse of the name: the count split off it, and the match of what is left.
  const { name: gpuModel, match, refusal } = gpuIntentName(body.gpuModel, body.gpuCount);
  const waitForCapacitySeconds = body.waitForCapacitySeconds ?? null;
  return {
    kind: 'INTENT',
    gpuModel,
    match,
    gpuCount: body.gpuCount,
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

/**
 * The GPU match a GPU-intent order was admitted with, as provisioning uses it: the one kept on the
 * order, or, for an order admitted before the match was kept, its stored key matched again
 * (`matchGpuQuery(key)` gives back the match of the key). Null for an explicit offer.
 */
export function orderGpuMatch(order: Pick<Order, 'gpuMatch' | 'gpuSlug'>): GpuMatch | null {
  return order.gpuMatch ?? (order.gpuSlug === null ? null : matchGpuQuery(order.gpuSlug));
}
