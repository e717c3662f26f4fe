import { AppError } from '../../../errors/app-error.js';
import type { Principal } from '../../keys/principal.js';
import type { KeysService, KeyUsage } from '../../keys/keys.service.js';
import type { Repositories } from '../../../repositories.js';

/**
 * A new deployment needs a free slot of the key's `maxConcurrentDeployments`: every deployment
 * not TERMINATED or FAILED holds one, an unpaid card order included. Admission and card checkout
 * both decide here, on the key's `active_deployments` counter (read by `KeysService`).
 */
export function assertFreeSlot(principal: Pick<Principal, 'key'>, usage: Pick<KeyUsage, 'activeDeployments'>): void {
  const limit = principal.key.maxConcurrentDeployments;
  if (usage.activeDeployments >= limit) {
    throw new AppError(
      'CONCURRENCY_LIMIT_REACHED',
      `This key already has ${usage.activeDeployments} deployment(s) running, starting or awaiting payment; its limit is ${limit}. Terminate one first.`,
    );
  }
}

/** Locks the account row first, so parallel requests of one account are counted one after another. */
export async function assertConcurrencySlot(
  r: Pick<Repositories, 'accounts'>,
  principal: Principal,
  keys: KeysService,
): Promise<void> {
  assertFreeSlot(principal, (await keys.lockAccountWithUsage(r.accounts, principal.key)).usage);
}
