import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Config } from '../config.js';
import type { RateLimiter } from './rate-limiter.js';
import { addressBucket, clientAddress } from './client-address.js';

/** A public route that creates something, limited per client address. */
interface PublicCreate {
  path: string;
  /** Counter shared by routes that spend the same budget. */
  bucket: string;
  perMinute(config: Config): number;
  /** What the 429 says was too many. */
  what: string;
}

/**
 * Public creates and their per-address budgets. They are counted before the body is read or
 * validated, so a client over its budget costs one counter update; the service's own global
 * ceiling (signups across every address) is counted after, so a refused client never spends it.
 */
const PUBLIC_CREATES: PublicCreate[] = [
  {
    path: '/api/v1/signup',
    bucket: 'signup',
    perMinute: (c) => c.signup.ratePerAddressPerMinute,
    what: 'signups from this address',
  },
];

/** Per-address limits of the public creates, keyed on the address TRUST_PROXY makes trustworthy. */
export function publicCreateLimits(rateLimiter: RateLimiter, config: Config): RequestHandler {
  const byPath = new Map(PUBLIC_CREATES.map((r) => [r.path, r]));
  return (req: Request, _res: Response, next: NextFunction) => {
    if (req.method !== 'POST') return next();
    // Express matches routes case-insensitively and with a trailing slash; so must this.
    const route = byPath.get(req.path.toLowerCase().replace(/\/+$/, ''));
    if (!route) return next();
    rateLimiter
      .hit(`addr:${route.bucket}:${addressBucket(clientAddress(req))}`, route.perMinute(config), 60, route.what)
      .then(() => next(), next);
  };
}
