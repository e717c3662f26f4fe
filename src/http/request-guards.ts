import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { AppError } from '../errors/app-error.js';

/** Deepest nesting of objects and arrays a JSON body may have; no request of ours needs more than 3. */
export const JSON_MAX_DEPTH = 32;

/**
 * A path with a malformed percent-escape (`/approve/%E2`) cannot name any resource; it is the
 * caller's 400, decided before any router tries (and fails) to decode it.
 */
export function rejectMalformedPath(): RequestHandler {
  return (req: Request, _res: Response, next: NextFunction) => {
    try {
      decodeURIComponent(req.path);
    } catch {
      return next(new AppError('INVALID_REQUEST', 'The request path contains a malformed percent-escape.'));
    }
    next();
  };
}

const UTF8 = new Set(['utf-8', 'utf8']);

/**
 * Accepts every spelling of UTF-8 in a `charset` parameter (`utf8`, `UTF-8`, `"utf-8"`) by
 * rewriting it to the one body-parser knows, and refuses any other charset with 415: JSON is
 * UTF-8 (RFC 8259), and a body read in another charset would be read wrong.
 */
export function normalizeCharset(): RequestHandler {
  return (req: Request, _res: Response, next: NextFunction) => {
    const header = req.headers['content-type'];
    if (!header) return next();
    const params = header.split(';');
    let changed = false;
    for (let i = 1; i < params.length; i++) {
      const eq = params[i].indexOf('=');
      if (eq < 0 || params[i].slice(0, eq).trim().toLowerCase() !== 'charset') continue;
      const value = params[i]
        .slice(eq + 1)
        .trim()
        .replace(/^"(.*)"$/, '$1')
        .toLowerCase();
      if (!UTF8.has(value)) {
        return next(
          new AppError(
            'UNSUPPORTED_MEDIA_TYPE',
            `Unsupported charset "${value.slice(0, 40)}": send the body as UTF-8 (charset=utf-8, or no charset).`,
          ),
        );
      }
      params[i] = ' charset=utf-8';
      changed = true;
    }
    if (changed) req.headers['content-type'] = params.join(';');
    next();
  };
}

/** Depth of the deepest object or array in `value`, counting stops once past `max`. */
function deeperThan(value: unknown, max: number): boolean {
  let level: unknown[] = [value];
  for (let depth = 0; level.length > 0; depth++) {
    if (depth > max) return true;
    const next: unknown[] = [];
    for (const v of level) if (v !== null && typeof v === 'object') next.push(...Object.values(v as object));
    level = next;
  }
  return false;
}

/** Refuses a parsed JSON body nested deeper than JSON_MAX_DEPTH (400), before validation walks it. */
export function limitJsonDepth(): RequestHandler {
  return (req: Request, _res: Response, next: NextFunction) => {
    if (req.body !== null && typeof req.body === 'object' && deeperThan(req.body, JSON_MAX_DEPTH)) {
      return next(new AppError('INVALID_REQUEST', `The JSON body is nested deeper than ${JSON_MAX_DEPTH} levels.`));
    }
    next();
  };
}
