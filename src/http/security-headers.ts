import type { NextFunction, Request, RequestHandler, Response } from 'express';
import helmet from 'helmet';

/**
 * The Content-Security-Policy of every response. Our HTML (the reference page, the jobs
 * dashboard) loads scripts only from files of this origin, never inline, so nothing injected
 * into a page can run; `frame-ancestors 'none'` keeps every page, the dashboard included, out of
 * other sites' frames. Pages that need less (approval, payment) send a stricter policy of their own.
 */
export const CSP_DIRECTIVES = {
  'default-src': ["'self'"],
  'script-src': ["'self'"],
  // Swagger UI and the dashboard set style attributes at run time.
  'style-src': ["'self'", "'unsafe-inline'"],
  'img-src': ["'self'", 'data:'],
  'font-src': ["'self'", 'data:'],
  'connect-src': ["'self'"],
  'object-src': ["'none'"],
  'base-uri': ["'none'"],
  'form-action': ["'self'"],
  'frame-ancestors': ["'none'"],
};

/**
 * Security headers on every response (helmet): `X-Content-Type-Options: nosniff`, the CSP above,
 * `X-Frame-Options: DENY`, no referrer. Cross-Origin-Resource-Policy stays off because the public
 * inventory is meant to be read from other origins; HSTS only in production, where TLS is in front.
 * None of them depends on the request, so helmet runs once and every response gets its values.
 */
export function securityHeaders(production: boolean): RequestHandler {
  const headers = Object.entries(securityHeaderValues(production));
  return (_req: Request, res: Response, next: NextFunction) => {
    for (const [name, value] of headers) res.setHeader(name, value);
    next();
  };
}

function helmetMiddleware(production: boolean): RequestHandler {
  return helmet({
    contentSecurityPolicy: { useDefaults: false, directives: CSP_DIRECTIVES },
    crossOriginResourcePolicy: false,
    crossOriginEmbedderPolicy: false,
    frameguard: { action: 'deny' },
    referrerPolicy: { policy: 'no-referrer' },
    strictTransportSecurity: production,
  });
}

/**
 * API answers carry tokens, setup codes and private keys (signup, exchange, agent keys,
 * authorization, approval, reveal) and account data: no cache may keep them. Routes that are
 * meant to be cached (the public inventory, with its ETag) set their own Cache-Control later.
 */
export function noStoreApi(): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    if (req.path.startsWith('/api/')) res.setHeader('Cache-Control', 'no-store');
    next();
  };
}

/** The challenge every 401 carries (RFC 7235): one value whatever the cause, like the body. */
export const BEARER_CHALLENGE = 'Bearer';

/**
 * Adds `WWW-Authenticate: Bearer` to any 401 that names no scheme of its own, whoever answers it
 * (our error handler, the Telegram webhook's secret check), at the moment the head is written.
 */
export function bearerChallenge(): RequestHandler {
  return (_req: Request, res: Response, next: NextFunction) => {
    const writeHead = res.writeHead;
    res.writeHead = function (this: Response, ...args: Parameters<Response['writeHead']>) {
      const status = typeof args[0] === 'number' ? args[0] : this.statusCode;
      if (status === 401 && !this.getHeader('WWW-Authenticate')) this.setHeader('WWW-Authenticate', BEARER_CHALLENGE);
      return writeHead.apply(this, args);
    } as Response['writeHead'];
    next();
  };
}

/**
 * The headers helmet sets with our options, read once by running it against a recorder. The
 * middleware above sends them, and so do the routes that answer ahead of the middleware chain
 * (the precomputed inventory).
 */
export function securityHeaderValues(production: boolean): Record<string, string> {
  const headers: Record<string, string> = {};
  const recorder = {
    setHeader: (name: string, value: string | number | readonly string[]) => void (headers[name] = String(value)),
    removeHeader: (name: string) => void delete headers[name],
  };
  let done = false;
  helmetMiddleware(production)({} as Request, recorder as unknown as Response, (err?: unknown) => {
    if (err) throw err;
    done = true;
  });
  // Helmet sets its headers synchronously; a version that did not would leave this list incomplete.
  if (!done) throw new Error('helmet did not finish synchronously');
  return headers;
}
