import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * When a throttled create attempt may ask the provider again (its 429 said how long to wait), so
 * a provision job run early by the reconciler or a restart still honours the wait.
 */
export class AttemptRetryAt1763800008000 implements MigrationInterface {
  name = 'AttemptRetryAt1763800008000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE deployment_attempts ADD COLUMN retry_at DATETIME(3) NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE deployment_attempts DROP COLUMN retry_at`);
  }
}
