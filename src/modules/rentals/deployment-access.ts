import type { EntityManager } from 'typeorm';
import { terminateMessage } from '../../../clients/sdk/src/hints.js';
import { Deployment } from './deployment.entity.js';
import type { TerminateAccepted } from './rentals.dto.js';

/**
 * Who acts on a deployment: an agent key reaches only its own deployments, the account holder
 * (an OWNER key, or the owner in the Telegram bot, who holds no key there) the whole account's.
 */
export type DeploymentActor = { kind: 'AGENT'; accountId: string; keyId: string } | { kind: 'OWNER'; accountId: string };

/**
 * The deployment `id` as `actor` may see it, locked FOR UPDATE until the caller's transaction
 * ends; null when it does not exist for this actor. (FOR UPDATE rather than a shared lock:
 * TypeORM spells that FOR SHARE, which MariaDB lacks.)
 */
export function lockDeploymentFor(m: EntityManager, actor: DeploymentActor, id: string): Promise<Deployment | null> {
  const qb = m.getRepository(Deployment).createQueryBuilder('d').setLock('pessimistic_write');
  return actor.kind === 'AGENT'
    ? qb.where('d.id = :id AND d.key_id = :keyId', { id, keyId: actor.keyId }).getOne()
    : qb.where('d.id = :id AND d.account_id = :accountId', { id, accountId: actor.accountId }).getOne();
}

/**
 * Like lockDeploymentFor, but `id` may also be the rental (order) id: a rental has one deployment,
 * and callers that kept only the rental id act on it under the same access rules.
 */
export async function lockDeploymentOrRentalFor(m: EntityManager, actor: DeploymentActor, id: string): Promise<Deployment | null> {
  const direct = await lockDeploymentFor(m, actor, id);
  if (direct) return direct;
  const qb = m.getRepository(Deployment).createQueryBuilder('d').setLock('pessimistic_write');
  return actor.kind === 'AGENT'
    ? qb.where('d.order_id = :id AND d.key_id = :keyId', { id, keyId: actor.keyId }).getOne()
    : qb.where('d.order_id = :id AND d.account_id = :accountId', { id, accountId: actor.accountId }).getOne();
}

/** What a terminate request answers, first or repeated: the deployment as it stands after it. */
export function terminateAnswer(d: Deployment): TerminateAccepted {
  return {
    accepted: true,
    deploymentId: d.id,
    rentalId: d.orderId,
    status: d.status,
    terminateRequestedAt: d.terminateRequestedAt?.toISOString() ?? null,
    message: terminateMessage(d.status, d.id),
  };
}
