import type { DataSource } from 'typeorm';
import { AppError } from '../../errors/app-error.js';
import type { Principal } from '../keys/principal.js';
import { describeGpuChoice } from '../inventory/gpu-match.js';
import { Offer } from '../inventory/offer.entity.js';
import { Deployment } from './deployment.entity.js';
import { Order } from './order.entity.js';
import { apiTerminationReason } from './rental-status.js';
import type { DeploymentDto, RentalDto } from './rentals.dto.js';

/** What a customer reads about the machine behind a rental, from the cached offer it runs (or will try first). */
export interface MachineFacts {
  gpuName: string | null;
  gpuCount: number | null;
  provider: string | null;
}

/** The offer a rental's machine comes from: its deployment's current offer, else the order's first choice. */
export function machineOfferId(o: Pick<Order, 'offerId' | 'candidateOfferIds'>, d: Pick<Deployment, 'offerId'> | null): string | null {
  return d?.offerId ?? o.offerId ?? o.candidateOfferIds?.[0] ?? null;
}

/** GPU name, count and provider of each offer id, from the offer cache (rows are never deleted). */
export async function machineFacts(ds: DataSource, offerIds: (string | null)[]): Promise<Map<string, MachineFacts>> {
  const ids = [...new Set(offerIds.filter((x): x is string => x !== null))];
  if (ids.length === 0) return new Map();
  const offers = await ds
    .getRepository(Offer)
    .createQueryBuilder('o')
    .select(['o.id', 'o.name', 'o.gpuCount', 'o.provider'])
    .where('o.id IN (:...ids)', { ids })
    .getMany();
  return new Map(offers.map((o) => [o.id, { gpuName: o.name, gpuCount: o.gpuCount, provider: o.provider }]));
}

export const NO_MACHINE: MachineFacts = { gpuName: null, gpuCount: null, provider: null };

/** The facts of one offer id from a machineFacts map; all null when unknown. */
export function factsOf(facts: Map<string, MachineFacts>, offerId: string | null): MachineFacts {
  return (offerId !== null && facts.get(offerId)) || NO_MACHINE;
}

/** Page size bounds of GET /api/v1/rentals. */
export const RENTAL_PAGE = { default: 20, max: 100 };

interface Position {
  createdAt: Date;
  id: string;
}

/** The opaque cursor: base64url of the last row's (createdAt, id), the sort key of the list. */
export function encodeCursor(p: Position): string {
  return Buffer.from(JSON.stringify([p.createdAt.toISOString(), p.id])).toString('base64url');
}

function decodeCursor(cursor: string): Position {
  const invalid = () => new AppError('INVALID_REQUEST', 'The cursor is not one this API handed out; start again without it.');
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(cursor)) throw invalid();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (!Array.isArray(parsed) || parsed.length !== 2 || typeof parsed[0] !== 'string' || typeof parsed[1] !== 'string') throw invalid();
  const createdAt = new Date(parsed[0]);
  if (Number.isNaN(createdAt.getTime()) || createdAt.toISOString() !== parsed[0] || !/^[0-9a-f-]{36}$/.test(parsed[1])) throw invalid();
  return { createdAt, id: parsed[1] };
}

/**
 * One page of the rentals `principal` may see (agent keys their own, owner keys the account's),
 * newest first, with their deployments; `nextCursor` is null on the last page.
 */
export async function rentalPage(
  ds: DataSource,
  principal: Principal,
  limit: number,
  cursor: string | undefined,
): Promise<{ rows: { order: Order; deployment: Deployment | null }[]; nextCursor: string | null }> {
  const qb = ds.getRepository(Order).createQueryBuilder('o');
  if (principal.kind === 'AGENT') qb.where('o.key_id = :keyId', { keyId: principal.keyId });
  else qb.where('o.account_id = :accountId', { accountId: principal.accountId });
  if (cursor !== undefined) {
    const after = decodeCursor(cursor);
    qb.andWhere('(o.created_at < :at OR (o.created_at = :at AND o.id < :id))', { at: after.createdAt, id: after.id });
  }
  const orders = await qb.orderBy('o.created_at', 'DESC').addOrderBy('o.id', 'DESC').take(limit + 1).getMany();
  const page = orders.slice(0, limit);
  const deployments = page.length ? await ds.getRepository(Deployment).createQueryBuilder('d').where('d.order_id IN (:...ids)', { ids: page.map((o) => o.id) }).getMany() : [];
  const byOrder = new Map(deployments.map((d) => [d.orderId, d]));
  return {
    rows: page.map((order) => ({ order, deployment: byOrder.get(order.id) ?? null })),
    nextCursor: orders.length > limit ? encodeCursor(page[page.length - 1]) : null,
  };
}

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** endedAt is shown only for credit-funded rentals that reached TERMINATED (docs/api.md, Rentals). */
function endedAtOf(d: Deployment, funding: 'CREDITS' | 'CARD'): string | null {
  return funding === 'CREDITS' && d.status === 'TERMINATED' ? iso(d.endedAt) : null;
}

/** A deployment as the API shows it. */
export function toDeploymentDto(d: Deployment, funding: 'CREDITS' | 'CARD', machine: MachineFacts = NO_MACHINE): DeploymentDto {
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
    endsAt: metered ? null : iso(d.endsAt),
    endedAt: endedAtOf(d, funding),
    startedAt: iso(d.startedAt),
    hourlyPriceMinor: d.hourlyPriceMinor,
    spendCapMinor: d.spendCapMinor,
    usageMinor: d.usageMinor,
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
  const choice = describeGpuChoice(o.requestKind === 'INTENT' ? o.gpuModel : null, machine.gpuName);
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
    quote: {
      hourlyPriceMinor: o.hourlyPriceMinor,
      durationSeconds: metered ? null : o.durationSeconds,
      totalMinor: metered ? 0 : o.totalMinor,
      currency: o.currency,
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
