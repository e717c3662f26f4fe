import type { DataSource } from 'typeorm';
import type { Clock } from '../../clock.js';
import { inTransaction } from '../../db/transaction.js';
import { AppError } from '../../errors/app-error.js';
import type { Principal } from '../../http/principal.js';
import { CredentialReveal } from '../rentals/credential-reveal.entity.js';
import { Deployment } from '../rentals/deployment.entity.js';
import type { CredentialsDto } from '../rentals/rentals.dto.js';
import type { SecretBox } from './secret-box.js';

/**
 * Hands out a deployment's SSH access. The private key is opened only for an ACTIVE deployment
 * the caller may see, and only in a transaction that also writes the audit row: a reveal that
 * is not recorded does not happen.
 */
export class CredentialsService {
  constructor(
    private readonly ds: DataSource,
    private readonly clock: Clock,
    private readonly box: SecretBox,
  ) {}

  async reveal(principal: Principal, deploymentId: string, requestId: string): Promise<CredentialsDto> {
    const id = deploymentId.toLowerCase();
    return inTransaction(this.ds, async (m) => {
      // The row lock holds the status until the audit row commits: termination cannot slip between.
      // (FOR UPDATE rather than a shared lock: TypeORM spells that FOR SHARE, which MariaDB lacks.)
      const d = await m
        .getRepository(Deployment)
        .createQueryBuilder('d')
        .setLock('pessimistic_write')
        .where(principal.kind === 'AGENT' ? 'd.id = :id AND d.key_id = :keyId' : 'd.id = :id AND d.account_id = :accountId', {
          id,
          keyId: principal.keyId,
          accountId: principal.accountId,
        })
        .getOne();
      if (!d) throw new AppError('NOT_FOUND', 'No such deployment for this key.');
      if (d.status !== 'ACTIVE' || !d.sshPrivateKeyEnc || !d.sshKeyKid || !d.sshHost || !d.sshPort || !d.sshUser) {
        // SPEC.md declares 401 and 404 for reveal: credentials that do not exist yet (or any more) are not found.
        throw new AppError(
          'NOT_FOUND',
          `Credentials exist only while the deployment is ACTIVE; it is ${d.status}. Poll GET /api/v1/deployments/${d.id}.`,
        );
      }
      const privateKey = this.box.open(d.sshPrivateKeyEnc, d.sshKeyKid, d.id);
      const now = this.clock.now();
      await m.insert(CredentialReveal, {
        deploymentId: d.id,
        accountId: d.accountId,
        keyId: principal.keyId,
        requestId,
        revealedAt: now,
      });
      const privateKeyFile = `gpr-${d.id.slice(0, 8)}.key`;
      return {
        deploymentId: d.id,
        host: d.sshHost,
        port: d.sshPort,
        user: d.sshUser,
        privateKey,
        publicKey: d.sshPublicKey ?? '',
        privateKeyFile,
        sshCommand: sshCommand(privateKeyFile, d.sshUser, d.sshHost, d.sshPort),
        revealedAt: now.toISOString(),
      };
    });
  }
}

/** IdentitiesOnly keeps an agent's other keys out; accept-new trusts a fresh instance once. */
export function sshCommand(keyFile: string, user: string, host: string, port: number): string {
  return `ssh -i ${keyFile} -p ${port} -o IdentitiesOnly=yes -o StrictHostKeyChecking=accept-new ${user}@${host}`;
}
