import { AppError } from '../../../errors/app-error.js';
import { normaliseId } from '../../../ids.js';
import { formatUsd } from '../../../vocabulary/money.js';
import { describeGpuChoice, gpuMatchedBy } from '../../inventory/gpu-match.js';
import type { Deployment } from '../store/deployment.entity.js';
import type { Order } from '../store/order.entity.js';
import { apiTerminationReason, isOneOf, PROVISIONING_STATUSES, type MachinePhase } from '../state/rental-status.js';
import type { DeploymentDto, EndpointDto, MachineDto, RentalDto, RentalTrafficDto } from './rentals.dto.js';
import { NO_MACHINE, type MachineFacts, type RentalPosition } from '../store/rental-reads.repository.js';
import { trafficPriceOf } from '../lifecycle/traffic.js';

/** Page size bounds of GET /api/v1/rentals. */
export const RENTAL_PAGE = { default: 20, max: 100 };

/** The opaque cursor: base64url of the last row's (createdAt, id), the sort key of the list. */
export function encodeCursor(p: RentalPosition): string {
  return Buffer.from(JSON.stringify([p.createdAt.toISOString(), p.id])).toString('base64url');
}

/** The position a cursor of {@link encodeCursor} names; 400 INVALID_REQUEST for any other string. */
export function decodeCursor(cursor: string): RentalPosition {
  const invalid = () =>
    new AppError('INVALID_REQUEST', 'The cursor is not one this API handed out; start again without it.');
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(cursor)) throw invalid();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (!Array.isArray(parsed) || parsed.length !== 2 || typeof parsed[0] !== 'string' || typeof parsed[1] !== 'string')
    throw invalid();
  const createdAt = new Date(parsed[0]);
  // An id this API handed out is in its stored form already.
  if (
    Number.isNaN(createdAt.getTime()) ||
    createdAt.toISOString() !== parsed[0] ||
    normaliseId(parsed[1]) !== parsed[1]
  )
    throw invalid();
  return { createdAt, id: parsed[1] };
}

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** endedAt is shown only for credit-funded rentals that reached TERMINATED (docs/api.md, Rentals). */
function endedAtOf(d: Deployment, funding: 'CREDITS' | 'CARD'): string | null {
  return funding === 'CREDITS' && d.status === 'TERMINATED' ? iso(d.endedAt) : null;
}

/** The phase shows only while provisioning; a finished or running deployment has none. */
function phaseOf(d: Deployment): { phase: MachinePhase | null; phaseSince: string | null } {
  const shown = isOneOf(PROVISIONING_STATUSES, d.status) && d.phase !== null;
  return { phase: shown ? (d.phase as MachinePhase) : null, phaseSince: shown ? iso(d.phaseSince) : null };
}

/** Endpoints show while the machine runs. */
function endpointsOf(d: Deployment | null): EndpointDto[] {
  return d && d.status === 'ACTIVE' ? (d.endpoints ?? []).map((e) => ({ port: e.port, url: e.url })) : [];
}

/** The machine settings as reads show them: names and the script's hash, never values or text. */
function machineOf(o: Order): MachineDto {
  return {
    image: o.machineImage,
    envNames: o.machineEnvNames ?? [],
    startupScriptSha256: o.startupScriptSha256,
    ports: o.machinePorts ?? [],
    diskGb: o.machineDiskGb,
  };
}

/** A deployment's traffic as reads show it; null when its offer's traffic is free. */
function trafficOf(d: Deployment): RentalTrafficDto | null {
  const price = trafficPriceOf(d);
  if (!price) return null;
  return {
    sentBytes: d.trafficUpBytes,
    receivedBytes: d.trafficDownBytes,
    pricePerGb: { upMicroUsd: price.upMicroUsdPerGb, downMicroUsd: price.downMicroUsdPerGb },
    chargedMinor: d.trafficMinor,
    readAt: iso(d.trafficReadAt),
  };
}

/** A deployment as the API shows it. */
export function toDeploymentDto(
  d: Deployment,
  funding: 'CREDITS' | 'CARD',
  machine: MachineFacts = NO_MACHINE,
): DeploymentDto {
  const metered = d.billingModel !== 'LEGACY_PREPAID';
  return {
    id: d.id,
    rentalId: d.orderId,
    status: d.status,
    gpuName: machine.gpuName,
    gpuCount: machine.gpuCount,
    provider: d.providerId ?? machine.provider,
    terminationReason: apiTerminationReason(d.terminationReason),
    billingModel: d.billingModel,
    hoursPurchased: metered ? null : d.hoursPurchased,
    durationSeconds: metered ? null : d.durationSeconds,
    endsAt: iso(d.endsAt),
    ...phaseOf(d),
    endpoints: endpointsOf(d),
    endedAt: endedAtOf(d, funding),
    startedAt: iso(d.startedAt),
    hourlyPriceMinor: d.hourlyPriceMinor,
    spendCapMinor: d.spendCapMinor,
    usageMinor: d.usageMinor,
    traffic: trafficOf(d),
    offerId: d.offerId,
    providerId: d.providerId,
    terminateRequestedAt: iso(d.terminateRequestedAt),
    createdAt: d.createdAt.toISOString(),
  };
}

/** A rental as the API shows it: the order, its deployment and the machine behind it. */
export function toRentalDto(o: Order, d: Deployment | null, machine: MachineFacts = NO_MACHINE): RentalDto {
  const metered = o.billingModel !== 'LEGACY_PREPAID';
  const failed = (d?.status ?? o.status) === 'FAILED';
  const gpuModel = o.requestKind === 'INTENT' ? o.gpuModel : null;
  // The note admission decided, when it kept one; else one that suggests no model (see describeGpuChoice).
  const choice =
    o.matchNote === null
      ? describeGpuChoice(gpuModel, machine.gpuName)
      : { matchedBy: gpuMatchedBy(gpuModel), note: o.matchNote };
  return {
    rentalId: o.id,
    orderId: o.id,
    deploymentId: d ? d.id : null,
    // The deployment row is the one the lifecycle jobs move first; the order follows it.
    status: d ? d.status : o.status,
    gpuName: machine.gpuName,
    matchedBy: choice.matchedBy,
    matchNote: choice.note,
    gpuCount: machine.gpuCount,
    provider: d?.providerId ?? machine.provider,
    terminationReason: d ? apiTerminationReason(d.terminationReason) : null,
    endedAt: d ? endedAtOf(d, o.funding) : null,
    deployment: d ? toDeploymentDto(d, o.funding, machine) : null,
    machine: machineOf(o),
    ...(d ? phaseOf(d) : { phase: null, phaseSince: null }),
    endpoints: endpointsOf(d),
    endsAt: d ? iso(d.endsAt) : null,
    leaseSeconds: d?.leaseSeconds ?? null,
    waitForCapacityUntil: iso(o.waitForCapacityUntil),
    quote: {
      hourlyPriceMinor: o.hourlyPriceMinor,
      durationSeconds: metered ? null : o.durationSeconds,
      totalMinor: metered ? 0 : o.totalMinor,
      currency: o.currency,
      charging: metered ? 'PER_SECOND' : 'PREPAID',
      note: quoteNote(metered, o),
    },
    billingModel: o.billingModel,
    funding: o.funding,
    candidateOfferIds: o.candidateOfferIds ?? (o.offerId ? [o.offerId] : []),
    failureCode: failed ? o.failureCode : null,
    failureReason: failed ? o.failureReason : null,
    reversalStatus: o.reversalStatus,
    createdAt: o.createdAt.toISOString(),
  };
}

/** What a quote means, so that a metered rental's `totalMinor: 0` does not read as free. */
function quoteNote(metered: boolean, o: Pick<Order, 'hourlyPriceMinor' | 'totalMinor' | 'durationSeconds'>): string {
  const price = `${o.hourlyPriceMinor} cents per hour (${formatUsd(o.hourlyPriceMinor)})`;
  if (!metered)
    return `Prepaid: ${o.totalMinor} cents (${formatUsd(o.totalMinor)}) were debited at admission for ${o.durationSeconds ?? 0} s at ${price}.`;
  return `Charged per second while ACTIVE at ${price}; nothing is taken up front (totalMinor 0), and usageMinor shows what has accrued.`;
}
