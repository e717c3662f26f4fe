import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The process's Prometheus series, one registry per process. Every label takes a bounded set of
 * values (route templates, job names, provider ids, outcome and error codes, statuses), never an
 * id, key, email or address: docs/operations/metrics.md lists each series and its labels.
 * Counters and histograms only move in memory, so recording costs no query and no I/O; the one
 * series read from the database (rentals by status) is collected at scrape time, and cached.
 */
export const metricsRegistry = new Registry();

/** Every series starts with this, as Prometheus names a service's own metrics. */
export const METRIC_PREFIX = 'gpu_rental_';

const registers = [metricsRegistry];

/** Latency buckets (seconds) for requests and calls that answer in milliseconds to tens of seconds. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Buckets (seconds) for background work: job lag, runs and sweeps, from milliseconds to minutes. */
const JOB_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600];

export const httpRequests = new Counter({
  name: `${METRIC_PREFIX}http_requests_total`,
  help: 'HTTP requests answered, by method, route template and status code.',
  labelNames: ['method', 'route', 'status'] as const,
  registers,
});

export const httpRequestDuration = new Histogram({
  name: `${METRIC_PREFIX}http_request_duration_seconds`,
  help: 'Time from a request reaching the app to its last byte written, by method, route template and status code.',
  labelNames: ['method', 'route', 'status'] as const,
  buckets: LATENCY_BUCKETS,
  registers,
});

export const admissions = new Counter({
  name: `${METRIC_PREFIX}admissions_total`,
  help: 'Credit admissions (POST /api/v1/rentals) by outcome: admitted, replayed, or the error code of the refusal.',
  labelNames: ['outcome'] as const,
  registers,
});

export const rentalsByStatus = new Gauge({
  name: `${METRIC_PREFIX}rentals`,
  help: 'Rentals not yet finished, by status (read from the database at scrape time, at most every few seconds).',
  labelNames: ['status'] as const,
  registers,
});

export const providerCalls = new Counter({
  name: `${METRIC_PREFIX}provider_calls_total`,
  help: 'Calls to provider plugins by provider id, operation and outcome (ok, a create result, or the error class).',
  labelNames: ['provider', 'operation', 'outcome'] as const,
  registers,
});

export const providerCallDuration = new Histogram({
  name: `${METRIC_PREFIX}provider_call_duration_seconds`,
  help: 'Duration of calls to provider plugins by provider id, operation and outcome.',
  labelNames: ['provider', 'operation', 'outcome'] as const,
  buckets: LATENCY_BUCKETS,
  registers,
});

// Jobs are labelled `job_name`: Prometheus gives every scraped series a `job` label of its own.
export const jobLag = new Histogram({
  name: `${METRIC_PREFIX}job_lag_seconds`,
  help: 'How late a due job was claimed: claim time minus its next run time, by job name.',
  labelNames: ['job_name'] as const,
  buckets: JOB_BUCKETS,
  registers,
});

export const jobRuns = new Counter({
  name: `${METRIC_PREFIX}job_runs_total`,
  help: 'Job runs by job name and outcome (success or failure).',
  labelNames: ['job_name', 'outcome'] as const,
  registers,
});

export const jobDuration = new Histogram({
  name: `${METRIC_PREFIX}job_duration_seconds`,
  help: 'Duration of job runs by job name and outcome.',
  labelNames: ['job_name', 'outcome'] as const,
  buckets: JOB_BUCKETS,
  registers,
});

export const meteringSweepDuration = new Histogram({
  name: `${METRIC_PREFIX}metering_sweep_duration_seconds`,
  help: 'Duration of metering sweeps (reading, charging and enforcing limits).',
  buckets: JOB_BUCKETS,
  registers,
});

export const meteringRentalsSwept = new Counter({
  name: `${METRIC_PREFIX}metering_rentals_swept_total`,
  help: 'Metered rentals read by metering sweeps.',
  registers,
});

export const webhookDeliveries = new Counter({
  name: `${METRIC_PREFIX}webhook_deliveries_total`,
  help: 'Webhook delivery tries by outcome: succeeded, retrying, failed (given up), skipped or deferred (its account has its tries in flight).',
  labelNames: ['outcome'] as const,
  registers,
});

export const creditsMoved = new Counter({
  name: `${METRIC_PREFIX}credits_minor_total`,
  help: 'Credits posted to the ledger, in minor units (cents), by entry kind and direction (in: credited to accounts, out: debited).',
  labelNames: ['kind', 'direction'] as const,
  registers,
});

let defaultsOn = false;

/** Adds Node's process metrics (CPU, memory, event loop lag, GC) under the prefix; once per process. */
export function collectProcessMetrics(): void {
  if (defaultsOn) return;
  defaultsOn = true;
  collectDefaultMetrics({ register: metricsRegistry, prefix: METRIC_PREFIX });
}

/** Seconds elapsed since `startNs` (a `process.hrtime.bigint()` reading). */
export function secondsSince(startNs: bigint): number {
  return Number(process.hrtime.bigint() - startNs) / 1e9;
}
