import type { EntityManager } from 'typeorm';
import { AppError } from '../../errors/app-error.js';
import type { Principal } from '../../http/principal.js';
import { TERMINAL_STATUSES } from './rental-state.js';

/**
 * A new deployment needs a free slot of the key's `maxConcurrentDeployments` (every deployment
 * not TERMINATED or FAILED holds one, an unpaid card order included). Locks the account row
 * first, so parallel requests of one account are counted one after another.
 */
export async function assertConcurrencySlot(m: EntityManager, principal: Principal): Promise<void> {
  await m.query(`SELECT id FROM accounts WHERE id = ? FOR UPDATE`, [principal.accountId]);
  const [row]: { n: string | number }[] = await m.query(`SELECT COUNT(*) AS n FROM deployments WHERE key_id = ? AND status NOT IN (?)`, [
    principal.keyId,
    TERMINAL_STATUSES,
  ]);
  const active = Number(row.n);
  const limit = principal.key.maxConcurrentDeployments;
  if (active >= limit) {
    throw new AppError(
      'CONCURRENCY_LIMIT_REACHED',
      `This key already has ${active} deployment(s) running, starting or awaiting payment; its limit is ${limit}. Terminate one first.`,
    );
  }
}
