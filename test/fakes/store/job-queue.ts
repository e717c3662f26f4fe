import { toJobId, type JobId, type JobParameters } from 'agenda';
import type { JobOutboxRepository } from '../../../src/jobs/job-outbox.repository.js';
import type { EnqueueOptions, JobName, JobPayloads, JobQueue, JobWakeUp } from '../../../src/jobs/job-queue.js';
import type { MemoryTables } from './memory-store.js';

/** A job row as the memory outbox keeps it. */
export interface MemoryJobRow {
  id: string;
  name: string;
  data: unknown;
  nextRunAt: Date;
  uniqueKey: string | null;
}

/** `agenda_jobs` in memory, for jobs written in a transaction. */
export class MemoryJobOutbox implements JobOutboxRepository {
  constructor(private readonly tables: MemoryTables) {}

  async insert(job: JobParameters, uniqueKey: string | null): Promise<JobId> {
    const rows = this.tables.table<MemoryJobRow>('agenda_jobs');
    const id = rows.nextId();
    rows.insert(id, { id, name: job.name, data: job.data, nextRunAt: job.nextRunAt ?? new Date(), uniqueKey });
    return toJobId(id);
  }
}

/** One job a service asked for, outside a transaction. */
export interface QueuedJob {
  name: JobName;
  data: unknown;
  when: Date | null;
  uniqueKey?: string;
}

/**
 * A JobQueue for the unit tier: jobs asked for outside a transaction are recorded in `queued`
 * (a pending job with the same unique key is not added twice, as the real queue does); jobs
 * written in a transaction go through the outbox into the memory store, and their wake-ups are counted.
 */
export class RecordingJobQueue implements JobQueue {
  readonly queued: QueuedJob[] = [];
  wakeUps = 0;

  async now<N extends JobName>(name: N, data: JobPayloads[N], options?: EnqueueOptions): Promise<void> {
    this.add({ name, data, when: null, uniqueKey: options?.uniqueKey });
  }

  async schedule<N extends JobName>(
    when: Date,
    name: N,
    data: JobPayloads[N],
    options?: EnqueueOptions,
  ): Promise<void> {
    this.add({ name, data, when, uniqueKey: options?.uniqueKey });
  }

  async nowIn<N extends JobName>(
    outbox: JobOutboxRepository,
    name: N,
    data: JobPayloads[N],
    options?: EnqueueOptions,
  ): Promise<JobWakeUp> {
    await outbox.insert({ name, data, priority: 0, nextRunAt: new Date(), type: 'normal' }, options?.uniqueKey ?? null);
    return async () => void this.wakeUps++;
  }

  /** The recorded jobs of one name. */
  named(name: JobName): QueuedJob[] {
    return this.queued.filter((j) => j.name === name);
  }

  private add(job: QueuedJob): void {
    if (job.uniqueKey !== undefined && this.queued.some((j) => j.name === job.name && j.uniqueKey === job.uniqueKey))
      return;
    this.queued.push(job);
  }
}
