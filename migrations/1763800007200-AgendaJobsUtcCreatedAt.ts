import type { MigrationInterface, QueryRunner } from 'typeorm';

/** agenda_jobs.created_at in UTC like every other time column, whatever the server's time zone. */
export class AgendaJobsUtcCreatedAt1763800007200 implements MigrationInterface {
  name = 'AgendaJobsUtcCreatedAt1763800007200';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE agenda_jobs MODIFY created_at DATETIME(3) NOT NULL DEFAULT (UTC_TIMESTAMP(3))`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE agenda_jobs MODIFY created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)`);
  }
}
