import { ValidateError } from '@tsoa/runtime';
import type { ErrorRequestHandler, Request, RequestHandler } from 'express';
import { IDEMPOTENCY_KEY_HINT } from '../vocabulary/access-hints.js';
import { AppError } from '../errors/app-error.js';
import { errorEnvelope } from '../errors/envelope.js';
import type { ErrorCode } from '../errors/error-codes.js';
import { isConnectionError } from '../db/connection-errors.js';
import type { Logger } from '../logger.js';
import { bodyLimitOf, isJsonType } from './body-shape.js';
import { bodyFacts, describeValidation } from './validation-messages.js';

interface HttpError {
  status: number;
  type?: string;
}

/** An http-errors error (body-parser, the router) that blames the request: status 4xx. */
function isClientHttpError(err: unknown): err is HttpError {
  const { status, expose } = (err ?? {}) as { status?: unknown; expose?: unknown };
  // Only errors made to be shown (http-errors sets `expose`) or the router's failed decode: tsoa
  // stamps 401 on anything its authentication hook throws, which must not pass for a client error.
  return (expose === true || err instanceof URIError) && typeof status === 'number' && status >= 400 && status < 500;
}

/** A 413 in words: the route's limit, and the fields that can make a body that large with theirs. */
export function payloadTooLargeMessage(path: string): string {
  const limit = bodyLimitOf(path);
  const kib = Math.floor(limit.bytes / 1024);
  return limit.largest
    ? `The request body is larger than this route's ${kib} KiB limit, which fits ${limit.largest} however they are escaped: shorten the one over its limit.`
    : `The request body is larger than this route's ${kib} KiB limit; its fields are ids, names, numbers and URLs, none longer than a few hundred characters: send only the fields the route documents.`;
}

function describeHttpError(err: HttpError, req: Request): { status: number; code: ErrorCode; message: string } {
  if (err.status === 413) return { status: 413, code: 'PAYLOAD_TOO_LARGE', message: payloadTooLargeMessage(req.path) };
  if (err.type === 'encoding.unsupported') {
    return {
      status: 415,
      code: 'UNSUPPORTED_MEDIA_TYPE',
      message: 'Unsupported Content-Encoding: send the body as identity, gzip, deflate or br.',
    };
  }
  if (err.status === 415) {
    return { status: 415, code: 'UNSUPPORTED_MEDIA_TYPE', message: 'Unsupported charset: send the body as UTF-8.' };
  }
  if (err.type === 'entity.parse.failed') {
    // Read as JSON only because it came unlabelled or labelled as a form: say what to send.
    if (!isJsonType(req.headers['content-type'])) {
      return {
        status: 415,
        code: 'UNSUPPORTED_MEDIA_TYPE',
        message:
          'The request body is not JSON: this API reads JSON bodies; send JSON with Content-Type: application/json.',
      };
    }
    return { status: 400, code: 'INVALID_REQUEST', message: 'The request body is not valid JSON.' };
  }
  if (err instanceof URIError)
    return { status: 400, code: 'INVALID_REQUEST', message: 'The request path contains a malformed percent-escape.' };
  return {
    status: 400,
    code: 'INVALID_REQUEST',
    message: 'The request body could not be read (is its Content-Encoding right?).',
  };
}

/** A header's problem in words; the one pattern a header declares is signup's UUID. */
function headerProblem(name: string, message: string): string {
  if (/^idempotency-key$/i.test(name) && /^Not match in/.test(message))
    return `${name} must be a UUID here. ${IDEMPOTENCY_KEY_HINT}`;
  return /^idempotency-key$/i.test(name) ? IDEMPOTENCY_KEY_HINT : '';
}

const HEADER_FIELD = /^(idempotency-key|authorization|x-[\w-]+)$/i;

export function notFoundHandler(): RequestHandler {
  return (req, res) => {
    res.status(404).json(errorEnvelope(req.requestId, 'NOT_FOUND', `No route for ${req.method} ${req.path}.`));
  };
}

/** The one error handler: every failure leaves as the envelope; internals stay in the log. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    const requestId = req.requestId ?? 'unknown';
    let status: number;
    let code: ErrorCode;
    let message: string;
    let headers: Record<string, string> = {};
    if (err instanceof AppError) {
      ({ status, code, message, headers } = err);
    } else if (err instanceof ValidateError) {
      const names = Object.keys(err.fields);
      const headerNames = names.filter((n) => HEADER_FIELD.test(n));
      if (headerNames.length > 0) {
        // A bad header is the caller's protocol error (400) whatever else is wrong with the body.
        status = 400;
        code = 'INVALID_REQUEST';
        const problems = headerNames.map((n) => headerProblem(n, err.fields[n].message)).filter(Boolean);
        message = [`Missing or invalid header: ${headerNames.join(', ')}.`, ...problems].join(' ');
      } else {
        status = 422;
        code = 'VALIDATION_FAILED';
        message = describeValidation(err.fields, bodyFacts(req));
      }
    } else if (isConnectionError(err)) {
      status = 503;
      code = 'UNAVAILABLE';
      message = 'The database is not reachable at the moment; try again shortly.';
      logger.warn({ err, requestId, method: req.method, path: req.path }, 'database unreachable');
    } else if (isClientHttpError(err)) {
      // body-parser's and the router's own refusals: unreadable body, oversize, encoding, path escape.
      ({ status, code, message } = describeHttpError(err, req));
    } else {
      status = 500;
      code = 'INTERNAL';
      message = 'Something went wrong on our side. Quote the request id when reporting it.';
      logger.error({ err, requestId, method: req.method, path: req.path }, 'unhandled error');
    }
    if (res.headersSent) return;
    for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
    res.status(status).json(errorEnvelope(requestId, code, message));
  };
}
