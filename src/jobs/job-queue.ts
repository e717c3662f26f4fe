import type { JobOutboxRepository } from './job-outbox.repository.js';
import { timedJobRun } from '../metrics/outcomes.js';

/**
 * Every job this service runs, by name, with the payload its handler receives. `JobQueue.now`
 * and `schedule` check the payload against this map, and the composition root (src/container.ts)
 * must build a handler for each name: {@link JobHandlers} for the worker role's,
 * {@link BotJobHandlers} for the bot role's.
 */
export interface JobPayloads {
  'rental.provision': DeploymentJob;
  'rental.terminate': DeploymentJob;
  'rental.expire': DeploymentJob;
  'rental.expiring': DeploymentJob;
  'rental.idle': NoPayload;
  'rental.meter': NoPayload;
  'rental.reconcile': NoPayload;
  'inventory.refresh': NoPayload;
  'payments.reconcile': NoPayload;
  'oauth.purge': NoPayload;
  'notifications.collect': NoPayload;
  'notifications.deliver': NotificationJob;
  'webhooks.dispatch': NoPayload;
  'webhooks.deliver': WebhookDeliveryJob;
}

export type JobName = keyof JobPayloads;

/**
 * Jobs only the bot role runs: sending needs the Telegram token, so they are defined on an
 * Agenda of the bot's own, and a worker without the token never claims them.
 */
export type BotJobName = 'notifications.collect' | 'notifications.deliver';

/** Jobs the worker role runs. */
export type WorkerJobName = Exclude<JobName, BotJobName>;

/** Payload of the job that sends one owner notification (a `telegram_notifications` row). */
export interface NotificationJob {
  notificationId: string;
}

/** Payload of the job that makes one try of a webhook delivery (a `webhook_deliveries` row). */
export interface WebhookDeliveryJob {
  deliveryId: string;
}

/** Payload of the jobs that act on one deployment. */
export interface DeploymentJob {
  deploymentId: string;
}

/** Payload of the periodic sweeps. */
export type NoPayload = Record<string, never>;

/** Names of the rental lifecycle jobs, for enqueuers. */
export const RENTAL_JOBS = {
  provision: 'rental.provision',
  terminate: 'rental.terminate',
  expire: 'rental.expire',
  expiring: 'rental.expiring',
  idle: 'rental.idle',
  meter: 'rental.meter',
  reconcile: 'rental.reconcile',
} as const satisfies Record<string, JobName>;

/**
 * How services ask for background work without knowing about Agenda. Every process (api, worker,
 * bot) gets one: enqueuing only writes a job row, and whichever worker process is running picks it
 * up. Handlers must be safe to run twice; a job may also be lost to nothing but a crash before
 * commit, which the reconciler covers.
 */
export interface JobQueue {
  /**
   * Run `name` with `data` as soon as a worker is free.
   * With `uniqueKey`, at most one pending job per (name, uniqueKey) exists: enqueuing again while
   * one is waiting does not add a second (it may move the waiting one earlier).
   */
  now<N extends JobName>(name: N, data: JobPayloads[N], options?: EnqueueOptions): Promise<void>;
  /** Run `name` with `data` at `when` (or at once if `when` is past). Same `uniqueKey` rule. */
  schedule<N extends JobName>(when: Date, name: N, data: JobPayloads[N], options?: EnqueueOptions): Promise<void>;
  /**
   * Writes a job due now as one row in the caller's transaction, through its outbox (`repos.jobs`; an outbox: the job exists
   * exactly when the state it acts on commits). No other row is read or locked, so the caller
   * must know no job with the same `uniqueKey` is waiting (a row it has just created, say).
   * Call the returned wake-up after commit: it starts this process's worker at once (a no-op
   * elsewhere; a worker in another process finds the row at its next poll, `processEvery`).
   */
  nowIn<N extends JobName>(
    outbox: JobOutboxRepository,
    name: N,
    data: JobPayloads[N],
    options?: EnqueueOptions,
  ): Promise<JobWakeUp>;
}

/** Wakes this process's job processor for a job written in a transaction, once that has committed. */
export type JobWakeUp = () => Promise<void>;

export interface EnqueueOptions {
  /** Deduplicates waiting jobs of the same name, e.g. the deployment id. */
  uniqueKey?: string;
}

/**
 * Longest lock lifetime a job of this service states (src/container.ts): a worker that dies
 * (SIGKILL, OOM, a deploy) leaves no job locked longer than its own lifetime, and none longer
 * than this, before another worker takes it over at its next poll.
 */
export const MAX_JOB_LOCK_LIFETIME_MS = 5 * 60_000;

/**
 * One kind of background job, with its handler already bound to what it needs (src/container.ts
 * builds them). The handler reads state from MySQL, acts and writes state back, so a run repeated
 * or resumed after a crash converges on the same result. A repeating job must state its lock
 * lifetime: its one row is what every worker runs, so a lock left by a dead worker stops the
 * sweep everywhere until it lapses.
 */
export type JobDefinition<D extends object = object> = JobDefinitionBase<D> & (OneOffJob | RepeatingJob);

interface JobDefinitionBase<D extends object> {
  name: string;
  handler(data: D): Promise<void>;
  /** Parallel runs of this job per worker process (Agenda default otherwise). */
  concurrency?: number;
  /** Higher runs first when several are due. */
  priority?: number;
  /**
   * A run that throws is run again after `delayMs`, up to `attempts` runs in all (without it a
   * failed run stays failed until the job is enqueued again).
   */
  retry?: { delayMs: number; attempts: number };
}

/** A job enqueued for one piece of work. */
interface OneOffJob {
  everyMs?: undefined;
  /**
   * How long a claimed run may go without finishing before another worker may take it over:
   * longer than a run can take, since a run outliving it may run twice at once.
   */
  lockLifetimeMs?: number;
}

/** A periodic sweep. */
interface RepeatingJob {
  /** Repeat on this interval as a single job row (Agenda `every`). */
  everyMs: number;
  /** As {@link OneOffJob.lockLifetimeMs}; required, at most {@link MAX_JOB_LOCK_LIFETIME_MS}. */
  lockLifetimeMs: number;
}

type WithoutName<T> = T extends unknown ? Omit<T, 'name'> : never;

/** The definition of one of this service's jobs, with its payload type from {@link JobPayloads}. */
export type ServiceJobDefinition<N extends JobName = JobName> = {
  [K in N]: JobDefinition<JobPayloads[K]> & { name: K };
}[N];

/** Exactly one definition per worker job name: the compiler refuses a missing or misspelt one. */
export type JobHandlers = { [K in WorkerJobName]: WithoutName<JobDefinition<JobPayloads[K]>> };

/** Exactly one definition per bot job name. */
export type BotJobHandlers = { [K in BotJobName]: WithoutName<JobDefinition<JobPayloads[K]>> };

/** Turns a per-name handler table into the list Agenda registers. */
export function jobDefinitions(handlers: JobHandlers): JobDefinition[];
export function jobDefinitions(handlers: BotJobHandlers): JobDefinition[];
export function jobDefinitions(handlers: JobHandlers | BotJobHandlers): JobDefinition[] {
  // Each run counted and timed by name and outcome, for /metrics.
  return Object.entries(handlers).map(([name, def]: [string, JobDefinition]) => ({
    ...def,
    name,
    handler: (data: object) => timedJobRun(name, () => def.handler(data)),
  }));
}
