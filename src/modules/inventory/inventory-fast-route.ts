import { parse as parseQuery } from 'node:querystring';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { CACHEABLE, etagMatches } from '../../http/controller-base.js';
import { requestIdFor } from '../../http/request-id.js';
import type { CompressedHead, WireEncoding } from './envelope-wire.js';
import type { Cached, CachedRead, InventoryService } from './inventory.service.js';

/** Distinct Accept-Encoding values whose negotiation is remembered; clients send few. */
const MAX_NEGOTIATED = 64;

export interface FastInventoryOptions {
  /** Headers every response of the app carries (security, CORS of the public paths). */
  staticHeaders: Record<string, string>;
  /** Starts the request log of one request, when the log records requests at all. */
  log?: (req: Request, res: Response) => void;
}

/**
 * `GET /api/v1/offers`, `/api/v1/offers/{id}`, `/api/v1/gpus` and `/api/v1/gpus/{slug}` answered
 * from the snapshot's serialised envelope, ahead of the body parser and the generated routes, with
 * no promise in between when the snapshot is current. The controller stays the documented definition of these
 * routes and answers whatever this declines: other methods, other query parameters, an unknown
 * model or offer (its 404), a failed lookup.
 */
export function fastInventoryRoutes(inventory: InventoryService, options: FastInventoryOptions): RequestHandler {
  const negotiated = new Map<string, WireEncoding>();
  const encodingOf = (header: string | undefined): WireEncoding => {
    if (!header) return 'identity';
    let encoding = negotiated.get(header);
    if (encoding === undefined) {
      encoding = preferredEncoding(header);
      if (negotiated.size >= MAX_NEGOTIATED) negotiated.clear();
      negotiated.set(header, encoding);
    }
    return encoding;
  };
  const common = Object.entries({
    ...options.staticHeaders,
    'Cache-Control': CACHEABLE,
    Vary: 'Accept-Encoding',
  }).flat();

  const send = (req: Request, res: Response, hit: Cached<unknown>, compressed: CompressedHead | undefined): void => {
    req.requestId = requestIdFor(req.headers['x-request-id']);
    options.log?.(req, res);
    // One flat list handed to writeHead: no per-header setHeader bookkeeping.
    const headers = [...common, 'ETag', hit.etag, 'X-Request-Id', req.requestId];
    const inm = req.headers['if-none-match'];
    if (inm && etagMatches(inm, hit.etag)) {
      res.writeHead(304, headers);
      res.end();
      return;
    }
    const encoding = compressed ? encodingOf(req.headers['accept-encoding']) : 'identity';
    const [head, end] = hit.wire.body(req.requestId, encoding, compressed);
    headers.push('Content-Type', 'application/json; charset=utf-8', 'Content-Length', String(head.length + end.length));
    if (encoding !== 'identity') headers.push('Content-Encoding', encoding);
    res.writeHead(200, headers);
    res.write(head);
    res.end(end);
  };

  return (req: Request, res: Response, next: NextFunction) => {
    if (req.method !== 'GET') return next();
    const read = readOf(inventory, req.url);
    if (!read) return next();
    let hit: Cached<unknown> | undefined;
    try {
      hit = read.now();
    } catch {
      return next();
    }
    const prepared = hit?.wire.prepared;
    if (hit && prepared) return send(req, res, hit, prepared.compressed);
    let answered = false;
    read
      .wait()
      .then(async (later) => {
        const compressed = await later.wire.prepare();
        answered = true;
        send(req, res, later, compressed);
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
function readOf(inventory: InventoryService, url: string): CachedRead<unknown> | undefined {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  if (path === '/api/v1/offers') {
    let gpu: string | undefined;
    if (q >= 0) {
      // Parsed as Express's "simple" query parser does; a repeated or unknown parameter is the controller's.
      const query = parseQuery(url.slice(q + 1));
      const keys = Object.keys(query);
      if (keys.length > 1 || (keys.length === 1 && typeof query.gpu !== 'string')) return undefined;
      gpu = query.gpu as string | undefined;
    }
    return inventory.listOffers(gpu);
  }
  if (q >= 0) return undefined;
  if (path === '/api/v1/gpus') return inventory.gpuSummary();
  const offerId = segmentAfter(path, '/api/v1/offers/');
  if (offerId !== undefined) return inventory.offer(offerId);
  const slug = segmentAfter(path, '/api/v1/gpus/');
  if (slug === undefined) return undefined;
  return inventory.gpuModel(slug);
}

/** The one decoded path segment after `prefix`, or undefined when the path is not of that shape. */
function segmentAfter(path: string, prefix: string): string | undefined {
  if (!path.startsWith(prefix)) return undefined;
  const raw = path.slice(prefix.length);
  if (!raw || raw.includes('/')) return undefined;
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
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
