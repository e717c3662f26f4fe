import { performance } from 'node:perf_hooks';
import type { Request, RequestHandler, Response } from 'express';
import type { Role } from './config.js';
import type { Services } from './container.js';
import { databaseAnswers } from './db/data-source.js';
import { envelope, errorEnvelope } from './errors/envelope.js';
import { bearerMatches } from './metrics/metrics-endpoint.js';
import { providerAdvice } from './modules/inventory/provider-status.js';

/** A probe that takes longer than this counts as failed: orchestrators give up on a probe after a second or two. */
export const READINESS_TIMEOUT_MS = 2_000;

/**
 * How long one readiness answer serves every caller of a process. `/readyz` is public and
 * unlimited: however often it is asked, the database sees one round of checks per this.
 */
export const READINESS_REUSE_MS = 1_000;

/** The checks /readyz makes, in order; each runs only once those before it passed. */
export type ReadinessCheckName = 'database' | 'migrations' | 'inventory';

/** Each check's verdict: `ok`, `failed`, or `skipped` (an earlier check failed). */
export type ReadinessChecks = Partial<Record<ReadinessCheckName, 'ok' | 'failed' | 'skipped'>>;

export interface ReadinessReport {
  ready: boolean;
  checks: ReadinessChecks;
  /** What failed, in words an operator can act on, and nothing a driver said; absent when ready. */
  reason?: string;
  /**
   * The first line of the error behind a failed check, for operators only: logged, and shown to a
   * request bearing METRICS_TOKEN, never in a public answer (it can name hosts, users, schemas).
   */
  detail?: string;
  /**
   * An api process's configured clouds and how each stands (`ok`, `degraded`, `down`): ready with
   * one down is `degraded` while another serves offers. Absent for workers and bots.
   */
  providers?: Record<string, 'ok' | 'degraded' | 'down'>;
  /** For each cloud not `ok`, what to look at, naming the setting (e.g. `vast down: VAST_PROVIDER_API_KEY refused (auth)`). */
  advice?: string[];
}

/** Asks whether this process can take work now. */
export type Readiness = () => Promise<ReadinessReport>;

export interface ReadinessOptions {
  /** How long one answer is reused ({@link READINESS_REUSE_MS}). */
  reuseMs?: number;
  /** Monotonic milliseconds the reuse is measured on (tests move it). */
  nowMs?: () => number;
}

class ReadinessTimeout extends Error {
  readonly code = 'READINESS_TIMEOUT';
}

function withTimeout<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new ReadinessTimeout(`${what} did not answer within ${READINESS_TIMEOUT_MS} ms`)),
      READINESS_TIMEOUT_MS,
    );
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

const firstLine = (err: unknown): string =>
  (err instanceof Error ? err.message : String(err)).split('\n')[0].slice(0, 200);

/** What kind of failure a report is, so that an outage is logged once, not once per probe. */
function failureKind(report: ReadinessReport, err: unknown): string {
  const failed = Object.entries(report.checks).find(([, v]) => v === 'failed')?.[0] ?? 'unknown';
  const code = (err as { code?: unknown } | undefined)?.code;
  return `${failed}\u001f${report.reason}\u001f${typeof code === 'string' ? code : err === undefined ? '' : (err as Error).name}`;
}

/**
 * Readiness of a process running `roles`: the database answers, every migration is applied, and,
 * for a process serving the api, its offer snapshot holds at least one live offer (with none,
 * every rental would be refused). Worker and bot processes skip the inventory check: the workers
 * are the ones refreshing it, and neither takes traffic that missing offers would fail.
 * Migrations, once seen applied, are not asked again (they are never undone while running).
 *
 * One answer serves every caller for {@link READINESS_REUSE_MS}, and callers arriving while it is
 * computed share it, so a flood of probes costs the database a couple of queries a second. A
 * failure is logged with its detail once per kind (check, reason, error code) until the process
 * is ready again.
 */
export function readinessProbe(
  s: Pick<Services, 'ds' | 'config' | 'inventory' | 'logger'>,
  roles: readonly Role[],
  options: ReadinessOptions = {},
): Readiness {
  const reuseMs = options.reuseMs ?? READINESS_REUSE_MS;
  const nowMs = options.nowMs ?? (() => performance.now());
  let migrated = false;
  const checkInventory = roles.includes('api');

  const check = async (): Promise<{ report: ReadinessReport; err?: unknown }> => {
    const checks: ReadinessChecks = {
      database: 'skipped',
      migrations: 'skipped',
      ...(checkInventory ? { inventory: 'skipped' as const } : {}),
    };
    const fail = (name: ReadinessCheckName, reason: string, err?: unknown) => ({
      report: {
        ready: false,
        checks: { ...checks, [name]: 'failed' as const },
        reason,
        ...(err === undefined ? {} : { detail: firstLine(err) }),
      },
      err,
    });
    try {
      await withTimeout(databaseAnswers(s.ds), 'the database');
      checks.database = 'ok';
    } catch (err) {
      return fail('database', 'the database is not reachable', err);
    }
    try {
      if (!migrated) migrated = !(await withTimeout(s.ds.showMigrations(), 'the migrations table'));
      if (!migrated)
        return fail('migrations', 'migrations are pending: a process starting with this database applies them');
      checks.migrations = 'ok';
    } catch (err) {
      return fail('migrations', 'the migrations could not be read', err);
    }
    if (checkInventory) {
      let servable: { live: number; agedOut: boolean };
      try {
        servable = await withTimeout(s.inventory.servableOffers(), 'the offers');
      } catch (err) {
        return fail('inventory', 'the offers could not be read', err);
      }
      if (servable.live === 0) {
        const age = `${s.config.inventory.offerMaxAgeSeconds} s (OFFER_MAX_AGE_SECONDS)`;
        return fail(
          'inventory',
          servable.agedOut
            ? `no offer can be served: every listed offer is older than ${age} and no refresh renewed them; start a worker, or see its log`
            : `no offer can be served: no configured provider has live offers (each keeps them ${age} after its last successful refresh); GET /api/v1/providers shows each one's last refresh and error`,
        );
      }
      checks.inventory = 'ok';
      // Which clouds serve: ready while any does, degraded while another does not.
      const statuses = await withTimeout(s.inventory.providerStatuses(), 'the provider statuses').catch(() => null);
      if (statuses) {
        const providers = Object.fromEntries(statuses.map((p) => [p.id, p.status]));
        const advice = statuses
          .filter((p) => p.status !== 'ok')
          .map((p) => providerAdvice(p.id, p.status, p.lastErrorClass));
        return { report: { ready: true, checks, providers, ...(advice.length ? { advice } : {}) } };
      }
    }
    return { report: { ready: true, checks } };
  };

  let logged: string | undefined;
  const note = ({ report, err }: { report: ReadinessReport; err?: unknown }): ReadinessReport => {
    if (report.ready) {
      if (logged !== undefined) s.logger.info({ checks: report.checks }, 'ready again');
      logged = undefined;
    } else {
      const kind = failureKind(report, err);
      if (kind !== logged)
        s.logger.warn({ checks: report.checks, reason: report.reason, detail: report.detail }, 'not ready');
      logged = kind;
    }
    return report;
  };

  let last: { at: number; report: ReadinessReport } | undefined;
  let inFlight: Promise<ReadinessReport> | undefined;
  return () => {
    if (last && nowMs() - last.at < reuseMs) return Promise.resolve(last.report);
    inFlight ??= check()
      .catch((err: unknown) => ({
        report: { ready: false, checks: {}, reason: 'the readiness checks could not run', detail: firstLine(err) },
        err,
      }))
      .then((outcome) => {
        const report = note(outcome);
        last = { at: nowMs(), report };
        return report;
      })
      .finally(() => {
        inFlight = undefined;
      });
    return inFlight;
  };
}

export interface ReadinessRouteOptions {
  /** METRICS_TOKEN: a request bearing it also gets the failed check's detail. */
  detailToken?: string;
}

/**
 * `GET /readyz`: 200 with each check's verdict when ready, else 503 UNAVAILABLE naming the failed
 * check. The error behind it is only shown to a request bearing the metrics token.
 */
export function readinessRoute(readiness: Readiness, options: ReadinessRouteOptions = {}): RequestHandler {
  return (req: Request, res: Response) => {
    res.setHeader('Cache-Control', 'no-store');
    readiness().then(
      (report) => {
        if (report.ready) {
          const degraded = Object.values(report.providers ?? {}).some((h) => h !== 'ok');
          res.json(
            envelope(req, {
              status: degraded ? 'degraded' : 'ready',
              checks: report.checks,
              ...(report.providers ? { providers: report.providers } : {}),
              ...(report.advice ? { advice: report.advice } : {}),
            }),
          );
          return;
        }
        const operator =
          report.detail !== undefined &&
          options.detailToken !== undefined &&
          bearerMatches(req.headers.authorization, options.detailToken);
        res.status(503).json({
          ...errorEnvelope(req.requestId ?? '', 'UNAVAILABLE', `Not ready: ${report.reason}.`),
          checks: report.checks,
          ...(operator ? { detail: report.detail } : {}),
        });
      },
      () =>
        res
          .status(503)
          .json(errorEnvelope(req.requestId ?? '', 'UNAVAILABLE', 'Not ready: the readiness checks could not run.')),
    );
  };
}
