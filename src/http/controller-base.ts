import { Controller } from '@tsoa/runtime';
import type { Request as ExRequest } from 'express';
import { envelope, type Envelope } from '../errors/envelope.js';

/** Cache-Control of cacheable answers (the public inventory): kept, but revalidated by ETag. */
export const CACHEABLE = 'public, max-age=0, must-revalidate';

/** Whether an If-None-Match header names `etag` (or `*`): the client's copy is current. */
export function etagMatches(ifNoneMatch: string, etag: string): boolean {
  return ifNoneMatch.split(',').some((t) => t.trim() === etag || t.trim() === '*');
}

/**
 * Shared plumbing for controllers: the envelope and cached answers. Each controller takes the
 * services it uses in its own constructor (src/http/ioc.ts builds it per request).
 */
export abstract class BaseController extends Controller {
  protected ok<T>(req: ExRequest, data: T, status = 200): Envelope<T> {
    this.setStatus(status);
    return envelope(req, data);
  }

  /** Serves an ETag'd body, or 304 when the client already has it. */
  protected cached<T>(req: ExRequest, snapshot: { etag: string; body: T }): Envelope<T> {
    this.setHeader('ETag', snapshot.etag);
    this.setHeader('Cache-Control', CACHEABLE);
    this.setHeader('Vary', 'Accept-Encoding');
    const inm = req.header('if-none-match');
    if (inm && etagMatches(inm, snapshot.etag)) {
      this.setStatus(304);
      return undefined as unknown as Envelope<T>;
    }
    return this.ok(req, snapshot.body);
  }
}
