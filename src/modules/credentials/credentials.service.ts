import { revealNotActiveMessage, revealRetryAfterSeconds } from '../../vocabulary/rental-hints.js';
import { isOneOf, STARTING_STATUSES } from '../../vocabulary/statuses.js';
import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import { AppError } from '../../errors/app-error.js';
import type { Principal } from '../keys/principal.js';
import type { CredentialsDto } from '../rentals/wire/rentals.dto.js';
import type { RevealRefusal } from './credential-reveal.entity.js';
import type { CredentialsRepository } from './credentials.repository.js';
import type { SecretBox } from './secret-box.js';

/**
 * Hands out a deployment's SSH access. The private key is opened only for an ACTIVE deployment
 * the caller may see, and only in a transaction that also writes the audit row: a reveal that
 * is not recorded does not happen. Refused calls are audited too, after the refusal is decided.
 */
export class CredentialsService {
  constructor(
    private readonly store: Store<{ credentials: CredentialsRepository }>,
    private readonly clock: Clock,
    private readonly box: SecretBox,
  ) {}

  /**
   * The SSH access of the deployment `id` (or of the rental `id`: either names the one deployment).
   * Not found (404) when the caller may not see it; DEPLOYMENT_NOT_ACTIVE (409) with its status
   * while it is not ACTIVE, with `Retry-After` while it is still starting.
   */
  async reveal(principal: Principal, id: string, requestId: string): Promise<CredentialsDto> {
    let result:
      | { dto: CredentialsDto }
      | { refusal: 'NOT_FOUND' }
      | { refusal: 'NOT_ACTIVE'; status: string; deploymentId: string; rentalId: string; phase: string | null };
    try {
      result = await this.store.transaction(async ({ credentials: { reveals } }) => {
        // The row lock holds the status until the audit row commits: termination cannot slip between.
        const d = await reveals.lockDeploymentFor(principal, id);
        if (!d) return { refusal: 'NOT_FOUND' as const };
        if (d.status !== 'ACTIVE' || !d.sshPrivateKeyEnc || !d.sshKeyKid || !d.sshHost || !d.sshPort || !d.sshUser) {
          return {
            refusal: 'NOT_ACTIVE' as const,
            status: d.status,
            deploymentId: d.id,
            rentalId: d.orderId,
            phase: d.phase,
          };
        }
        const privateKey = this.box.open(d.sshPrivateKeyEnc, d.sshKeyKid, d.id);
        const now = this.clock.now();
        await reveals.insertReveal({
          deploymentId: d.id,
          accountId: principal.accountId,
          keyId: principal.keyId,
          requestId,
          calledAt: now,
        });
        const privateKeyFile = `gpr-${d.id.slice(0, 8)}.key`;
        return {
          dto: {
            deploymentId: d.id,
            host: d.sshHost,
            port: d.sshPort,
            user: d.sshUser,
            privateKey,
            publicKey: d.sshPublicKey ?? '',
            privateKeyFile,
            sshCommand: sshCommand(privateKeyFile, d.sshUser, d.sshHost, d.sshPort),
            revealedAt: now.toISOString(),
          },
        };
      });
    } catch (err) {
      await this.recordRefusal(principal, id, requestId, 'ERROR');
      throw err;
    }
    if ('dto' in result) return result.dto;
    if (result.refusal === 'NOT_FOUND') {
      await this.recordRefusal(principal, id, requestId, 'NOT_FOUND');
      throw new AppError('NOT_FOUND', 'No such deployment or rental for this key.');
    }
    await this.recordRefusal(principal, result.deploymentId, requestId, 'NOT_ACTIVE');
    // Found, but not now: 404 would tell an agent the id is wrong. Retry-After only where waiting helps.
    const retryAfter = isOneOf(STARTING_STATUSES, result.status) ? revealRetryAfterSeconds(result.phase) : undefined;
    const retry: Record<string, string> = retryAfter === undefined ? {} : { 'Retry-After': String(retryAfter) };
    throw new AppError(
      'DEPLOYMENT_NOT_ACTIVE',
      revealNotActiveMessage(result.status, result.deploymentId, result.rentalId, retryAfter),
      retry,
    );
  }

  /**
   * Audits a refused reveal call. Refusals of one key and reason within a minute are counted on
   * one row, so a key asking again and again (for ids of its choosing) cannot grow the table
   * without bound. Best effort: failing to record it must not change the answer.
   */
  async recordRefusal(
    principal: Principal,
    deploymentId: string,
    requestId: string,
    refusal: RevealRefusal,
  ): Promise<void> {
    const now = this.clock.now();
    const window = new Date(Math.floor(now.getTime() / 60_000) * 60_000);
    const refused = {
      deploymentId: deploymentId.slice(0, 64),
      accountId: principal.accountId,
      keyId: principal.keyId,
      requestId: requestId.slice(0, 128),
      refusal,
      window,
      at: now,
    };
    await this.store.read((r) => r.credentials.reveals.countRefused(refused)).catch(() => undefined);
  }
}

/** IdentitiesOnly keeps an agent's other keys out; accept-new trusts a fresh instance once. */
export function sshCommand(keyFile: string, user: string, host: string, port: number): string {
  return `ssh -i ${keyFile} -p ${port} -o IdentitiesOnly=yes -o StrictHostKeyChecking=accept-new ${user}@${host}`;
}
