import type { Executor } from '../../db/mysql-store.js';
import { MysqlCredentialRevealsRepository, type CredentialRevealsRepository } from './credential-reveals.repository.js';

/**
 * The credentials aggregate: the reveal audit (`credential_reveals`, written by nothing else).
 * The sealed secrets that re-sealing rewrites after a SECRETS_KEY rotation are columns of rows
 * other aggregates own (deployments, orders, webhook endpoints), walked through those aggregates'
 * repositories (sealed-secrets.ts).
 */
export interface CredentialsRepository {
  /** The reveal audit, and the deployment a reveal opens. */
  readonly reveals: CredentialRevealsRepository;
}

/** The credentials aggregate on MySQL, made on first use. */
export class MysqlCredentialsRepository implements CredentialsRepository {
  private audit?: CredentialRevealsRepository;

  constructor(private readonly sql: Executor) {}

  get reveals(): CredentialRevealsRepository {
    return (this.audit ??= new MysqlCredentialRevealsRepository(this.sql));
  }
}
