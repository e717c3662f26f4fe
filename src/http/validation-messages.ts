import type { Request } from 'express';
import { parseDuration } from '../vocabulary/durations.js';
import { isMoneyField, moneyFieldHint } from '../vocabulary/money.js';
import { routeBodyOf, type Allowed, type BodyShape, type FieldRange } from './body-schemas.js';
import { sendEither, shapeText } from './body-shape.js';

/** What the route declares about its body's fields, and what the caller sent in them. */
export interface BodyFacts {
  rangeOf: (field: string) => FieldRange;
  sent: (field: string) => unknown;
  /** The accepted forms of a body that is a union (e.g. a rental by offer or by GPU model); empty otherwise. */
  shapes?: BodyShape[];
  /** The values a field may take when it is one of, or a list of, fixed values. */
  allowed?: (field: string) => Allowed | undefined;
}

type FieldErrors = Record<string, { message: string; value?: unknown }>;

/** What the request's route declares of its body, and what the body holds. */
export function bodyFacts(req: Request): BodyFacts {
  const route = (req.route as { path?: string } | undefined)?.path;
  const declared = route === undefined ? undefined : routeBodyOf(req.method, route);
  const body: unknown = req.body;
  return {
    rangeOf: (field) => declared?.ranges.get(field) ?? {},
    sent: (field) =>
      body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>)[field] : undefined,
    shapes: declared && declared.shapes.length > 1 ? declared.shapes : [],
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
  collectMoneyFields(fields, money, body);
  const hints = [...money].map((field) => ` ${moneyFieldHint(field, body.rangeOf(field), body.sent(field))}`);
  return `Invalid request: ${describeFields(fields, body).join('; ')}.${hints.join('')}`;
}

/** The money fields the description names: those in error; in a union, the chosen shape's, else the closest shapes'. */
function collectMoneyFields(fields: FieldErrors, into: Set<string>, body: BodyFacts): void {
  for (const [path, { message }] of Object.entries(fields)) {
    const field = path.split('.').pop() ?? '';
    if (isMoneyField(field)) into.add(field);
    const union = UNION.exec(message);
    if (!union) continue;
    const issues = parseShapes(union[1]);
    const picked = fieldPath(path) === '' ? pickedForm(body, issues) : -1;
    for (const shape of picked >= 0 ? [issues[picked]] : closestShapes(issues)) collectMoneyFields(shape, into, body);
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

/**
 * A field's path as a client writes it: `machine.ports[0]`. tsoa prefixes `body.`, writes list
 * items as `$0`, and inside a union names a nested field without its parent (`ports.$0`), which
 * the shape's object-valued fields place again.
 */
function fieldPath(raw: string, shape?: BodyShape): string {
  let path = raw
    .replace(/^(requestBody|body)\.?/, '')
    .replace(/^\$\.?/, '')
    .replace(/\.\$(\d+)/g, '[$1]');
  const first = /^[^.[]+/.exec(path)?.[0];
  if (shape && first && !shape.properties.has(first)) {
    const parent = [...shape.nested].find(([, inner]) => inner.properties.has(first))?.[0];
    if (parent) path = `${parent}.${path}`;
  }
  return path;
}

function describeFields(fields: FieldErrors, body: BodyFacts, shape?: BodyShape): string[] {
  return Object.entries(fields).map(([raw, { message, value }]) => {
    const name = fieldPath(raw, shape);
    const union = UNION.exec(message);
    if (union) return describeUnion(name, union[1], body);
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

/**
 * tsoa reports a union mismatch as one error per alternative. A union of literals (`1 | 2 | 4 | 8`)
 * becomes "must be one of". A union of body shapes names each shape by its required fields, and a
 * body that chose a shape is told what that shape still lacks (body-shape.ts has refused one that
 * mixes the fields of two, and every name no shape has).
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

/**
 * The form of a one-of body its refusal speaks of: the one it chose by a field only that form has
 * (body-shape.ts lets no body choose two), or -1 when it chose none (or the union is not the body's).
 */
function pickedForm(body: BodyFacts, issues: FieldErrors[]): number {
  const shapes = body.shapes;
  if (!shapes || shapes.length !== issues.length) return -1;
  return shapes.findIndex((s) => s.own.some((p) => body.sent(p) !== undefined));
}

function describeShapes(shapes: BodyShape[], issues: FieldErrors[], body: BodyFacts): string {
  const picked = pickedForm(body, issues);
  const index = picked >= 0 ? picked : issues.indexOf(closestShapes(issues)[0]);
  const problems = describeFields(issues[index], body, shapes[index]).join(', ');
  // A body that chose its shape hears only what is wrong in it; one that chose none, both shapes too.
  return picked >= 0 ? problems : `${sendEither(shapes)}; closest is ${shapeText(shapes[index])}: ${problems}`;
}

const RULES: [RegExp, string][] = [
  [/^min (\S+)$/, 'must be at least $1'],
  [/^max (\S+)$/, 'must be at most $1'],
  [/^minLength (\S+)$/, 'must have at least $1 characters'],
  [/^maxLength (\S+)$/, 'must have at most $1 characters'],
  [/^minItems (\S+)$/, 'must have at least $1 items'],
  [/^maxItems (\S+)$/, 'must have at most $1 items'],
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
