import { bool, choice, int, opt, type Env } from '../config-values.js';

/**
 * How a worker takes a due job: `skip-locked` locks it with `SELECT … FOR UPDATE SKIP LOCKED`,
 * `update` with a conditional UPDATE for servers where SKIP LOCKED is missing or node-local.
 */
export const JOB_CLAIM_MODES = ['skip-locked', 'update'] as const;
export type JobClaimMode = (typeof JOB_CLAIM_MODES)[number];

/** The job system of the `worker` role, and its dashboard. */
export interface JobsConfig {
  /** How often a worker looks for due jobs (JOBS_PROCESS_EVERY_MS). */
  processEveryMs: number;
  /** How workers claim due jobs (JOBS_CLAIM). */
  claim: JobClaimMode;
  /** Basic-auth user of the dashboard at /admin/jobs (ADMIN_JOBS_USER); the dashboard needs both. */
  dashboardUser?: string;
  /** Basic-auth password of the dashboard (ADMIN_JOBS_PASSWORD), 12 characters or more. */
  dashboardPassword?: string;
}

/** The background work each rental gets. */
export interface RentalsConfig {
  /** Delay between provisioning polls of a rental (and the first retry of a destruction check). */
  pollMs: number;
  /** Period of the metering sweep. */
  meteringEveryMs: number;
  /** How long a rental warned as idle may stay idle before it is ended (IDLE). */
  idleGraceSeconds: number;
}

/** Delivery of events to webhook endpoints. */
export interface WebhooksConfig {
  /** Webhook endpoints may be loopback or private addresses, over http too (development). */
  allowPrivateDestinations: boolean;
  /** Wait before the first retry of a failed webhook delivery; later waits double. */
  firstRetryMs: number;
  /** Period of the webhook dispatcher. */
  dispatchEveryMs: number;
}

/** JOBS_PROCESS_EVERY_MS, JOBS_CLAIM, ADMIN_JOBS_USER and ADMIN_JOBS_PASSWORD. */
export function readJobs(env: Env): JobsConfig {
  return {
    processEveryMs: int(env, 'JOBS_PROCESS_EVERY_MS', 1000, 50, 600_000),
    claim: choice(env, 'JOBS_CLAIM', JOB_CLAIM_MODES, 'skip-locked'),
    dashboardUser: opt(env, 'ADMIN_JOBS_USER'),
    // Guesses are rate-limited, but a short password falls to a patient guesser all the same.
    dashboardPassword: opt(env, 'ADMIN_JOBS_PASSWORD', {
      secret: true,
      minLength: 12,
      hint: 'e.g. `openssl rand -base64 18`',
    }),
  };
}

/** RENTAL_POLL_MS, METERING_EVERY_MS and IDLE_GRACE_SECONDS. */
export function readRentals(env: Env): RentalsConfig {
  return {
    pollMs: int(env, 'RENTAL_POLL_MS', 1000, 20, 600_000),
    meteringEveryMs: int(env, 'METERING_EVERY_MS', 15_000, 100, 3_600_000),
    idleGraceSeconds: int(env, 'IDLE_GRACE_SECONDS', 600, 1, 86_400),
  };
}

/** WEBHOOK_ALLOW_PRIVATE_DESTINATIONS, WEBHOOK_FIRST_RETRY_MS and WEBHOOK_DISPATCH_MS. */
export function readWebhooks(env: Env, nodeEnv: string): WebhooksConfig {
  return {
    allowPrivateDestinations: bool(env, 'WEBHOOK_ALLOW_PRIVATE_DESTINATIONS', nodeEnv !== 'production'),
    firstRetryMs: int(env, 'WEBHOOK_FIRST_RETRY_MS', 30_000, 10, 30_000),
    dispatchEveryMs: int(env, 'WEBHOOK_DISPATCH_MS', 1000, 50, 60_000),
  };
}
