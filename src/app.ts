import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { pinoHttp } from 'pino-http';
import type { Services } from './container.js';
import { controllerFactories } from './controllers.js';
import { errorHandler, notFoundHandler } from './http/error-handler.js';
import { requestId } from './http/request-id.js';
import { directRoute, registeredRoute } from './http/direct-route.js';
import { useAuthenticator } from './http/authentication.js';
import { useControllers } from './http/ioc.js';
import { discoveryRouter } from './http/discovery.js';
import { limitJsonDepth, normalizeCharset, rejectMalformedPath } from './http/request-guards.js';
import { jsonBodies, rejectUnknownProperties } from './http/body-shape.js';
import { publicCreateLimits } from './http/public-limits.js';
import { isWaitingRead, pushPlaces, WAITING_READ_ROUTES } from './http/push-limits.js';
import { bearerChallenge, noStoreApi, securityHeaderValues, securityHeaders } from './http/security-headers.js';
import { fastInventoryRoutes } from './modules/inventory/inventory-fast-route.js';
import { eventStreamRoute, type EventStreamOptions } from './modules/events/event-stream.js';
import { RegisterRoutes } from './generated/routes.js';
import { approvalPageRouter } from './modules/agents/approval-page.router.js';
import { consentRouter } from './modules/oauth/consent.router.js';
import { oauthRouter } from './modules/oauth/oauth.router.js';
import { remoteMcpRouter } from './modules/mcp/remote-mcp.router.js';
import { readVersion } from './providers/kit/user-agent.js';
import { paymentPagesRouter } from './modules/billing/payment-pages.router.js';
import { receiptKeysRouter } from './modules/receipts/receipt-keys.router.js';
import { jobsDashboard } from './jobs/jobs-dashboard.js';
import { releasesRouter } from './http/releases.router.js';
import { httpMetrics } from './metrics/http-metrics.js';
import { livenessRoute, metricsRoute } from './metrics-listener.js';
import { readinessProbe, readinessRoute, type Readiness } from './readiness.js';

export interface AppOptions {
  /** Routers of other roles to mount before the API routes (webhooks, pages, dashboards). */
  mount?: (app: Express) => void;
  /** Whether this process can take work, for /readyz (default: the api role's checks). */
  readiness?: Readiness;
  /** Heartbeat and longest life of event streams (tests shorten them). */
  eventStream?: Partial<EventStreamOptions>;
}

/** A heartbeat comment every 15 s, and at most 5 minutes a stream: clients reconnect with Last-Event-ID. */
const EVENT_STREAM: EventStreamOptions = { heartbeatMs: 15_000, maxMs: 5 * 60_000 };

const PUBLIC_CORS_PATHS = /^\/api\/(v1\/(offers|gpus)(\/.*)?|openapi\.json)$/;
const PUBLIC_CORS_HEADERS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Expose-Headers': 'ETag, X-Request-Id',
};

export function createApp(services: Services, options: AppOptions = {}): Express {
  const app = express();
  // First, so the fast inventory reads are counted and timed too.
  app.use(httpMetrics());
  useControllers(app, controllerFactories(services));
  useAuthenticator(app, services.keys);
  app.disable('x-powered-by');
  // Which forwarded addresses to believe is the operator's to say (TRUST_PROXY); by default none,
  // so a client (a local renter included) cannot pick its own address for per-address limits.
  app.set('trust proxy', services.config.http.trustProxy);
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

  // Every request's own middleware, in order; admission's direct route runs the same functions.
  const leading = [
    assignRequestId,
    securityHeaders(production),
    noStoreApi(),
    bearerChallenge(),
    ...(httpLog ? [httpLog] : []),
  ];
  const guards = [rejectMalformedPath(), normalizeCharset()];
  // Public creates are counted per client address before their bodies are read or validated.
  const bodies = [
    publicCreateLimits(services.rateLimiter, services.config),
    jsonBodies((req, buf) => {
      // Kept for webhook signature checks, which must see the exact bytes that were signed.
      req.rawBody = buf;
    }),
    limitJsonDepth(),
    rejectUnknownProperties(),
  ];
  const notFound = notFoundHandler();
  const errors = errorHandler(services.logger);

  // Admission, the hot write: the middleware above and its generated handlers, without the walk
  // through every page, router and route mounted below (none of which answers this path).
  app.use(
    directRoute(registeredRoute(RegisterRoutes, 'post', '/api/v1/rentals'), {
      middleware: [...leading, ...guards, ...bodies],
      notFound,
      errorHandlers: [errors],
    }),
  );

  app.use(...leading);

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

  app.use(...guards);

  // Liveness asks nothing of the database: an outage must not get every process restarted at once.
  app.get('/healthz', livenessRoute);
  app.get(
    '/readyz',
    readinessRoute(options.readiness ?? readinessProbe(services, ['api']), {
      detailToken: services.config.metrics.token,
    }),
  );
  // Off the public port unless a token guards it (METRICS_TOKEN); METRICS_PORT serves it apart.
  if (services.config.metrics.token) app.get('/metrics', metricsRoute(services, services.config.metrics.token));

  app.use(discoveryRouter(services.config.http.publicBaseUrl, services.config.releases.url));
  // The keys teardown receipts are checked against: public, cacheable, no envelope (a JWK Set).
  app.use(receiptKeysRouter(services.receipts));

  app.use(paymentPagesRouter(services));
  app.use(approvalPageRouter(services));
  // Remote MCP and its OAuth: before the JSON body parser, since each reads its own bodies.
  app.use(consentRouter(services));
  app.use(oauthRouter(services.oauth, services.rateLimiter, services.config.agents.oauthRatePerMinute));
  app.use(
    remoteMcpRouter({
      oauth: services.oauth,
      publicBaseUrl: services.config.http.publicBaseUrl,
      logger: services.logger,
      app: () => app,
      version: readVersion(),
      botUsername: services.config.telegram.botUsername,
    }),
  );
  app.use(releasesRouter(services.config, services.logger));
  const dashboard = jobsDashboard(services);
  if (dashboard) app.use('/admin/jobs', ...dashboard);
  options.mount?.(app);

  app.use(...bodies);
  // The stream of GET /api/v1/events (Accept: text/event-stream); the generated route answers JSON.
  app.use(eventStreamRoute(services.store, services.eventHub, { ...EVENT_STREAM, ...options.eventStream }));
  // A waiting read holds a place of its client address before its key is read (the hub holds the key's).
  const push = services.eventHub.limits;
  if (push) app.get(WAITING_READ_ROUTES, pushPlaces(push, isWaitingRead));
  RegisterRoutes(app);
  app.use(notFound);
  app.use(errors);
  return app;
}

/**
 * The URL as the request log records it: no scheme or host (an absolute-form target), no query
 * string, and no approval code (the approval page's path carries it, and whoever holds it can see
 * the request it names). Express routes paths case-insensitively and through repeated slashes, so
 * the approval page is recognised the same way, after percent-decoding.
 */
export function redactUrl(url: string): string {
  const path = url.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i, '').split(/[?#]/)[0] || '/';
  let decoded = path;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    // A malformed escape is refused with 400 anyway; judge the raw text.
  }
  if (/^\/+approve(\/|$)/i.test(decoded)) return '/approve/[redacted]';
  if (/^\/+oauth\/+consent(\/|$)/i.test(decoded)) return '/oauth/consent/[redacted]';
  return path;
}
