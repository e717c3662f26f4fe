import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Agent authorizations: sessions an agent opens and its owner approves (public approval code,
 * private setup code), and setup codes an owner mints in Telegram. Only SHA-256 hashes of the
 * codes are stored; a row is exchanged for at most one agent key.
 */
export class AgentAuthorizations1763800005000 implements MigrationInterface {
  name = 'AgentAuthorizations1763800005000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE agent_authorizations (
      id CHAR(36) NOT NULL PRIMARY KEY,
      origin VARCHAR(16) NOT NULL,
      status VARCHAR(16) NOT NULL,
      setup_code_hash BINARY(32) NOT NULL,
      approval_code_hash BINARY(32) NULL,
      account_id CHAR(36) NULL,
      approved_by_key_id CHAR(36) NULL,
      name VARCHAR(100) NULL,
      max_per_rental_minor BIGINT NULL,
      budget_limit_minor BIGINT NULL,
      max_concurrent_deployments INT NULL,
      issued_key_id CHAR(36) NULL,
      expires_at DATETIME(3) NOT NULL,
      approved_at DATETIME(3) NULL,
      exchanged_at DATETIME(3) NULL,
      created_at DATETIME(3) NOT NULL,
      UNIQUE KEY uq_agent_auth_setup (setup_code_hash),
      UNIQUE KEY uq_agent_auth_approval (approval_code_hash),
      KEY ix_agent_auth_account (account_id, created_at),
      CONSTRAINT fk_agent_auth_account FOREIGN KEY (account_id) REFERENCES accounts (id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE agent_authorizations');
  }
}
