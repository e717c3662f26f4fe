import { createHash, timingSafeEqual } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import { errorEnvelope } from '../errors/envelope.js';
import type { Logger } from '../logger.js';
import { collectProcessMetrics, metricsRegistry, rentalsByStatus } from './registry.js';

/** How long one reading of the rentals by status serves scrapes: however often they come, the database sees one query per this. */
export const RENTAL_COUNTS_CACHE_MS = 5_000;

/** What the scrape reads from the database: unfinished rentals per status (every status listed, zeros included). */
export type RentalCounts = () => Promise<Record<string, number>>;

export interface MetricsEndpointOptions {
  rentalCounts: RentalCounts;
  logger: Logger;
  /** Bearer token the scraper must send; absent: the endpoint is open (a loopback-only listener). */
  token?: string;
  /** Read time of the clock used for the cache (tests move it). */
  nowMs?: () => number;
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Whether `header` is `Bearer <token>`, compared in constant time (both sides hashed to one length first). */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return timingSafeEqual(digest(m ? m[1] : ''), digest(token)) && m !== null;
}

/**
 * `GET /metrics` in Prometheus text format: the process's series, with the rentals by status read
 * at most once per {@link RENTAL_COUNTS_CACHE_MS} (concurrent scrapes share one read). A failed
 * read leaves that series out of the scrape instead of failing it, so the process metrics still
 * arrive while the database is down.
 */
export function metricsEndpoint(options: MetricsEndpointOptions): RequestHandler {
  collectProcessMetrics();
  const now = options.nowMs ?? Date.now;
  let cached: { at: number; counts: Promise<Record<string, number> | undefined> } | undefined;
  const counts = () => {
    if (!cached || now() - cached.at >= RENTAL_COUNTS_CACHE_MS) {
      const read = options.rentalCounts().catch((err: unknown) => {
        options.logger.warn({ err }, 'metrics: could not count rentals by status');
        return undefined;
      });
      cached = { at: now(), counts: read };
    }
    return cached.counts;
  };
  return (req: Request, res: Response, next) => {
    if (options.token !== undefined && !bearerMatches(req.headers.authorization, options.token)) {
      res.setHeader('WWW-Authenticate', 'Bearer realm="metrics"');
      res
        .status(401)
        .json(
          errorEnvelope(
            req.requestId ?? '',
            'UNAUTHENTICATED',
            'GET /metrics needs Authorization: Bearer with METRICS_TOKEN.',
          ),
        );
      return;
    }
    counts()
      .then(async (byStatus) => {
        rentalsByStatus.reset();
        for (const [status, n] of Object.entries(byStatus ?? {})) rentalsByStatus.set({ status }, n);
        const text = await metricsRegistry.metrics();
        res.setHeader('Content-Type', metricsRegistry.contentType);
        res.setHeader('Cache-Control', 'no-store');
        res.send(text);
      })
      .catch(next);
  };
}
