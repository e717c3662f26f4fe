import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';

const SANE = /^[A-Za-z0-9._:-]{8,128}$/;

/** The id of a request: a sane incoming X-Request-Id, so clients can correlate, or a new one. */
export function requestIdFor(incoming: string | string[] | undefined): string {
  return typeof incoming === 'string' && SANE.test(incoming) ? incoming : `req_${randomUUID()}`;
}

/** Sets `req.requestId` and the X-Request-Id response header (see requestIdFor). */
export function requestId(): RequestHandler {
  return (req, res, next) => {
    req.requestId = requestIdFor(req.header('x-request-id'));
    res.setHeader('X-Request-Id', req.requestId);
    next();
  };
}
