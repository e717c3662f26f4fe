import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * State of the `local` provider plugin: the table plays the part of a cloud's own database,
 * so instances outlive the worker process that created them.
 */
export class LocalProviderInstances1763800002000 implements MigrationInterface {
  name = 'LocalProviderInstances1763800002000';

  async up(q: QueryRunner): Promise<void> {
    // `state` holds only what cannot be derived from time: pending rows turn running (or failed,
    // per `outcome`) at `running_at`, so a restarted process computes the same answer.
    await q.query(`CREATE TABLE local_provider_instances (
      id CHAR(36) NOT NULL PRIMARY KEY,
      label VARCHAR(191) NOT NULL,
      offer_key VARCHAR(100) NOT NULL,
      gpu_name VARCHAR(100) NOT NULL,
      gpu_count INT NOT NULL,
      vram_gb INT NULL,
      public_key TEXT NOT NULL,
      host_key TEXT NOT NULL,
      state VARCHAR(16) NOT NULL,
      outcome VARCHAR(16) NOT NULL,
      ssh_port INT NULL,
      sandbox_dir VARCHAR(1024) NOT NULL,
      created_at DATETIME(3) NOT NULL,
      running_at DATETIME(3) NOT NULL,
      destroyed_at DATETIME(3) NULL,
      UNIQUE KEY uq_local_provider_instances_label (label),
      KEY ix_local_provider_instances_state (state)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE IF EXISTS local_provider_instances');
  }
}
