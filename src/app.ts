import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { pinoHttp } from 'pino-http';
import type { Services } from './container.js';
import { envelope, errorEnvelope } from './errors/envelope.js';
import { errorHandler, notFoundHandler } from './http/error-handler.js';
import { requestId } from './http/request-id.js';
import { discoveryRouter } from './http/discovery.js';
import { JSON_BODY_LIMIT_BYTES, limitJsonDepth, normalizeCharset, rejectMalformedPath } from './http/request-guards.js';
import { bearerChallenge, noStoreApi, securityHeaderValues, securityHeaders } from './http/security-headers.js';
import { fastInventoryRoutes } from './modules/inventory/inventory-fast-route.js';
import { RegisterRoutes } from './generated/routes.js';
import { approvalPageRouter } from './modules/agents/approval-page.router.js';
import { paymentPagesRouter } from './modules/billing/payment-pages.router.js';
import { jobsDashboard } from './jobs/jobs-dashboard.js';
import { releasesRouter } from './http/releases.router.js';

export interface AppOptions {
  /** Routers of other roles to mount before the API routes (webhooks, pages, dashboards). */
  mount?: (app: Express) => void;
  /** Reports whether the database is reachable and migrated, for /healthz. */
  health?: () => Promise<boolean>;
}

const PUBLIC_CORS_PATHS = /^\/api\/(v1\/(offers|gpus)(\/.*)?|openapi\.json)$/;
const PUBLIC_CORS_HEADERS = { 'Access-Control-Allow-Origin': '*', 'Access-Control-Expose-Headers': 'ETag, X-Request-Id' };

export function createApp(services: Services, options: AppOptions = {}): Express {
  const app = express();
  app.locals.services = services;
  app.disable('x-powered-by');
  app.set('trust proxy', 'loopback');
  app.set('etag', false);

  const production = services.config.nodeEnv === 'production';
  const assignRequestId = requestId();
  // A request log whose level is off costs nothing: no per-request child logger, no listeners.
  const httpLog = services.logger.isLevelEnabled('error')
    ? pinoHttp({
        logger: services.logger,
        genReqId: (req) => (req as Request).requestId,
        customProps: (req) => ({ requestId: (req as Request).requestId }),
        serializers: {
          req: (req) => ({ method: req.method, url: redactUrl(String(req.url)) }),
          res: (res) => ({ statusCode: res.statusCode }),
        },
        customLogLevel: (_req, res, err) => (err || res.statusCode >= 500 ? 'error' : 'info'),
      })
    : undefined;

  // The hot public reads, first: everything they need (request id, security and CORS headers,
  // the log) is done inside, so no generic middleware runs for them.
  app.use(
    fastInventoryRoutes(services.inventory, {
      staticHeaders: { ...securityHeaderValues(production), ...PUBLIC_CORS_HEADERS },
      log: httpLog && services.logger.isLevelEnabled('info') ? (req, res) => httpLog(req, res) : undefined,
    }),
  );

  app.use(assignRequestId);
  app.use(securityHeaders(production));
  app.use(noStoreApi());
  app.use(bearerChallenge());
  if (httpLog) app.use(httpLog);

  // Public inventory is meant to be read from anywhere, including browsers on other origins.
  app.use((req: Request, res: Response, next: NextFunction) => {
    if (PUBLIC_CORS_PATHS.test(req.path)) {
      for (const [name, value] of Object.entries(PUBLIC_CORS_HEADERS)) res.setHeader(name, value);
      if (req.method === 'OPTIONS') {
        res.setHeader('Access-Control-Allow-Methods', 'GET, HEAD, OPTIONS');
        res.setHeader('Access-Control-Allow-Headers', 'If-None-Match, X-Request-Id');
        res.setHeader('Access-Control-Max-Age', '600');
        res.status(204).end();
        return;
      }
    }
    next();
  });

  app.use(rejectMalformedPath());
  app.use(normalizeCharset());

  app.get('/healthz', async (req, res) => {
    let ok = false;
    try {
      ok = options.health ? await options.health() : (await services.ds.query('SELECT 1')).length === 1;
    } catch {
      ok = false;
    }
    if (ok) res.json(envelope(req, { status: 'ok' }));
    else res.status(503).json(errorEnvelope(req.requestId, 'UNAVAILABLE', 'The database is not reachable or not migrated yet.'));
  });

  app.use(discoveryRouter(services.config.publicBaseUrl));

  app.use(paymentPagesRouter(services));
  app.use(approvalPageRouter(services));
  app.use(releasesRouter(services.config, services.logger));
  const dashboard = jobsDashboard(services);
  if (dashboard) app.use('/admin/jobs', ...dashboard);
  options.mount?.(app);

  app.use(
    express.json({
      limit: JSON_BODY_LIMIT_BYTES,
      // Any JSON value parses; a top-level null or number is then a schema violation (422), not "invalid JSON".
      strict: false,
      // Kept for webhook signature checks, which must see the exact bytes that were signed.
      verify: (req, _res, buf) => {
        (req as Request).rawBody = buf;
      },
    }),
  );
  app.use(limitJsonDepth());
  RegisterRoutes(app);
  app.use(notFoundHandler());
  app.use(errorHandler(services.logger));
  return app;
}

/**
 * The URL as the request log records it: no query string, and no approval code (the approval
 * page's path carries it, and whoever holds it can see the request it names).
 */
export function redactUrl(url: string): string {
  return url.split('?')[0].replace(/^\/approve\/[^/]+/, '/approve/[redacted]');
}
