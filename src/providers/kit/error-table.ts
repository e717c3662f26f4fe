import { ProviderApiError } from '../provider-http.js';
import type { CreateResult, ProviderErrorClass } from '../provider.js';

/** What a failed create means for the host: every `CreateResult` kind but `created`. */
export type CreateVerdict = Exclude<CreateResult['kind'], 'created'>;

/** What a failed read, list or destroy means: an error class, or `gone` (the object no longer exists). */
export type ReadVerdict = ProviderErrorClass | 'gone';

/** A class of HTTP statuses, for rows that hold for a whole range. */
export type StatusClass = '2xx' | '3xx' | '4xx' | '5xx';

/**
 * What an error rule looks for. Every given field must hold. A rule with `codes` or `text` is a
 * rule of meaning and is tried before any rule that looks at the status alone.
 */
export interface ErrorMatch {
  /** An exact status, several, or a class of statuses; absent means any status. */
  status?: number | readonly number[] | StatusClass;
  /** The cloud's own error codes, as the plugin's code extractor reads them; `prefix/*` matches a family. */
  codes?: readonly string[];
  /** A pattern over the answer's text (message, detail, or the raw body). */
  text?: RegExp;
}

/** One row of a plugin's error table. */
export interface ErrorRule {
  match: ErrorMatch;
  /** What a create that got this answer returns. */
  create: CreateVerdict;
  /** What any other call that got this answer makes of it. */
  read: ReadVerdict;
  /** Why: what the cloud means by this answer. Quoted in create reasons and logs. */
  note: string;
  /** How loudly a create with this answer is logged; `error` means an operator must act. Default `warn`. */
  log?: 'error' | 'warn' | 'info';
  /**
   * This row takes answers the table has no meaning for ("any other 400", "an unknown 404"): the
   * kit records their shape in the drift report (`unmatched_error`). The last row, `match: {}`,
   * is one whether or not it says so.
   */
  catchAll?: boolean;
}

/** A failed answer as the matcher sees it. */
export interface ErrorAnswer {
  status: number;
  /** The cloud's error code, from the plugin's code extractor. */
  code?: string;
  /** The answer's human text (message or detail), or the raw body. */
  text?: string;
}

const isMeaning = (r: ErrorRule) => r.match.codes !== undefined || r.match.text !== undefined;

function statusHolds(want: ErrorMatch['status'], status: number): boolean {
  if (want === undefined) return true;
  if (typeof want === 'number') return want === status;
  if (typeof want === 'string') {
    const base = Number(want[0]) * 100;
    return status >= base && status < base + 100;
  }
  return want.includes(status);
}

function codeHolds(codes: readonly string[] | undefined, code: string | undefined): boolean {
  if (codes === undefined) return true;
  if (code === undefined) return false;
  return codes.some((c) => (c.endsWith('/*') ? code.startsWith(c.slice(0, -1)) : c === code));
}

function holds(rule: ErrorRule, a: ErrorAnswer): boolean {
  const m = rule.match;
  return (
    statusHolds(m.status, a.status) && codeHolds(m.codes, a.code) && (m.text === undefined || m.text.test(a.text ?? ''))
  );
}

/**
 * The rule for a failed answer, matched by meaning: rules with `codes` or `text` first, in table
 * order and whatever their place among status rows; then the rules on status alone, in order. A
 * table ends with a catch-all (`match: {}`); one that lets an answer through is a bug and throws.
 */
export function matchErrorRule(rules: readonly ErrorRule[], answer: ErrorAnswer): ErrorRule {
  const hit =
    rules.find((r) => isMeaning(r) && holds(r, answer)) ?? rules.find((r) => !isMeaning(r) && holds(r, answer));
  if (!hit)
    throw new Error(
      `error table has no rule for HTTP ${answer.status}${answer.code ? ` ${answer.code}` : ''}; it must end with a catch-all`,
    );
  return hit;
}

/** Whether `rule` is a catch-all: marked `catchAll`, or matching on nothing (`match: {}`). */
export function isCatchAll(rule: ErrorRule): boolean {
  const m = rule.match;
  return rule.catchAll === true || (m.status === undefined && m.codes === undefined && m.text === undefined);
}

/** The create outcome a rule gives; a throttle waits `retryAfterMs` (the client's back-off) or 1 s. */
export function createVerdictOf(
  rule: ErrorRule,
  reason: string,
  retryAfterMs?: number,
): Exclude<CreateResult, { kind: 'created' }> {
  if (rule.create === 'throttled') return { kind: 'throttled', reason, retryAfterMs: retryAfterMs ?? 1000 };
  return { kind: rule.create, reason };
}

/**
 * The error a read throws for a rule. A `gone` the caller did not handle (the object a list or a
 * catalog call named does not exist) is a `request` error: we asked for something that is not there.
 */
export function readErrorOf(
  rule: ErrorRule,
  message: string,
  status?: number,
  retryAfterMs?: number,
): ProviderApiError {
  return new ProviderApiError(rule.read === 'gone' ? 'request' : rule.read, message, status, retryAfterMs);
}
