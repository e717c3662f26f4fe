import type { Agenda, JobId } from 'agenda';
import type { JobOutboxRepository } from './job-outbox.repository.js';
import type { EnqueueOptions, JobQueue, JobWakeUp } from './job-queue.js';
import type { MysqlBackend } from './mysql-backend.js';

/**
 * The JobQueue on Agenda. Enqueuing only writes a row (and, when this process's Agenda is
 * processing, wakes it at once); it never starts processing, so api and bot processes use it too.
 */
export class AgendaJobQueue implements JobQueue {
  constructor(
    /** The process's Agenda; the worker role defines jobs on it and starts it. */
    readonly agenda: Agenda,
    /** The MySQL backend under `agenda` (its repository and in-process notification channel). */
    readonly backend: MysqlBackend,
  ) {}

  // Untyped on purpose: the service reaches it as a JobQueue (names and payloads checked against
  // JobPayloads); only tests enqueue their own job names on the class itself.
  async now(name: string, data: object, options?: EnqueueOptions): Promise<void> {
    await this.schedule(new Date(), name, data, options);
  }

  async schedule(when: Date, name: string, data: object, options?: EnqueueOptions): Promise<void> {
    if (options?.uniqueKey === undefined) {
      await this.agenda.schedule(when, name, data);
      return;
    }
    const priority = this.agenda.definitions[name]?.priority ?? 0;
    const { job } = await this.backend.repository.enqueueUnique(
      { name, data, priority, nextRunAt: when, type: 'normal' },
      options.uniqueKey,
    );
    if (job._id) await this.wake(job._id, name, job.nextRunAt ?? when, priority);
  }

  async nowIn(outbox: JobOutboxRepository, name: string, data: object, options?: EnqueueOptions): Promise<JobWakeUp> {
    const priority = this.agenda.definitions[name]?.priority ?? 0;
    const nextRunAt = new Date();
    const id = await outbox.insert({ name, data, priority, nextRunAt, type: 'normal' }, options?.uniqueKey ?? null);
    return () => this.wake(id, name, nextRunAt, priority);
  }

  /** Same wake-up Job.save() gives a plain job (a no-op unless this process is processing). */
  private async wake(jobId: JobId, jobName: string, nextRunAt: Date | null, priority: number): Promise<void> {
    const channel = this.backend.notificationChannel;
    if (channel && channel.state === 'connected')
      await channel.publish({ jobId, jobName, nextRunAt, priority, timestamp: new Date() });
  }
}
