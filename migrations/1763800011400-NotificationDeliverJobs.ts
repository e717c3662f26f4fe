import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Owner notifications are sent by Agenda jobs (`notifications.deliver`, one per notification,
 * enqueued with it), no longer by a timer that scanned for unsent rows. Every row still waiting
 * gets its job here, so none recorded before the change is left unsent.
 */
export class NotificationDeliverJobs1763800011400 implements MigrationInterface {
  name = 'NotificationDeliverJobs1763800011400';

  async up(q: QueryRunner): Promise<void> {
    // The same row JobQueue.nowIn writes: due now (UTC, like every job time), keyed by the notification.
    await q.query(`INSERT INTO agenda_jobs (name, priority, next_run_at, type, data, disabled, fork, unique_key)
      SELECT 'notifications.deliver', 0, UTC_TIMESTAMP(3), 'normal', JSON_OBJECT('notificationId', CAST(id AS CHAR)), 0, 0, CAST(id AS CHAR)
        FROM telegram_notifications
       WHERE sent_at IS NULL AND failed_at IS NULL
       ORDER BY id`);
  }

  async down(q: QueryRunner): Promise<void> {
    // The timer that comes back with the older code finds unsent rows itself.
    await q.query(`DELETE FROM agenda_jobs WHERE name IN ('notifications.deliver', 'notifications.collect')`);
  }
}
