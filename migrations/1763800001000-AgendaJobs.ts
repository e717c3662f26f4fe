import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Agenda's job table for the MySQL storage backend (src/jobs/mysql-job-repository.ts).
 * Times are DATETIME(3) in UTC (the connection runs with timezone 'Z').
 */
export class AgendaJobs1763800001000 implements MigrationInterface {
  name = 'AgendaJobs1763800001000';

  async up(q: QueryRunner): Promise<void> {
    // `single_name` stands in for a partial unique index (MySQL has none): it is set only on
    // `every()` rows, so those are upserted one per name while normal jobs may share a name.
    // `ix_agenda_jobs_claim` serves the claim query in index order (name, disabled, locked_at
    // equalities, then next_run_at ASC, priority DESC), so `LIMIT 1 FOR UPDATE SKIP LOCKED`
    // stops at the first free row instead of locking every due row.
    // `unique_key` is the JobQueue's per-name dedupe key for waiting jobs.
    await q.query(`CREATE TABLE agenda_jobs (
      id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
      name VARCHAR(191) NOT NULL,
      priority INT NOT NULL DEFAULT 0,
      next_run_at DATETIME(3) NULL,
      type VARCHAR(16) NOT NULL,
      locked_at DATETIME(3) NULL,
      last_run_at DATETIME(3) NULL,
      last_finished_at DATETIME(3) NULL,
      failed_at DATETIME(3) NULL,
      fail_count INT NULL,
      fail_reason TEXT NULL,
      repeat_interval VARCHAR(255) NULL,
      repeat_timezone VARCHAR(64) NULL,
      repeat_at VARCHAR(255) NULL,
      data JSON NULL,
      disabled TINYINT(1) NOT NULL DEFAULT 0,
      progress DOUBLE NULL,
      fork TINYINT(1) NOT NULL DEFAULT 0,
      last_modified_by VARCHAR(191) NULL,
      debounce_started_at DATETIME(3) NULL,
      start_date DATETIME(3) NULL,
      end_date DATETIME(3) NULL,
      skip_days JSON NULL,
      unique_key VARCHAR(191) NULL,
      created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
      single_name VARCHAR(191) AS (CASE WHEN type = 'single' THEN name END) STORED,
      UNIQUE KEY uq_agenda_jobs_single_name (single_name),
      KEY ix_agenda_jobs_claim (name, disabled, locked_at, next_run_at, priority DESC),
      KEY ix_agenda_jobs_locked_at (locked_at),
      KEY ix_agenda_jobs_next_run_at (next_run_at),
      KEY ix_agenda_jobs_unique_key (name, unique_key)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE IF EXISTS agenda_jobs');
  }
}
