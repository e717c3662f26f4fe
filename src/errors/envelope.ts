import type { Request } from 'express';

export const API_VERSION = 'v1';

export interface Meta {
  requestId: string;
  apiVersion: string;
}

/** Success envelope. */
export interface Envelope<T> {
  data: T;
  meta: Meta;
}

export interface ErrorBody {
  /** Stable machine-readable code, e.g. `VALIDATION_FAILED`. */
  code: string;
  /** Human-readable explanation; never contains secrets or internals. */
  message: string;
  /** Quote this when reporting a problem (never the token). */
  requestId: string;
}

/** Error envelope: every non-2xx response has this shape. */
export interface ErrorEnvelope {
  error: ErrorBody;
}

export function envelope<T>(req: Request, data: T): Envelope<T> {
  return { data, meta: { requestId: req.requestId, apiVersion: API_VERSION } };
}

export function errorEnvelope(requestId: string, code: string, message: string): ErrorEnvelope {
  return { error: { code, message, requestId } };
}
