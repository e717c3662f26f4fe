import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The name an agent gives itself when it begins an authorization session: shown to the owner on
 * the approval page and used for its key unless the owner names the key at approval.
 */
export class AgentRequestedName1763800008300 implements MigrationInterface {
  name = 'AgentRequestedName1763800008300';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE agent_authorizations ADD COLUMN requested_name VARCHAR(100) NULL AFTER name`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE agent_authorizations DROP COLUMN requested_name`);
  }
}
