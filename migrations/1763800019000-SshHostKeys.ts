import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * SSH host keys are pinned: `ssh_host_key` holds the fingerprint (`SHA256:...`) of the host key
 * a deployment's machine showed at first contact (or its provider reported before it), and every
 * later check refuses a server showing another. Existing rows start unpinned and pin at their
 * next successful check.
 */
export class SshHostKeys1763800019000 implements MigrationInterface {
  name = 'SshHostKeys1763800019000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE deployments ADD COLUMN ssh_host_key VARCHAR(100) NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE deployments DROP COLUMN ssh_host_key`);
  }
}
