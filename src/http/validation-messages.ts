import type { Request } from 'express';
import { parseDuration } from '../../clients/sdk/src/duration.js';
import { isMoneyField, moneyFieldHint } from '../../clients/sdk/src/hints.js';
import spec from '../generated/swagger.json' with { type: 'json' };
import { UNKNOWN_NAMED } from './body-shape.js';

/** The bounds a request body's schema declares for a field. */
export interface FieldRange {
  min?: number;
  max?: number;
}

/** One accepted form of a body: its fields, the required ones, and the fields of its object-valued fields. */
interface Shape {
  required: string[];
  properties: Set<string>;
  /** Field name to the names its object value takes (e.g. machine -> image, env, ...). */
  nested: Map<string, Set<string>>;
}

/** What the route declares about its body's fields, and what the caller sent in them. */
export interface BodyFacts {
  rangeOf: (field: string) => FieldRange;
  sent: (field: string) => unknown;
  /** The accepted forms of a body that is a union (e.g. a rental by offer or by GPU model); empty otherwise. */
  shapes?: Shape[];
  /** The values a field may take when it is one of, or a list of, fixed values. */
  allowed?: (field: string) => Allowed | undefined;
}

type FieldErrors = Record<string, { message: string; value?: unknown }>;

/** A field's fixed values, and whether it takes a list of them or one. */
interface Allowed {
  values: string[];
  list: boolean;
}

type Schema = {
  $ref?: string;
  oneOf?: Schema[];
  anyOf?: Schema[];
  enum?: unknown[];
  type?: string;
  items?: Schema;
  required?: string[];
  properties?: Record<string, Schema & { minimum?: number; maximum?: number }>;
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

function shapeOf(s: Schema): Shape {
  const nested = new Map<string, Set<string>>();
  for (const [name, p] of Object.entries(s.properties ?? {})) {
    const inner = deref(p);
    if (inner?.properties) nested.set(name, new Set(Object.keys(inner.properties)));
  }
  return { required: s.required ?? [], properties: new Set(Object.keys(s.properties ?? {})), nested };
}

/** What the generated document declares of one route's body. */
interface RouteBody {
  ranges: Map<string, FieldRange>;
  shapes: Shape[];
  allowed: Map<string, Allowed>;
}

/** `METHOD /express/:path` -> what its body's schema declares, from the generated document. */
const ROUTE_BODIES: ReadonlyMap<string, RouteBody> = (() => {
  const out = new Map<string, RouteBody>();
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const parts = alternatives(op.requestBody?.content?.['application/json']?.schema);
      const body: RouteBody = {
        ranges: new Map(),
        shapes: parts.length > 1 ? parts.map(shapeOf) : [],
        allowed: new Map(),
      };
      for (const schema of parts) {
        for (const [name, p] of Object.entries(schema.properties ?? {})) {
          if (!body.ranges.has(name)) body.ranges.set(name, { min: p.minimum, max: p.maximum });
          const list = p.type === 'array';
          const values = deref(list ? p.items : p)?.enum;
          if (values && !body.allowed.has(name)) body.allowed.set(name, { values: values.map(String), list });
        }
      }
      out.set(`${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`, body);
    }
  }
  return out;
})();

/** What the request's route declares of its body, and what the body holds. */
export function bodyFacts(req: Request): BodyFacts {
  const route = (req.route as { path?: string } | undefined)?.path;
  const declared = route === undefined ? undefined : ROUTE_BODIES.get(`${req.method} ${route}`);
  const body: unknown = req.body;
  return {
    rangeOf: (field) => declared?.ranges.get(field) ?? {},
    sent: (field) =>
      body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>)[field] : undefined,
    shapes: declared?.shapes ?? [],
    allowed: (field) => declared?.allowed.get(field),
  };
}

const NO_FACTS: BodyFacts = { rangeOf: () => ({}), sent: () => undefined };

/**
 * Turns tsoa's field map into one readable sentence naming each offending field; a money field
 * (a name ending in `Minor`) also gets what its number means, its range, and the cents of the
 * dollars the caller probably sent (3.5, "3.50" and 20 are the usual mistakes).
 */
export function describeValidation(fields: FieldErrors, body: BodyFacts = NO_FACTS): string {
  const money = new Set<string>();
  collectMoneyFields(fields, money);
  const hints = [...money].map((field) => ` ${moneyFieldHint(field, body.rangeOf(field), body.sent(field))}`);
  return `Invalid request: ${describeFields(fields, body).join('; ')}.${hints.join('')}`;
}

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

const UNION = /^Could not match the union against any of the items\. Issues: (\[.*\])$/s;
const ENUM = /^should be one of the following; \[(.*)\]$/;
const EXCESS = /^"([^"]+)" is an excess property/;

/**
 * A field's path as a client writes it: `machine.ports[0]`. tsoa prefixes `body.`, writes list
 * items as `$0`, and inside a union names a nested field without its parent (`ports.$0`), which
 * the shape's object-valued fields place again.
 */
function fieldPath(raw: string, shape?: Shape): string {
  let path = raw
    .replace(/^(requestBody|body)\.?/, '')
    .replace(/^\$\.?/, '')
    .replace(/\.\$(\d+)/g, '[$1]');
  const first = /^[^.[]+/.exec(path)?.[0];
  if (shape && first && !shape.properties.has(first)) {
    const parent = [...shape.nested].find(([, names]) => names.has(first))?.[0];
    if (parent) path = `${parent}.${path}`;
  }
  return path;
}

function describeFields(fields: FieldErrors, body: BodyFacts, shape?: Shape): string[] {
  return Object.entries(fields).map(([raw, { message, value }]) => {
    const name = fieldPath(raw, shape);
    const union = UNION.exec(message);
    if (union) return describeUnion(name, union[1], body);
    const excess = EXCESS.exec(message);
    if (excess) {
      const names = excess[1].split(',');
      // An excess property's own name is its path's last part: the parent is what comes before.
      const parent =
        names.length === 1 && (name === names[0] || name.endsWith(`.${names[0]}`))
          ? name.slice(0, -names[0].length).replace(/\.$/, '')
          : name;
      return unknownProperties(parent, names);
    }
    const clean = humanize(message);
    if (!name)
      return clean === 'must be a valid object' || clean === 'invalid object'
        ? 'body: must be a JSON object'
        : `body: ${clean}`;
    return `${name}: ${clean}${unitHint(name, message, value, body)}`;
  });
}

/** What a field's value means when the caller got its unit or its form wrong; never repeats a value of `env`. */
function unitHint(path: string, message: string, value: unknown, body: BodyFacts): string {
  const field =
    path
      .replace(/\[\d+\]$/, '')
      .split('.')
      .pop() ?? '';
  if (/^'\w+' is required$/.test(message)) {
    const allowed = body.allowed?.(field);
    return allowed ? `: ${allowed.list ? 'one or more' : 'one'} of ${allowed.values.join(', ')}` : '';
  }
  if (/Seconds$/.test(field) && /integer|number/i.test(message)) {
    const seconds = typeof value === 'string' ? parseDuration(value) : undefined;
    return seconds === undefined
      ? ' of seconds (7200 is 2 hours)'
      : ` of seconds: send ${seconds} for ${JSON.stringify(value)}`;
  }
  if (field === 'ports' && /integer|number/i.test(message)) {
    return ': a port of the machine such as 8000, which the service exposes at a URL of its own (no host:container pair)';
  }
  if (field === 'env' && /object/i.test(message))
    return ': an object of variable names to values, e.g. {"HF_TOKEN": "…"}, not a list of NAME=value strings';
  return '';
}

/** Names at most a few unknown properties (a nested object may hold thousands), counting the rest. */
function unknownProperties(parent: string, names: string[]): string {
  const shown = names.slice(0, UNKNOWN_NAMED).map((n) => (parent ? `${parent}.${n}` : n));
  const more = names.length > shown.length ? ` (and ${names.length - shown.length} more)` : '';
  return `${shown.join(', ')}: unknown ${names.length === 1 ? 'property' : 'properties'}${more}`;
}

const ORDINALS = ['first', 'second', 'third', 'fourth'];

/** A shape as its required fields write it: `{gpuModel, gpuCount, maxHourlyPriceMinor, …}`. */
const shapeText = (s: Shape) => `{${[...s.required, '…'].join(', ')}}`;

/**
 * tsoa reports a union mismatch as one error per alternative. A union of literals (`1 | 2 | 4 | 8`)
 * becomes "must be one of". A union of body shapes names each shape by its required fields; a body
 * mixing fields of two shapes is told which field belongs to which, and one that chose a shape is
 * told what that shape still lacks.
 */
function describeUnion(name: string, issuesJson: string, body: BodyFacts): string {
  const issues = parseShapes(issuesJson);
  const subject = name || 'body';
  if (issues.length === 0) return `${subject}: does not match any accepted form`;
  const literals = issues.map((s) => {
    const errs = Object.values(s);
    return errs.length === 1 ? ENUM.exec(errs[0].message)?.[1] : undefined;
  });
  if (literals.every((l) => l !== undefined))
    return `${subject}: must be one of ${literals.join(', ').replace(/'/g, '')}`;
  const shapes = name === '' && body.shapes?.length === issues.length ? body.shapes : undefined;
  if (shapes) return describeShapes(shapes, issues, body);
  const closest = closestShapes(issues).map((s) => describeFields(s, body).join(', '));
  if (closest.every((c) => c === 'body: must be a JSON object')) return 'body: must be a JSON object';
  return `${subject} must match exactly one accepted shape (closest: ${closest.join(' | or: ')})`;
}

function describeShapes(shapes: Shape[], issues: FieldErrors[], body: BodyFacts): string {
  const either = `send either ${shapes.map(shapeText).join(' or ')}`;
  const exclusive = (i: number) =>
    [...shapes[i].properties].filter((p) => shapes.every((s, j) => j === i || !s.properties.has(p)));
  const sentOf = (i: number) => exclusive(i).filter((p) => body.sent(p) !== undefined);
  const chosen = shapes.map((_, i) => sentOf(i));
  const mixed = chosen.filter((c) => c.length > 0).length > 1;
  if (mixed) {
    const owners = chosen.flatMap((fields, i) =>
      fields.length
        ? [`${fields.join(', ')} ${fields.length === 1 ? 'belongs' : 'belong'} to the ${ORDINALS[i] ?? `#${i + 1}`}`]
        : [],
    );
    return `${either}, not fields of both: ${owners.join('; ')}`;
  }
  // The shape the body chose (by a field only it has), else the one with the fewest problems.
  const picked = chosen.findIndex((c) => c.length > 0);
  const index = picked >= 0 ? picked : issues.indexOf(closestShapes(issues)[0]);
  const others = new Set(shapes.flatMap((s, j) => (j === index ? [] : [...s.properties])));
  // Fields of the other shapes that this one calls excess are already said by "either ... or".
  const own = Object.fromEntries(
    Object.entries(issues[index]).filter(
      ([, e]) => !(EXCESS.exec(e.message) && others.has(EXCESS.exec(e.message)![1])),
    ),
  );
  const problems = describeFields(own, body, shapes[index]).join(', ');
  // A body that chose its shape hears only what is wrong in it; one that chose none, both shapes too.
  if (!problems) return either;
  return picked >= 0 ? problems : `${either}; closest is ${shapeText(shapes[index])}: ${problems}`;
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
