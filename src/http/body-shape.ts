import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import spec from '../generated/swagger.json' with { type: 'json' };
import { AppError } from '../errors/app-error.js';

/** Largest JSON body of an API route: every request of ours fits in well under 1 KiB. */
export const JSON_BODY_LIMIT_BYTES = 8 * 1024;

/**
 * Routes whose real bodies are larger. A payment provider's event carries the whole session
 * object (customer details, metadata), which stays far below this.
 */
const LARGER_BODIES: { path: string; bytes: number }[] = [{ path: '/api/v1/webhooks/stripe', bytes: 256 * 1024 }];

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
      const pattern = new RegExp(`^${path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}/?$`, 'i');
      routes.push({ method: method.toUpperCase(), pattern, names });
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
      // Any JSON value parses; a top-level null or number is then a schema violation (422), not "invalid JSON".
      strict: false,
      verify: (req, _res, buf) => verify(req as Request, buf),
    });
  const standard = parser(JSON_BODY_LIMIT_BYTES);
  const larger = new Map(LARGER_BODIES.map((r) => [r.path, parser(r.bytes)]));
  return (req, res, next) => (larger.get(req.path.toLowerCase().replace(/\/+$/, '')) ?? standard)(req, res, next);
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
    next(
      new AppError(
        'VALIDATION_FAILED',
        `Invalid request: unknown ${count === 1 ? 'property' : 'properties'} ${unknown.map((n) => JSON.stringify(n)).join(', ')}${more}; ` +
          `this route accepts ${[...route.names].join(', ')}.`,
      ),
    );
  };
}
