import type { AgendaBackend, NotificationChannel } from 'agenda';
import type { DataSource } from 'typeorm';
import { LocalNotificationChannel } from './local-notification-channel.js';
import { MysqlJobRepository, type MysqlJobRepositoryOptions } from './mysql-jobs.repository.js';

/** Options for {@link MysqlBackend}. */
export interface MysqlBackendOptions extends MysqlJobRepositoryOptions {
  /** Turns off the in-process wake-up; jobs are then found only by polling. */
  disableNotifications?: boolean;
}

/**
 * Agenda 6 storage backend on MySQL/MariaDB (≥ 10.6 / 8.0 for SKIP LOCKED claims; `claim: 'update'`
 * needs no SKIP LOCKED, for TiDB, Vitess and Galera). It borrows the
 * caller's initialized TypeORM DataSource and never closes it; the `agenda_jobs` table comes
 * from this project's migrations.
 */
export class MysqlBackend implements AgendaBackend {
  readonly name = 'MySQL';
  readonly ownsConnection = false;
  readonly repository: MysqlJobRepository;
  readonly notificationChannel: NotificationChannel | undefined;

  constructor(ds: DataSource, options: MysqlBackendOptions = {}) {
    this.repository = new MysqlJobRepository(ds, options);
    this.notificationChannel = options.disableNotifications ? undefined : new LocalNotificationChannel();
  }

  async connect(): Promise<void> {
    await this.repository.connect();
  }

  async disconnect(): Promise<void> {
    // The DataSource is the caller's to close.
  }
}
