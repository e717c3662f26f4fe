import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import spec from '../generated/swagger.json' with { type: 'json' };
import {
  limitText,
  MAX_ENV_TOTAL_BYTES,
  MAX_ENV_VALUE_BYTES,
  MAX_ENV_VARIABLES,
  MAX_STARTUP_SCRIPT_BYTES,
} from '../../clients/sdk/src/machine-limits.js';
import { moneyFieldHint } from '../../clients/sdk/src/hints.js';
import { AppError } from '../errors/app-error.js';

/** Largest JSON body of an API route without long free text: ids, names, numbers and URLs fit in well under 1 KiB. */
export const JSON_BODY_LIMIT_BYTES = 8 * 1024;

/** The most a JSON string grows as written: a control character takes six bytes (`\u0001`). */
const JSON_ESCAPE_FACTOR = 6;

/** A route whose body may be larger than {@link JSON_BODY_LIMIT_BYTES}, and why. */
export interface BodyLimit {
  /** The route's path, lower case, without a trailing slash. */
  path: string;
  bytes: number;
  /** Its largest fields and their own limits, as a 413 names them; none for the standard limit. */
  largest?: string;
}

/**
 * Routes whose real bodies are larger. A rental's machine settings are taken at their published
 * limits however a client escapes them (the script and every variable written as escapes), with
 * the rest of the body within the standard limit; a payment provider's event carries the whole
 * session object (customer details, metadata), which stays far below its limit.
 */
const LARGER_BODIES: BodyLimit[] = [
  {
    path: '/api/v1/rentals',
    bytes:
      JSON_BODY_LIMIT_BYTES +
      JSON_ESCAPE_FACTOR * (MAX_STARTUP_SCRIPT_BYTES + MAX_ENV_TOTAL_BYTES) +
      MAX_ENV_VARIABLES * 8,
    largest:
      `machine.startupScript (at most ${limitText(MAX_STARTUP_SCRIPT_BYTES)} bytes) and machine.env ` +
      `(at most ${MAX_ENV_VARIABLES} variables of ${limitText(MAX_ENV_VALUE_BYTES)} bytes, ${limitText(MAX_ENV_TOTAL_BYTES)} bytes in all)`,
  },
  { path: '/api/v1/webhooks/stripe', bytes: 256 * 1024 },
];

const routePath = (path: string) => path.toLowerCase().replace(/\/+$/, '');

/** The body limit of the route at `path` (see {@link LARGER_BODIES}). */
export function bodyLimitOf(path: string): BodyLimit {
  const p = routePath(path);
  return LARGER_BODIES.find((r) => r.path === p) ?? { path: p, bytes: JSON_BODY_LIMIT_BYTES };
}

/** How many unknown property names a refusal names; the rest are counted. */
export const UNKNOWN_NAMED = 5;

type Schema = Record<string, unknown>;

function resolve(schema: Schema): Schema {
  const ref = schema.$ref;
  if (typeof ref !== 'string') return schema;
  const name = ref.replace('#/components/schemas/', '');
  return ((spec.components.schemas as Record<string, Schema>)[name] ?? {}) as Schema;
}

/**
 * The property names a body schema admits at its top level, or undefined when it admits any
 * (no closed object). A union admits what any of its shapes admits; which shape fits is the
 * validator's question, asked only once no name is unknown.
 */
function admitted(schema: Schema): Set<string> | undefined {
  const s = resolve(schema);
  const union = (s.anyOf ?? s.oneOf ?? s.allOf) as Schema[] | undefined;
  if (union) {
    const names = new Set<string>();
    for (const part of union) {
      const inner = admitted(part);
      if (!inner) return undefined;
      for (const n of inner) names.add(n);
    }
    return names;
  }
  if (s.additionalProperties !== false || typeof s.properties !== 'object') return undefined;
  return new Set(Object.keys(s.properties as object));
}

interface BodyRoute {
  method: string;
  pattern: RegExp;
  names: Set<string>;
  /** The declared bounds of its number fields, for what a money field's number means. */
  ranges: Map<string, { min?: number; max?: number }>;
}

/** The bounds each top-level field of a body schema declares (of any of a union's shapes). */
function ranges(
  schema: Schema,
  into = new Map<string, { min?: number; max?: number }>(),
): Map<string, { min?: number; max?: number }> {
  const s = resolve(schema);
  for (const part of (s.anyOf ?? s.oneOf ?? s.allOf ?? []) as Schema[]) ranges(part, into);
  for (const [name, p] of Object.entries(
    (s.properties ?? {}) as Record<string, { minimum?: number; maximum?: number }>,
  )) {
    if (!into.has(name)) into.set(name, { min: p.minimum, max: p.maximum });
  }
  return into;
}

/** Every route with a closed JSON body, from the OpenAPI document the routes are generated with. */
function bodyRoutes(): BodyRoute[] {
  const routes: BodyRoute[] = [];
  for (const [path, ops] of Object.entries(spec.paths as Record<string, Record<string, Schema>>)) {
    for (const [method, op] of Object.entries(ops)) {
      const body = (op.requestBody as Schema | undefined)?.content as Record<string, { schema: Schema }> | undefined;
      const schema = body?.['application/json']?.schema;
      if (!schema) continue;
      const names = admitted(schema);
      if (!names) continue;
      const pattern = new RegExp(
        `^${path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}/?$`,
        'i',
      );
      routes.push({ method: method.toUpperCase(), pattern, names, ranges: ranges(schema) });
    }
  }
  return routes;
}

/**
 * JSON bodies with a size limit that fits each route. A body over it is refused (413) while it
 * is still arriving, before it is buffered or parsed.
 */
export function jsonBodies(verify: (req: Request, buf: Buffer) => void): RequestHandler {
  const parser = (limit: number) =>
    express.json({
      limit,
      // A body sent without Content-Type, or as `curl -d` labels it, is read as the JSON it is.
      type: (req) => readsAsJson(req.headers['content-type']),
      // Any JSON value parses; a top-level null or number is then a schema violation (422), not "invalid JSON".
      strict: false,
      verify: (req, _res, buf) => verify(req as Request, buf),
    });
  const standard = parser(JSON_BODY_LIMIT_BYTES);
  const larger = new Map(LARGER_BODIES.map((r) => [r.path, parser(r.bytes)]));
  return (req, res, next) => {
    const type = req.headers['content-type'];
    if (
      type !== undefined &&
      !readsAsJson(type) &&
      Number(req.headers['content-length'] ?? 0) + (req.headers['transfer-encoding'] ? 1 : 0) > 0
    ) {
      return next(
        new AppError(
          'UNSUPPORTED_MEDIA_TYPE',
          `This API reads JSON bodies: send the body as JSON with Content-Type: application/json (got ${mediaType(type).slice(0, 60)}).`,
        ),
      );
    }
    (larger.get(routePath(req.path)) ?? standard)(req, res, next);
  };
}

/** The media type of a Content-Type header, lower case, without parameters. */
export function mediaType(header: string): string {
  return header.split(';')[0].trim().toLowerCase();
}

/**
 * Content types a JSON body is read under: JSON's own (`application/json`, `+json`), none at all,
 * and what clients label a body by default when told nothing (`curl -d` sends form encoding, some
 * libraries text/plain). The body must still parse as JSON.
 */
export function readsAsJson(header: string | undefined): boolean {
  if (header === undefined || header.trim() === '') return true;
  return /^application\/(?:[\w.-]+\+)?json$|^application\/x-www-form-urlencoded$|^text\/plain$/.test(mediaType(header));
}

/** Whether a Content-Type names JSON itself (not a type a JSON body is merely read under). */
export function isJsonType(header: string | undefined): boolean {
  return header !== undefined && /^application\/(?:[\w.-]+\+)?json$/.test(mediaType(header));
}

/**
 * Refuses a body holding property names its route does not know, naming the first few, before
 * the validator walks it: a body of thousands of unknown names then costs one pass over its keys
 * and a short answer, not a full validation and an error listing every one of them.
 */
export function rejectUnknownProperties(): RequestHandler {
  const routes = bodyRoutes();
  return (req: Request, _res: Response, next: NextFunction) => {
    const body: unknown = req.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) return next();
    const route = routes.find((r) => r.method === req.method && r.pattern.test(req.path));
    if (!route) return next();
    const unknown: string[] = [];
    let count = 0;
    for (const name in body) {
      if (route.names.has(name)) continue;
      count++;
      if (unknown.length < UNKNOWN_NAMED) unknown.push(name.length > 40 ? `${name.slice(0, 40)}…` : name);
    }
    if (count === 0) return next();
    const more = count > unknown.length ? ` and ${count - unknown.length} more` : '';
    // `amount` for `amountMinor`: the money fields are in cents, which the caller likely missed.
    const money = unknown
      .filter((n) => route.names.has(`${n}Minor`))
      .map(
        (n) =>
          ` ${n} is ${n}Minor here: ${moneyFieldHint(`${n}Minor`, route.ranges.get(`${n}Minor`), (body as Record<string, unknown>)[n])}`,
      );
    next(
      new AppError(
        'VALIDATION_FAILED',
        `Invalid request: unknown ${count === 1 ? 'property' : 'properties'} ${unknown.map((n) => JSON.stringify(n)).join(', ')}${more}; ` +
          `this route accepts ${[...route.names].join(', ')}.${money.join('')}`,
      ),
    );
  };
}
