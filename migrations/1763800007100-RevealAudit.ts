import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every credential reveal call is audited, refused ones included: the row names the deployment id
 * as asked (it may not exist, hence no foreign key), the outcome and, for a refusal, why.
 */
export class RevealAudit1763800007100 implements MigrationInterface {
  name = 'RevealAudit1763800007100';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE credential_reveals
      DROP FOREIGN KEY fk_reveals_deployment,
      MODIFY deployment_id VARCHAR(64) NOT NULL,
      CHANGE revealed_at called_at DATETIME(3) NOT NULL,
      ADD COLUMN outcome VARCHAR(16) NOT NULL DEFAULT 'REVEALED' AFTER request_id,
      ADD COLUMN refusal VARCHAR(32) NULL AFTER outcome`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DELETE FROM credential_reveals WHERE outcome <> 'REVEALED'`);
    await q.query(`ALTER TABLE credential_reveals
      DROP COLUMN refusal,
      DROP COLUMN outcome,
      CHANGE called_at revealed_at DATETIME(3) NOT NULL,
      MODIFY deployment_id CHAR(36) NOT NULL,
      ADD CONSTRAINT fk_reveals_deployment FOREIGN KEY (deployment_id) REFERENCES deployments (id)`);
  }
}
