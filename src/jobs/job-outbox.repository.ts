import { toJobId, type JobId, type JobParameters } from 'agenda';
import type { Executor } from '../db/mysql-store.js';
import { inOpenTransaction } from '../db/sql.js';
import { insertJob } from './job-rows.repository.js';

/**
 * The job outbox of a transaction: a job row written with the state it acts on, so the job exists
 * exactly when that state commits (see `JobQueue.nowIn`). The aggregate `jobs` of the store.
 */
export interface JobOutboxRepository {
  /**
   * Writes one job row in this transaction and answers its id. A plain insert: no row is read or
   * locked, so the caller must know no job with the same `uniqueKey` is waiting. The statement is
   * issued at the call, so a caller may issue it together with others (one round trip).
   */
  insert(job: JobParameters, uniqueKey: string | null): Promise<JobId>;
}

export class MysqlJobOutboxRepository implements JobOutboxRepository {
  constructor(private readonly sql: Executor) {}

  async insert(job: JobParameters, uniqueKey: string | null): Promise<JobId> {
    if (!inOpenTransaction(this.sql)) throw new Error('a job is written to the outbox only inside a transaction');
    return toJobId(String(await insertJob(this.sql, job, null, null, uniqueKey)));
  }
}
