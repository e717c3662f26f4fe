import { ValidateError } from '@tsoa/runtime';
import type { ErrorRequestHandler, Request, RequestHandler } from 'express';
import { IDEMPOTENCY_KEY_HINT, isMoneyField, moneyFieldHint } from '../../clients/sdk/src/hints.js';
import spec from '../generated/swagger.json' with { type: 'json' };
import { AppError } from '../errors/app-error.js';
import { errorEnvelope } from '../errors/envelope.js';
import type { ErrorCode } from '../errors/error-codes.js';
import { isConnectionError } from '../db/connection-errors.js';
import type { Logger } from '../logger.js';
import { JSON_BODY_LIMIT_BYTES, UNKNOWN_NAMED } from './body-shape.js';

interface HttpError {
  status: number;
  type?: string;
  /** body-parser's limit of the route, on a 413. */
  limit?: number;
}

/** An http-errors error (body-parser, the router) that blames the request: status 4xx. */
function isClientHttpError(err: unknown): err is HttpError {
  const { status, expose } = (err ?? {}) as { status?: unknown; expose?: unknown };
  // Only errors made to be shown (http-errors sets `expose`) or the router's failed decode: tsoa
  // stamps 401 on anything its authentication hook throws, which must not pass for a client error.
  return (expose === true || err instanceof URIError) && typeof status === 'number' && status >= 400 && status < 500;
}

function describeHttpError(err: HttpError): { status: number; code: ErrorCode; message: string } {
  if (err.status === 413) {
    const limit = typeof err.limit === 'number' ? err.limit : JSON_BODY_LIMIT_BYTES;
    return { status: 413, code: 'PAYLOAD_TOO_LARGE', message: `The request body is larger than this route's ${limit / 1024} KiB limit.` };
  }
  if (err.type === 'encoding.unsupported') {
    return { status: 415, code: 'UNSUPPORTED_MEDIA_TYPE', message: 'Unsupported Content-Encoding: send the body as identity, gzip, deflate or br.' };
  }
  if (err.status === 415) {
    return { status: 415, code: 'UNSUPPORTED_MEDIA_TYPE', message: 'Unsupported charset: send the body as UTF-8.' };
  }
  if (err.type === 'entity.parse.failed') return { status: 400, code: 'INVALID_REQUEST', message: 'The request body is not valid JSON.' };
  if (err instanceof URIError) return { status: 400, code: 'INVALID_REQUEST', message: 'The request path contains a malformed percent-escape.' };
  return { status: 400, code: 'INVALID_REQUEST', message: 'The request body could not be read (is its Content-Encoding right?).' };
}

/** The bounds a request body's schema declares for a field. */
export interface FieldRange {
  min?: number;
  max?: number;
}

/**
 * Turns tsoa's field map into one readable sentence naming each offending field; a money field
 * (a name ending in `Minor`) also gets what its number means, its range, and the cents of the
 * dollars the caller probably sent (3.5, "3.50" and 20 are the usual mistakes).
 */
export function describeValidation(fields: FieldErrors, body: BodyFacts = { rangeOf: () => ({}), sent: () => undefined }): string {
  const money = new Set<string>();
  collectMoneyFields(fields, money);
  const hints = [...money].map((field) => ` ${moneyFieldHint(field, body.rangeOf(field), body.sent(field))}`);
  return `Invalid request: ${describeFields(fields).join('; ')}.${hints.join('')}`;
}

/** What the route declares about its body's fields, and what the caller sent in them. */
export interface BodyFacts {
  rangeOf: (field: string) => FieldRange;
  sent: (field: string) => unknown;
}

type FieldErrors = Record<string, { message: string; value?: unknown }>;

/** The money fields the description names: those in error, in a union the closest shapes' ones. */
function collectMoneyFields(fields: FieldErrors, into: Set<string>): void {
  for (const [path, { message }] of Object.entries(fields)) {
    const field = path.split('.').pop() ?? '';
    if (isMoneyField(field)) into.add(field);
    const union = UNION.exec(message);
    if (union) for (const shape of closestShapes(parseShapes(union[1]))) collectMoneyFields(shape, into);
  }
}

function parseShapes(issuesJson: string): FieldErrors[] {
  try {
    return JSON.parse(issuesJson) as FieldErrors[];
  } catch {
    return [];
  }
}

/** The union alternatives the body came closest to: those with the fewest problems. */
function closestShapes(shapes: FieldErrors[]): FieldErrors[] {
  const counts = shapes.map((s) => Object.keys(s).length);
  const fewest = Math.min(...counts);
  return shapes.filter((_, i) => counts[i] === fewest);
}

type Schema = { $ref?: string; oneOf?: Schema[]; anyOf?: Schema[]; properties?: Record<string, { minimum?: number; maximum?: number }> };

/** `METHOD /express/:path` -> the declared bounds of its body's fields, from the generated document. */
const BODY_RANGES: ReadonlyMap<string, ReadonlyMap<string, FieldRange>> = (() => {
  const doc = spec as unknown as { paths: Record<string, Record<string, { requestBody?: { content?: Record<string, { schema?: Schema }> } }>>; components: { schemas: Record<string, Schema> } };
  const resolve = (s: Schema | undefined): Schema[] => {
    if (!s) return [];
    if (s.$ref) return resolve(doc.components.schemas[s.$ref.split('/').pop() ?? '']);
    if (s.oneOf || s.anyOf) return [...(s.oneOf ?? []), ...(s.anyOf ?? [])].flatMap(resolve);
    return [s];
  };
  const out = new Map<string, Map<string, FieldRange>>();
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const ranges = new Map<string, FieldRange>();
      for (const schema of resolve(op.requestBody?.content?.['application/json']?.schema)) {
        for (const [name, p] of Object.entries(schema.properties ?? {})) if (!ranges.has(name)) ranges.set(name, { min: p.minimum, max: p.maximum });
      }
      out.set(`${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`, ranges);
    }
  }
  return out;
})();

function bodyFacts(req: Request): BodyFacts {
  const route = (req.route as { path?: string } | undefined)?.path;
  const ranges = route === undefined ? undefined : BODY_RANGES.get(`${req.method} ${route}`);
  const body: unknown = req.body;
  return {
    rangeOf: (field) => ranges?.get(field) ?? {},
    sent: (field) => (body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>)[field] : undefined),
  };
}

/** A header's problem in words; the one pattern a header declares is signup's UUID. */
function headerProblem(name: string, message: string): string {
  if (/^idempotency-key$/i.test(name) && /^Not match in/.test(message)) return `${name} must be a UUID here. ${IDEMPOTENCY_KEY_HINT}`;
  return /^idempotency-key$/i.test(name) ? IDEMPOTENCY_KEY_HINT : '';
}

const UNION = /^Could not match the union against any of the items\. Issues: (\[.*\])$/s;
const ENUM = /^should be one of the following; \[(.*)\]$/;

function describeFields(fields: FieldErrors): string[] {
  return Object.entries(fields).map(([path, { message }]) => {
    const name = path.replace(/^(requestBody|body)\.?/, '').replace(/^\$\.?/, '');
    const union = UNION.exec(message);
    if (union) return describeUnion(name, union[1]);
    const excess = /^"([^"]+)" is an excess property/.exec(message);
    if (excess) return unknownProperties(name, excess[1].split(','));
    const clean = humanize(message);
    return name ? `${name}: ${clean}` : clean === 'must be a valid object' || clean === 'invalid object' ? 'body: must be a JSON object' : `body: ${clean}`;
  });
}

/** Names at most a few unknown properties (a nested object may hold thousands), counting the rest. */
function unknownProperties(parent: string, names: string[]): string {
  const shown = names.slice(0, UNKNOWN_NAMED).map((n) => (parent ? `${parent}.${n}` : n));
  const more = names.length > shown.length ? ` (and ${names.length - shown.length} more)` : '';
  return `${shown.join(', ')}: unknown ${names.length === 1 ? 'property' : 'properties'}${more}`;
}

/**
 * tsoa reports a union mismatch as one error per alternative. A union of literals (`1 | 2 | 4 | 8`)
 * becomes "must be one of"; a union of object shapes names the closest shapes' problems.
 */
function describeUnion(name: string, issuesJson: string): string {
  const shapes = parseShapes(issuesJson);
  const subject = name || 'body';
  if (shapes.length === 0) return `${subject}: does not match any accepted form`;
  const literals = shapes.map((s) => {
    const errs = Object.values(s);
    return errs.length === 1 ? ENUM.exec(errs[0].message)?.[1] : undefined;
  });
  if (literals.every((l) => l !== undefined)) return `${subject}: must be one of ${literals.join(', ').replace(/'/g, '')}`;
  const closest = closestShapes(shapes).map((s) => describeFields(s).join(', '));
  if (closest.every((c) => c === 'body: must be a JSON object')) return 'body: must be a JSON object';
  return `${subject} must match exactly one accepted shape (closest: ${closest.join(' | or: ')})`;
}

const RULES: [RegExp, string][] = [
  [/^min (\S+)$/, 'must be at least $1'],
  [/^max (\S+)$/, 'must be at most $1'],
  [/^minLength (\S+)$/, 'must have at least $1 characters'],
  [/^maxLength (\S+)$/, 'must have at most $1 characters'],
  [/^minItems (\S+)$/, 'must have at least $1 items'],
  [/^invalid integer number$/i, 'must be a whole number'],
  [/^invalid float number$/i, 'must be a number'],
  [/^'(\w+)' is required$/, 'is required'],
  [/^Not match in '(.*)'$/, 'must match $1'],
  [/^invalid (\w+)$/i, 'must be a valid $1'],
];

function humanize(message: string): string {
  for (const [re, out] of RULES) if (re.test(message)) return message.replace(re, out).replace(/'/g, '');
  return message.replace(/'/g, '');
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
      ({ status, code, message } = describeHttpError(err));
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
