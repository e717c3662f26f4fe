import type { OutgoingHttpHeaders } from 'node:http';
import { parse as parseQuery } from 'node:querystring';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { CACHEABLE, etagMatches } from '../../http/controller-base.js';
import type { CompressedHead, WireEncoding } from './envelope-wire.js';
import type { Cached, InventoryService } from './inventory.service.js';

/** Distinct Accept-Encoding values whose negotiation is remembered; clients send few. */
const MAX_NEGOTIATED = 64;

export interface FastInventoryOptions {
  /** Assigns `req.requestId` and its response header, synchronously (the app's request-id middleware). */
  assignRequestId: RequestHandler;
  /** Headers every response of the app carries (security, CORS of the public paths). */
  staticHeaders: OutgoingHttpHeaders;
  /** Starts the request log of one request, when the log records requests at all. */
  log?: (req: Request, res: Response) => void;
}

const noop = () => undefined;

/**
 * `GET /api/v1/offers`, `/api/v1/gpus` and `/api/v1/gpus/{slug}` answered from the snapshot's
 * serialised envelope, ahead of the body parser and the generated routes. The controller stays
 * the documented definition of these routes and answers whatever this declines: other methods,
 * other query parameters, an unknown model (its 404), a failed lookup.
 */
export function fastInventoryRoutes(inventory: InventoryService, options: FastInventoryOptions): RequestHandler {
  const negotiated = new Map<string, WireEncoding>();
  const encodingOf = (req: Request): WireEncoding => {
    const header = req.headers['accept-encoding'];
    if (!header) return 'identity';
    let encoding = negotiated.get(header);
    if (encoding === undefined) {
      encoding = preferredEncoding(header);
      if (negotiated.size >= MAX_NEGOTIATED) negotiated.clear();
      negotiated.set(header, encoding);
    }
    return encoding;
  };
  const common: OutgoingHttpHeaders = { ...options.staticHeaders, 'Cache-Control': CACHEABLE, Vary: 'Accept-Encoding' };

  const send = (req: Request, res: Response, hit: Cached<unknown>, compressed: CompressedHead | undefined): void => {
    options.assignRequestId(req, res, noop);
    options.log?.(req, res);
    const headers: OutgoingHttpHeaders = { ...common, ETag: hit.etag };
    const inm = req.headers['if-none-match'];
    if (inm && etagMatches(inm, hit.etag)) {
      res.writeHead(304, headers);
      res.end();
      return;
    }
    const encoding = compressed ? encodingOf(req) : 'identity';
    const [head, end] = hit.wire.body(req.requestId, encoding, compressed);
    headers['Content-Type'] = 'application/json; charset=utf-8';
    headers['Content-Length'] = head.length + end.length;
    if (encoding !== 'identity') headers['Content-Encoding'] = encoding;
    res.writeHead(200, headers);
    res.write(head);
    res.end(end);
  };

  return (req: Request, res: Response, next: NextFunction) => {
    if (req.method !== 'GET') return next();
    const lookup = lookupOf(inventory, req.url);
    if (!lookup) return next();
    let answered = false;
    lookup()
      .then(async (hit) => {
        const compressed = await hit.wire.prepare();
        answered = true;
        send(req, res, hit, compressed);
      })
      .catch((err: unknown) => {
        // Before an answer started, the controller handles it (an unknown model's 404, a database
        // error) as any request; after, the response is already on its way and only the log may know.
        if (!answered) return next();
        req.log?.error({ err }, 'inventory response failed');
        res.destroy();
      });
  };
}

/** The snapshot read a URL asks for, or undefined when the controller should answer it. */
function lookupOf(inventory: InventoryService, url: string): (() => Promise<Cached<unknown>>) | undefined {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  if (path === '/api/v1/offers') {
    if (q < 0) return () => inventory.listOffers();
    // Parsed as Express's "simple" query parser does; a repeated or unknown parameter is the controller's.
    const query = parseQuery(url.slice(q + 1));
    const keys = Object.keys(query);
    if (keys.length === 0) return () => inventory.listOffers();
    const gpu = query.gpu;
    if (keys.length !== 1 || typeof gpu !== 'string') return undefined;
    return () => inventory.listOffers(gpu);
  }
  if (q >= 0) return undefined;
  if (path === '/api/v1/gpus') return () => inventory.gpuSummary();
  if (!path.startsWith('/api/v1/gpus/')) return undefined;
  const raw = path.slice('/api/v1/gpus/'.length);
  if (!raw || raw.includes('/')) return undefined;
  let slug: string;
  try {
    slug = decodeURIComponent(raw);
  } catch {
    return undefined;
  }
  return () => inventory.gpuModel(slug);
}

/**
 * The coding to send for an Accept-Encoding value (RFC 9110 §12.5.3): the one with the higher
 * q-value, brotli on a tie (the smaller body; clients list codings in no order of preference),
 * identity when neither is acceptable. `*` stands for any coding not listed.
 */
export function preferredEncoding(header: string): WireEncoding {
  const q = new Map<string, number>();
  for (const part of header.split(',')) {
    const [coding, ...params] = part.split(';');
    const name = coding.trim().toLowerCase();
    if (!name) continue;
    const qParam = params.map((p) => p.trim().toLowerCase()).find((p) => p.startsWith('q='));
    const value = qParam === undefined ? 1 : Number(qParam.slice(2));
    q.set(name, Number.isFinite(value) ? value : 0);
  }
  const of = (name: string) => q.get(name) ?? q.get('*') ?? 0;
  const br = of('br');
  const gzip = Math.max(of('gzip'), q.get('x-gzip') ?? 0);
  if (br > 0 && br >= gzip) return 'br';
  return gzip > 0 ? 'gzip' : 'identity';
}
