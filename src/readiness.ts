import type { Request, RequestHandler, Response } from 'express';
import type { Role } from './config.js';
import type { Services } from './container.js';
import { databaseAnswers } from './db/data-source.js';
import { envelope, errorEnvelope } from './errors/envelope.js';
import { allProviderStatuses } from './modules/inventory/provider-status.repository.js';

/** A probe that takes longer than this counts as failed: orchestrators give up on a probe after a second or two. */
export const READINESS_TIMEOUT_MS = 2_000;

/** The checks /readyz makes, in order; each runs only once those before it passed. */
export type ReadinessCheckName = 'database' | 'migrations' | 'inventory';

/** Each check's verdict: `ok`, `failed`, or `skipped` (an earlier check failed). */
export type ReadinessChecks = Partial<Record<ReadinessCheckName, 'ok' | 'failed' | 'skipped'>>;

export interface ReadinessReport {
  ready: boolean;
  checks: ReadinessChecks;
  /** What failed, in words an operator can act on; absent when ready. */
  reason?: string;
}

/** Asks whether this process can take work now. */
export type Readiness = () => Promise<ReadinessReport>;

function withTimeout<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${READINESS_TIMEOUT_MS} ms`)), READINESS_TIMEOUT_MS);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/**
 * Readiness of a process running `roles`: the database answers, every migration is applied, and,
 * for a process serving the api, the inventory is fresh: at least one configured provider had a
 * successful refresh within OFFER_MAX_AGE_SECONDS (past that its offers leave the lists and
 * admission, so the api could rent nothing). Worker and bot processes skip the inventory check:
 * the workers are the ones refreshing it, and neither takes traffic that stale offers would fail.
 * Migrations, once seen applied, are not asked again (they are never undone while running).
 */
export function readinessProbe(s: Pick<Services, 'ds' | 'clock' | 'config' | 'providers'>, roles: readonly Role[]): Readiness {
  let migrated = false;
  const checkInventory = roles.includes('api');
  return async () => {
    const checks: ReadinessChecks = { database: 'skipped', migrations: 'skipped', ...(checkInventory ? { inventory: 'skipped' as const } : {}) };
    const fail = (name: ReadinessCheckName, reason: string): ReadinessReport => ({ ready: false, checks: { ...checks, [name]: 'failed' }, reason });
    try {
      await withTimeout(databaseAnswers(s.ds), 'the database');
      checks.database = 'ok';
    } catch (err) {
      return fail('database', `the database is not reachable (${(err as Error).message.split('\n')[0].slice(0, 120)})`);
    }
    try {
      if (!migrated) migrated = !(await withTimeout(s.ds.showMigrations(), 'the migrations table'));
      if (!migrated) return fail('migrations', 'migrations are pending: a process starting with this database applies them');
      checks.migrations = 'ok';
    } catch (err) {
      return fail('migrations', `the migrations could not be read (${(err as Error).message.split('\n')[0].slice(0, 120)})`);
    }
    if (checkInventory) {
      const maxAgeMs = s.config.offerMaxAgeSeconds * 1000;
      const configured = new Set(s.providers.registered().map((p) => p.id));
      const since = s.clock.now().getTime() - maxAgeMs;
      const statuses = await withTimeout(allProviderStatuses(s.ds), 'the provider status table').catch(() => undefined);
      const fresh = statuses?.some((p) => configured.has(p.providerId) && p.lastSuccessAt !== null && p.lastSuccessAt.getTime() > since);
      if (!fresh) return fail('inventory', `no configured provider refreshed its offers in the last ${s.config.offerMaxAgeSeconds} s (OFFER_MAX_AGE_SECONDS): is a worker running?`);
      checks.inventory = 'ok';
    }
    return { ready: true, checks };
  };
}

/** `GET /readyz`: 200 with each check's verdict when ready, else 503 UNAVAILABLE naming the failed check. */
export function readinessRoute(readiness: Readiness): RequestHandler {
  return (req: Request, res: Response) => {
    readiness().then(
      (report) => {
        res.setHeader('Cache-Control', 'no-store');
        if (report.ready) res.json(envelope(req, { status: 'ready', checks: report.checks }));
        else res.status(503).json({ ...errorEnvelope(req.requestId ?? '', 'UNAVAILABLE', `Not ready: ${report.reason}.`), checks: report.checks });
      },
      () => res.status(503).json(errorEnvelope(req.requestId ?? '', 'UNAVAILABLE', 'Not ready: the readiness checks could not run.')),
    );
  };
}
