import { createHash, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { createExpressMiddleware } from 'agendash';
import type { Config } from '../config.js';
import { AppError } from '../errors/app-error.js';
import { errorEnvelope } from '../errors/envelope.js';
import { addressBucket, clientAddress } from '../http/client-address.js';
import type { RateLimiter } from '../http/rate-limiter.js';
import { agendaOf } from './agenda.js';
import type { JobQueue } from './job-queue.js';

function sameSecret(a: string, b: string): boolean {
  // Hash first so the comparison takes the same time whatever the lengths.
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());
}

/** What the dashboard needs: its credentials, key authentication, and the process's queue. */
export interface DashboardDeps {
  config: Pick<Config, 'jobs'>;
  keys: {
    authenticate(header: string): Promise<{ kind: string; key: { isAdmin: boolean } }>;
    /** The one operator rule, the keys module's. */
    isOperator(principal: { kind: string; key: { isAdmin: boolean } }): boolean;
  };
  jobs: JobQueue;
  rateLimiter: Pick<RateLimiter, 'check' | 'hit'>;
}

/**
 * Wrong basic-auth guesses allowed per minute from one client address, and from all of them
 * together (so guessing from many addresses is bounded too). Past either, every basic-auth
 * attempt is refused with 429 until the minute ends, the right password included; an admin
 * owner key (Bearer) still opens the dashboard.
 */
export const DASHBOARD_FAILED_LOGINS_PER_ADDRESS = 10;
export const DASHBOARD_FAILED_LOGINS_TOTAL = 60;

/**
 * Agendash replaces the service's Content-Security-Policy with its own, which lets any site frame
 * it; whatever policy it sends leaves with `frame-ancestors 'none'` added.
 */
const unframeable: RequestHandler = (_req, res, next) => {
  const setHeader = res.setHeader.bind(res);
  res.setHeader = (name: string, value: number | string | readonly string[]) =>
    setHeader(
      name,
      name.toLowerCase() === 'content-security-policy' && !/frame-ancestors/.test(String(value))
        ? `${String(value)}; frame-ancestors 'none'`
        : value,
    );
  next();
};

/**
 * Agendash (the Agenda dashboard) for `/admin/jobs`, or undefined when it is off: it is on only
 * when ADMIN_JOBS_USER and ADMIN_JOBS_PASSWORD are set. A request needs those credentials by HTTP
 * basic auth (what a browser can send), or `Authorization: Bearer` with an OWNER key carrying the
 * admin flag (for scripts). It reads and edits the `agenda_jobs` table through this process's
 * Agenda, so it works on api processes that never run jobs.
 */
export function jobsDashboard(services: DashboardDeps): RequestHandler[] | undefined {
  const { dashboardUser: user, dashboardPassword: password } = services.config.jobs;
  if (!user || !password) return undefined;
  const deny = (req: Request, res: Response, status: 401 | 403, message?: string) => {
    // Both schemes it accepts: Basic makes a browser ask for the password, Bearer is what the API speaks.
    if (status === 401) res.setHeader('WWW-Authenticate', 'Basic realm="jobs", charset="UTF-8", Bearer');
    res
      .status(status)
      .json(
        errorEnvelope(
          req.requestId,
          status === 401 ? 'UNAUTHENTICATED' : 'FORBIDDEN',
          message ??
            (status === 401
              ? 'The jobs dashboard needs its basic-auth credentials or an admin owner key.'
              : 'Only an OWNER key with the admin flag may open the jobs dashboard.'),
        ),
      );
  };
  const guard: RequestHandler = (req: Request, res: Response, next: NextFunction) => {
    // Browsers resend basic credentials on any request to this origin, so a page elsewhere could
    // post a form here. Changes must come as JSON (what the dashboard sends; a cross-site form
    // cannot) and not from another site.
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
      if (type !== 'application/json' || req.headers['sec-fetch-site'] === 'cross-site') {
        return deny(
          req,
          res,
          403,
          'Changes through the jobs dashboard must be JSON requests from the dashboard itself.',
        );
      }
    }
    const header = req.headers.authorization ?? '';
    const basic = /^Basic ([A-Za-z0-9+/=]+)$/.exec(header.trim());
    if (basic) {
      const here = `dashboard-login:${addressBucket(clientAddress(req))}`;
      const limits = services.rateLimiter;
      const what = 'failed jobs-dashboard logins';
      const refuse = (err: unknown) => {
        if (!(err instanceof AppError)) return next(err);
        for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
        res.status(err.status).json(errorEnvelope(req.requestId, err.code, err.message));
      };
      Promise.all([
        limits.check(here, DASHBOARD_FAILED_LOGINS_PER_ADDRESS, 60, what),
        limits.check('dashboard-login', DASHBOARD_FAILED_LOGINS_TOTAL, 60, what),
      ])
        .then(async () => {
          const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
          const i = decoded.indexOf(':');
          // Both compared in full, so a wrong user name takes as long as a wrong password.
          const userOk = i >= 0 && sameSecret(decoded.slice(0, i), user);
          const passwordOk = i >= 0 && sameSecret(decoded.slice(i + 1), password);
          if (userOk && passwordOk) return next();
          // Counted after the answer is decided; the count only decides the next attempts.
          await limits.hit('dashboard-login', Number.MAX_SAFE_INTEGER, 60, what);
          await limits.hit(here, Number.MAX_SAFE_INTEGER, 60, what);
          deny(req, res, 401);
        })
        .catch(refuse);
      return;
    }
    if (/^Bearer /i.test(header)) {
      services.keys.authenticate(header).then(
        (principal) => (services.keys.isOperator(principal) ? next() : deny(req, res, 403)),
        () => deny(req, res, 401),
      );
      return;
    }
    deny(req, res, 401);
  };
  return [guard, unframeable, createExpressMiddleware(agendaOf(services.jobs))];
}
