import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Each `local` instance records the uid its shells run as. The unique index is what keeps two
 * live instances from ever sharing one (several NULLs are allowed: not yet started, or destroyed).
 */
export class LocalSandboxUid1763800010600 implements MigrationInterface {
  name = 'LocalSandboxUid1763800010600';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE local_provider_instances
      ADD COLUMN sandbox_uid INT NULL,
      ADD UNIQUE KEY uq_local_provider_instances_sandbox_uid (sandbox_uid)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(
      'ALTER TABLE local_provider_instances DROP INDEX uq_local_provider_instances_sandbox_uid, DROP COLUMN sandbox_uid',
    );
  }
}
