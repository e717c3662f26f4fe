import type { Request, RequestHandler, Response } from 'express';
import { httpRequestDuration, httpRequests, secondsSince } from './registry.js';

/** Methods Node's parser accepts that a client may send; anything else is counted as OTHER. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * The public inventory reads answered ahead of the router (src/modules/inventory/inventory-fast-route.ts)
 * never set `req.route`; these are the templates their controller declares for the same paths.
 */
function fastRouteTemplate(path: string): string | undefined {
  if (path === '/api/v1/offers' || path === '/api/v1/gpus') return path;
  const m = /^\/api\/v1\/(offers|gpus)\/[^/]+$/.exec(path);
  if (!m) return undefined;
  return m[1] === 'offers' ? '/api/v1/offers/:id' : '/api/v1/gpus/:slug';
}

/**
 * The route label of an answered request: the template of the route that matched
 * (`/api/v1/rentals/:id`), never the path it was asked with; `unmatched` for a 404 no route
 * took, `other` for what a middleware answered itself (static files, refusals before routing).
 */
export function routeLabel(req: Request, res: Response): string {
  const route = req.route as { path?: unknown } | undefined;
  if (route && typeof route.path === 'string') return `${req.baseUrl}${route.path}` || '/';
  if (req.method === 'GET' || req.method === 'HEAD') {
    const fast = res.statusCode < 400 ? fastRouteTemplate(req.path) : undefined;
    if (fast) return fast;
  }
  return res.statusCode === 404 ? 'unmatched' : 'other';
}

/**
 * Counts and times every request: put it first, so the fast inventory reads are counted too. It
 * adds one `finish` listener per request and nothing else: no query, no allocation per label set
 * beyond prom-client's own lookup.
 */
export function httpMetrics(): RequestHandler {
  return (req, res, next) => {
    const start = process.hrtime.bigint();
    res.once('finish', () => {
      const labels = {
        method: METHODS.has(req.method) ? req.method : 'OTHER',
        route: routeLabel(req, res),
        status: String(res.statusCode),
      };
      httpRequests.inc(labels);
      httpRequestDuration.observe(labels, secondsSince(start));
    });
    next();
  };
}
