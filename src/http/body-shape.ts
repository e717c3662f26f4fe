import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import {
  limitText,
  MAX_ENV_TOTAL_BYTES,
  MAX_ENV_VALUE_BYTES,
  MAX_ENV_VARIABLES,
  MAX_STARTUP_SCRIPT_BYTES,
} from '../vocabulary/limits.js';
import { moneyFieldHint } from '../vocabulary/money.js';
import { AppError } from '../errors/app-error.js';
import { ROUTE_BODIES, type BodyShape, type ObjectShape, type RouteBody } from './body-schemas.js';

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

const ORDINALS = ['first', 'second', 'third', 'fourth'];

/** A form of a one-of body as its required fields write it: `{gpuModel, gpuCount, maxHourlyPriceMinor, …}`. */
export const shapeText = (s: BodyShape) => `{${[...s.required, '…'].join(', ')}}`;

/** How a refusal names the forms of a one-of body: `send either {offerId, …} or {gpuModel, …}`. */
export function sendEither(shapes: readonly BodyShape[]): string {
  return `send either ${shapes.map(shapeText).join(' or ')}`;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The names of `value` outside `known`, as a refusal says them: the first few (shortened), and how many in all. */
function unknownNames(value: Record<string, unknown>, known: ReadonlySet<string>): { named: string[]; text: string } {
  const named: string[] = [];
  let count = 0;
  for (const name in value) {
    if (known.has(name)) continue;
    count++;
    if (named.length < UNKNOWN_NAMED) named.push(name.length > 40 ? `${name.slice(0, 40)}…` : name);
  }
  const more = count > named.length ? ` and ${count - named.length} more` : '';
  const text = `unknown ${count === 1 ? 'property' : 'properties'} ${named.map((n) => JSON.stringify(n)).join(', ')}${more}`;
  return { named, text: count === 0 ? '' : text };
}

/** A route whose every body form is a closed object, with the names any of them admits. */
type ClosedRoute = RouteBody & { names: Set<string> };

/** A top-level name no form admits; `amount` for `amountMinor` also hears that money fields are in cents. */
function unknownAtTop(route: ClosedRoute, body: Record<string, unknown>): string | null {
  const { names } = route;
  const { named, text } = unknownNames(body, names);
  if (!text) return null;
  const money = named
    .filter((n) => names.has(`${n}Minor`))
    .map((n) => ` ${n} is ${n}Minor here: ${moneyFieldHint(`${n}Minor`, route.ranges.get(`${n}Minor`), body[n])}`);
  return `${text}; this route accepts ${[...names].join(', ')}.${money.join('')}`;
}

/** A one-of body holding fields that only different forms have (an offer id and a GPU model). */
function mixedForms(route: RouteBody, body: Record<string, unknown>): string | null {
  const chosen = route.shapes.map((s) => s.own.filter((p) => Object.hasOwn(body, p)));
  if (chosen.filter((fields) => fields.length > 0).length < 2) return null;
  const owners = chosen.flatMap((fields, i) =>
    fields.length
      ? [`${fields.join(', ')} ${fields.length === 1 ? 'belongs' : 'belong'} to the ${ORDINALS[i] ?? `#${i + 1}`}`]
      : [],
  );
  return `${sendEither(route.shapes)}, not fields of both: ${owners.join('; ')}.`;
}

/** A name inside one of the body's objects (`machine`) that the forms admitting `value` do not declare. */
function unknownInside(forms: readonly ObjectShape[], value: Record<string, unknown>, path: string): string | null {
  const fields = new Set(forms.flatMap((f) => [...f.nested.keys()]));
  for (const field of fields) {
    const inner = value[field];
    const shapes = forms.flatMap((f) => f.nested.get(field) ?? []);
    if (!isObject(inner) || shapes.some((s) => !s.closed)) continue;
    const known = new Set(shapes.flatMap((s) => [...s.properties]));
    const where = path ? `${path}.${field}` : field;
    const { text } = unknownNames(inner, known);
    if (text) return `${where}: ${text}; ${where} accepts ${[...known].join(', ')}.`;
    const deeper = unknownInside(shapes, inner, where);
    if (deeper) return deeper;
  }
  return null;
}

/**
 * THE check of a JSON body's property names, run before authentication and the validator: a name
 * no form of the route's body admits, at the top or inside one of its objects (`machine`), and a
 * one-of body mixing the fields of two forms, are refused (422) naming the first few. The
 * validator checks values only (tsoa.json: silently-remove-extras), so a body of thousands of
 * unknown names costs one pass over its keys and a short answer, not a full validation and an
 * error listing every one of them. The forms of a one-of body each require a field of their own,
 * so the validator, trying them in turn, can only match the form this check let through.
 */
export function rejectUnknownProperties(): RequestHandler {
  const routes: ClosedRoute[] = ROUTE_BODIES.flatMap((r) => (r.names ? [{ ...r, names: r.names }] : []));
  for (const r of routes) {
    const unchosen = r.shapes.length > 1 && r.shapes.find((s) => !s.required.some((f) => s.own.includes(f)));
    if (unchosen)
      throw new Error(`${r.method} ${r.expressPath}: a form of its one-of body requires no field of its own`);
  }
  return (req: Request, _res: Response, next: NextFunction) => {
    const body: unknown = req.body;
    if (!isObject(body)) return next();
    const route = routes.find((r) => r.method === req.method && r.pattern.test(req.path));
    if (!route) return next();
    const refusal =
      unknownAtTop(route, body) ??
      mixedForms(route, body) ??
      unknownInside(
        route.shapes.filter((s) => Object.keys(body).every((n) => s.properties.has(n))),
        body,
        '',
      );
    next(refusal === null ? undefined : new AppError('VALIDATION_FAILED', `Invalid request: ${refusal}`));
  };
}
