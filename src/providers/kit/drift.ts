import { createHash } from 'node:crypto';

/**
 * What a plugin could not fully read in its cloud's answer:
 * - `unknown_state`: an instance state its state table has no row for;
 * - `unknown_field_shape`: a field (or a whole answer) of another shape than the one it reads;
 * - `unmatched_error`: a failed answer that only a catch-all row of its error table took;
 * - `unknown_page_shape`: a listing page whose items or cursor it cannot read.
 */
export const DRIFT_KINDS = ['unknown_state', 'unknown_field_shape', 'unmatched_error', 'unknown_page_shape'] as const;
export type DriftKind = (typeof DRIFT_KINDS)[number];

/**
 * The shape of a JSON value, never the value: `'null'`, `'boolean'`, `'number'`, `'string'` (or
 * several joined with `|` where array elements differ), an object of shapes keyed by its keys
 * (a key that looks like a value, an id or an address, is `'<key>'`), or an array holding the
 * merged shape of its first elements (`[]` when empty). `'…'` marks where a bound cut it short,
 * `'mixed'` elements of different kinds.
 */
export type Shape = string | Shape[] | { [key: string]: Shape };

/** One answer a plugin could not fully read, as it is recorded: where, what kind, and its shape. */
export interface DriftSighting {
  /** The provider's id (`vast`). */
  provider: string;
  kind: DriftKind;
  /**
   * The call that got the answer, as a template (`GET /v2/pods/{id}`), or for a state the field
   * the state table reads (`pod status`); never a URL with ids. The kit replaces id-like parts.
   */
  where: string;
  /** From {@link shapeOf}: keys and types only, except an unknown state's name and an error's status and code. */
  shape: Shape;
}

/**
 * Where plugins report answers they could not fully read (the drift report an operator lists with
 * `owner providers drift` and attaches to a bug report). The host's recorder keeps each shape once
 * per provider, kind and call with a count and first/last seen, and writes in the background:
 * `record` returns at once and never throws, whatever happens to the store.
 */
export interface DriftRecorder {
  record(sighting: DriftSighting): void;
}

/** A recorder that keeps nothing: for a plugin built outside a host that records. */
export const IGNORE_DRIFT: DriftRecorder = Object.freeze({ record: () => undefined });

/** The most shapes kept per provider, in memory and in the store: a flood of distinct answers stops there. */
export const MAX_DRIFT_SHAPES_PER_PROVIDER = 200;

/** How much of a value {@link shapeOf} walks: nesting, keys per object, elements per array, nodes in all. */
export const SHAPE_BOUNDS = Object.freeze({ depth: 6, keys: 40, elements: 5, nodes: 400 });

const KEY = /^[A-Za-z0-9_$][A-Za-z0-9_.:/$-]{0,47}$/;
const NAME = /^[A-Za-z][A-Za-z0-9_./-]{0,39}$/;

/**
 * True for text that may be a value rather than a name: a run of five digits, a hex run of eight
 * with a digit in it (ids, hashes), dotted numbers (an address), or ten characters or more with
 * three digits (tokens, generated ids).
 */
function looksLikeValue(s: string): boolean {
  if (/\d{5}/.test(s) || /\d+\.\d+\.\d+/.test(s)) return true;
  if ((s.match(/[0-9a-f]{8,}/gi) ?? []).some((run) => /\d/.test(run))) return true;
  return s.length >= 10 && (s.match(/\d/g) ?? []).length >= 3;
}

/** Whether an object key is kept as it is in a shape (else it becomes `'<key>'`). */
export function isSafeKey(key: string): boolean {
  return KEY.test(key) && !looksLikeValue(key);
}

/**
 * A raw state name as the drift report keeps it: the name itself when it is name-like (a letter,
 * then up to 39 letters, digits, `_`, `.`, `/` or `-`, and nothing that looks like an id or an
 * address), else a description that holds none of it.
 */
export function safeName(raw: unknown): string {
  if (raw === null) return '(null)';
  if (typeof raw !== 'string') return raw === undefined ? '(absent)' : `(${typeof raw})`;
  const s = raw.trim();
  if (s === '') return '(empty)';
  if (NAME.test(s) && !looksLikeValue(s)) return s;
  return `(not a name: ${Math.min(s.length, 99_999)} characters)`;
}

/** A cloud's error code when it is code-like (`no_such_ask`, `global/invalid-api-key`); else undefined. */
export function safeCode(raw: unknown): string | undefined {
  return typeof raw === 'string' && NAME.test(raw) && !looksLikeValue(raw) ? raw : undefined;
}

const isIdSegment = (seg: string) =>
  seg !== '' &&
  !/^\{[^}]*\}$/.test(seg) &&
  (/^\d+$/.test(seg) ||
    seg.length > 40 ||
    (/\d/.test(seg) && seg.length >= 6) ||
    (seg.length >= 12 && /^[A-Za-z0-9]+$/.test(seg)));

/**
 * `where` as the report keeps it: no query string, every part that looks like an id (all digits,
 * six characters or more with a digit, twelve or more letters and digits without a separator, over
 * forty characters) as `{id}`, other characters than names and paths use as `?`, at most 160
 * characters.
 */
export function callTemplate(where: string): string {
  const head = where.split(/[?#]/, 1)[0].trim().replace(/\s+/g, ' ');
  const parts = head.split(' ').map((word) =>
    word
      .split('/')
      .map((seg) => (isIdSegment(seg) ? '{id}' : seg))
      .join('/'),
  );
  const out = parts
    .join(' ')
    .replace(/[^A-Za-z0-9 _./{}:[\]-]/g, '?')
    .slice(0, 160);
  return out || '(unnamed)';
}

const isObject = (s: Shape): s is { [key: string]: Shape } => typeof s === 'object' && !Array.isArray(s);

/** One shape for two: primitives joined, objects key by key, arrays element-wise; other pairs are `'mixed'`. */
export function mergeShapes(a: Shape, b: Shape): Shape {
  if (shapeText(a) === shapeText(b)) return a;
  if (typeof a === 'string' && typeof b === 'string')
    return [...new Set([...a.split('|'), ...b.split('|')])].sort().join('|');
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length === 0) return b;
    if (b.length === 0) return a;
    return [mergeShapes(a[0], b[0])];
  }
  if (isObject(a) && isObject(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    return Object.fromEntries(
      keys.map((k) => [k, k in a && k in b ? mergeShapes(a[k], b[k]) : k in a ? a[k] : b[k]] as const),
    );
  }
  return 'mixed';
}

/**
 * The shape of `value` (see {@link Shape}): keys and types, recursively, within
 * {@link SHAPE_BOUNDS}; no string, number or boolean of the value appears in it, and keys that
 * look like values (ids, addresses, tokens) are replaced, so a shape can be stored and shown.
 */
export function shapeOf(value: unknown, bounds: typeof SHAPE_BOUNDS = SHAPE_BOUNDS): Shape {
  let nodes = bounds.nodes;
  const walk = (v: unknown, depth: number): Shape => {
    if (nodes-- <= 0) return '…';
    if (v === null) return 'null';
    if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return typeof v;
    if (typeof v !== 'object') return typeof v;
    if (depth >= bounds.depth) return Array.isArray(v) ? '[…]' : '{…}';
    if (Array.isArray(v)) {
      let merged: Shape | undefined;
      for (const e of v.slice(0, bounds.elements)) {
        const s = walk(e, depth + 1);
        merged = merged === undefined ? s : mergeShapes(merged, s);
      }
      return merged === undefined ? [] : [merged];
    }
    const out = new Map<string, Shape>();
    let cut = false;
    for (const k of Object.keys(v).sort()) {
      const name = isSafeKey(k) ? k : '<key>';
      const had = out.get(name);
      if (had === undefined && out.size >= bounds.keys) {
        cut = true;
        continue;
      }
      const s = walk((v as Record<string, unknown>)[k], depth + 1);
      out.set(name, had === undefined ? s : mergeShapes(had, s));
    }
    if (cut) out.set('…', 'more keys');
    return Object.fromEntries([...out.entries()].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)));
  };
  return walk(value, 0);
}

/** The shape as canonical JSON (keys sorted): what the store keeps and what two shapes compare by. */
export function shapeText(shape: Shape): string {
  const canonical = (s: Shape): unknown =>
    typeof s === 'string'
      ? s
      : Array.isArray(s)
        ? s.map(canonical)
        : Object.fromEntries(
            Object.keys(s)
              .sort()
              .map((k) => [k, canonical(s[k])]),
          );
  return JSON.stringify(canonical(shape));
}

/** SHA-256 of {@link shapeText}, hex: a shape's key in the store. */
export function shapeHash(shape: Shape): string {
  return createHash('sha256').update(shapeText(shape)).digest('hex');
}

/** The shape on one line for people: `{id:number,ports:{22/tcp:[{HostPort:string}]}}`. */
export function compactShape(shape: Shape): string {
  if (typeof shape === 'string') return shape;
  if (Array.isArray(shape)) return `[${shape.map(compactShape).join(',')}]`;
  return `{${Object.keys(shape)
    .sort()
    .map((k) => `${k}:${compactShape(shape[k])}`)
    .join(',')}}`;
}
