import { createServer, type Server } from 'node:http';
import express, { type RequestHandler } from 'express';
import type { Role } from './config.js';
import type { Services } from './container.js';
import { envelope } from './errors/envelope.js';
import { requestId } from './http/request-id.js';
import { metricsEndpoint } from './metrics/metrics-endpoint.js';
import { unfinishedRentalCounts } from './modules/rentals/store/rental-counts.repository.js';
import { readinessProbe, readinessRoute, type Readiness } from './readiness.js';

/** `GET /metrics` of this process's services, behind `token` when one is given. */
export function metricsRoute(services: Pick<Services, 'ds' | 'logger' | 'clock'>, token?: string): RequestHandler {
  return metricsEndpoint({
    rentalCounts: () => unfinishedRentalCounts(services.ds),
    logger: services.logger,
    token,
    nowMs: () => services.clock.now().getTime(),
  });
}

/** `GET /healthz`, liveness: the process is up and its event loop answers; it asks nothing of the database. */
export const livenessRoute: RequestHandler = (req, res) => {
  res.setHeader('Cache-Control', 'no-store');
  res.json(envelope(req, { status: 'ok' }));
};

/**
 * The listener of METRICS_PORT on METRICS_HOST, for every role of the process: `/metrics` (open,
 * since it is bound to loopback unless the operator says otherwise), `/readyz` for the roles
 * this process runs, and `/healthz`. Answers 404 to anything else. Resolves once bound; a taken
 * port or a foreign address stops the process like the api port does, with one line.
 */
export async function startMetricsListener(
  services: Services,
  roles: readonly Role[],
  readiness: Readiness = readinessProbe(services, roles),
): Promise<Server | undefined> {
  const { port, host } = services.config.metrics;
  if (port === undefined) return undefined;
  const app = express();
  app.disable('x-powered-by');
  app.use(requestId());
  app.get('/metrics', metricsRoute(services));
  app.get('/readyz', readinessRoute(readiness));
  app.get('/healthz', livenessRoute);
  app.use(
    (_req, res) =>
      void res.status(404).type('text/plain').send('Not found: this port serves /metrics, /readyz and /healthz.\n'),
  );
  const server = createServer(app);
  await new Promise<void>((resolve) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      process.stderr.write(
        `cannot listen for metrics on ${host}:${port} (${err.code ?? err.message}); set METRICS_PORT or METRICS_HOST\n`,
      );
      process.exit(1);
    });
    server.listen(port, host, () => resolve());
  });
  services.logger.info({ host, port }, `metrics on http://${host.includes(':') ? `[${host}]` : host}:${port}/metrics`);
  return server;
}
