import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';

const SANE = /^[A-Za-z0-9._:-]{8,128}$/;

/** Honours a sane incoming X-Request-Id so clients can correlate; otherwise mints one. */
export function requestId(): RequestHandler {
  return (req, res, next) => {
    const incoming = req.header('x-request-id');
    req.requestId = incoming && SANE.test(incoming) ? incoming : `req_${randomUUID()}`;
    res.setHeader('X-Request-Id', req.requestId);
    next();
  };
}
