import type { Executor } from '../../db/mysql-store.js';
import { MysqlCredentialRevealsRepository, type CredentialRevealsRepository } from './credential-reveals.repository.js';
import { MysqlSealedSecretsRepository, type SealedSecretsRepository } from './sealed-secrets.repository.js';

/**
 * The credentials aggregate: the reveal audit (`credential_reveals`, written by nothing else) and
 * the sealed secrets that re-sealing walks. Those secrets are columns of rows other aggregates
 * own (deployments, orders, webhook endpoints): only their ciphertext and key id are this
 * aggregate's to rewrite, after a SECRETS_KEY rotation.
 */
export interface CredentialsRepository {
  /** The reveal audit, and the deployment a reveal opens. */
  readonly reveals: CredentialRevealsRepository;
  /** Every kind of sealed secret, by key. */
  readonly sealed: SealedSecretsRepository;
}

/** The credentials aggregate on MySQL; each half is made on first use. */
export class MysqlCredentialsRepository implements CredentialsRepository {
  private audit?: CredentialRevealsRepository;
  private secrets?: SealedSecretsRepository;

  constructor(private readonly sql: Executor) {}

  get reveals(): CredentialRevealsRepository {
    return (this.audit ??= new MysqlCredentialRevealsRepository(this.sql));
  }

  get sealed(): SealedSecretsRepository {
    return (this.secrets ??= new MysqlSealedSecretsRepository(this.sql));
  }
}
