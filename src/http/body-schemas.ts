import spec from '../generated/swagger.json' with { type: 'json' };

// What the generated OpenAPI document declares of each route's JSON body, read once at start-up.
// body-shape.ts refuses, before the validator, the names no form of a body admits and bodies that
// mix forms; validation-messages.ts explains the validator's refusals with the same facts.

/** The bounds a body schema declares for a number field. */
export interface FieldRange {
  min?: number;
  max?: number;
}

/** A field's fixed values, and whether it takes a list of them or one. */
export interface Allowed {
  values: string[];
  list: boolean;
}

/** An object a body holds: the names its schema declares, and the objects among its fields. */
export interface ObjectShape {
  properties: Set<string>;
  /** False when the schema admits names beyond `properties` (a map such as `machine.env`). */
  closed: boolean;
  /** The object-valued fields' own shapes (machine -> image, env, startupScript, ...). */
  nested: Map<string, ObjectShape>;
}

/** One accepted form of a body. */
export interface BodyShape extends ObjectShape {
  required: string[];
  /** The fields no other form of the body has (`offerId`; `gpuModel`, ...): sending one chooses this form. */
  own: string[];
}

/** What the generated document declares of one route's JSON body. */
export interface RouteBody {
  /** Upper case, as Express gives `req.method`. */
  method: string;
  /** The route as Express writes it (`/api/v1/rentals/:id`), as `req.route.path` gives it once routed. */
  expressPath: string;
  /** Matches a request's path before routing (case and a trailing slash aside). */
  pattern: RegExp;
  /** The accepted forms: one for an object body, several for a one-of body (a rental by offer or by GPU model). */
  shapes: BodyShape[];
  /** The names any form admits at the top, or undefined when a form admits any name. */
  names: Set<string> | undefined;
  /** The bounds each top-level field declares (in the first form that has it). */
  ranges: Map<string, FieldRange>;
  /** The fixed values of each top-level field that has them. */
  allowed: Map<string, Allowed>;
}

type Schema = {
  $ref?: string;
  oneOf?: Schema[];
  anyOf?: Schema[];
  enum?: unknown[];
  type?: string;
  items?: Schema;
  required?: string[];
  additionalProperties?: unknown;
  minimum?: number;
  maximum?: number;
  properties?: Record<string, Schema>;
};

const doc = spec as unknown as {
  paths: Record<string, Record<string, { requestBody?: { content?: Record<string, { schema?: Schema }> } }>>;
  components: { schemas: Record<string, Schema> };
};

function deref(s: Schema | undefined): Schema | undefined {
  return s?.$ref ? deref(doc.components.schemas[s.$ref.split('/').pop() ?? '']) : s;
}

/** A body schema's alternatives: its union's parts, or itself. */
function alternatives(s: Schema | undefined): Schema[] {
  const r = deref(s);
  if (!r) return [];
  if (r.oneOf || r.anyOf) return [...(r.oneOf ?? []), ...(r.anyOf ?? [])].flatMap(alternatives);
  return [r];
}

function objectShape(s: Schema): ObjectShape {
  const nested = new Map<string, ObjectShape>();
  for (const [name, p] of Object.entries(s.properties ?? {})) {
    const inner = deref(p);
    if (inner?.properties) nested.set(name, objectShape(inner));
  }
  return {
    properties: new Set(Object.keys(s.properties ?? {})),
    closed: s.additionalProperties === false && s.properties !== undefined,
    nested,
  };
}

function routeBody(method: string, path: string, schema: Schema | undefined): RouteBody | undefined {
  const parts = alternatives(schema);
  if (parts.length === 0) return undefined;
  const objects = parts.map(objectShape);
  const shapes = objects.map((o, i) => ({
    ...o,
    required: parts[i].required ?? [],
    own: [...o.properties].filter((p) => objects.every((other, j) => j === i || !other.properties.has(p))),
  }));
  const ranges = new Map<string, FieldRange>();
  const allowed = new Map<string, Allowed>();
  for (const part of parts) {
    for (const [name, p] of Object.entries(part.properties ?? {})) {
      if (!ranges.has(name)) ranges.set(name, { min: p.minimum, max: p.maximum });
      const list = p.type === 'array';
      const values = deref(list ? p.items : p)?.enum;
      if (values && !allowed.has(name)) allowed.set(name, { values: values.map(String), list });
    }
  }
  return {
    method: method.toUpperCase(),
    expressPath: path.replace(/\{(\w+)\}/g, ':$1'),
    pattern: new RegExp(`^${path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}/?$`, 'i'),
    shapes,
    names: shapes.every((s) => s.closed) ? new Set(shapes.flatMap((s) => [...s.properties])) : undefined,
    ranges,
    allowed,
  };
}

/** Every route with a JSON body, from the OpenAPI document the routes are generated with. */
export const ROUTE_BODIES: readonly RouteBody[] = Object.entries(doc.paths).flatMap(([path, ops]) =>
  Object.entries(ops).flatMap(([method, op]) => {
    const body = routeBody(method, path, op.requestBody?.content?.['application/json']?.schema);
    return body ? [body] : [];
  }),
);

/** The body `req.route.path` (Express's form) declares for `method`, once a request is routed. */
export function routeBodyOf(method: string, expressPath: string): RouteBody | undefined {
  return ROUTE_BODIES.find((r) => r.method === method && r.expressPath === expressPath);
}
