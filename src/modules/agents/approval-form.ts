import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Request, Response } from 'express';
import { DOLLARS_HINT, formatUsd, parseUsd, usdDecimal } from '../../vocabulary/money.js';
import { escapeHtml } from '../billing/payment-pages.html.js';
import {
  amountWithin,
  APPROVAL_LIMITS,
  IDLE_TERMINATE_MINUTES,
  idleTerminateMinutesProblem,
  limitsBeyond,
  MAX_RENTAL_SECONDS,
  maxRentalSecondsProblem,
  type KeyAmounts,
  type KeyLimits,
} from '../keys/key-limits.js';
import { describeRentalLength, parseRentalLength } from '../keys/rental-length.js';

/**
 * The "Approve with an owner key" form of the approval page and its CSRF defence.
 *
 * The form posts same-origin and carries a double-submit token: GET sets a random nonce in a
 * `SameSite=Strict`, HttpOnly cookie scoped to /approve and puts HMAC(server secret, approval code
 * + nonce) in a hidden field. A POST is accepted only when the cookie is there and the field is the
 * HMAC of this very code and that nonce, and when the browser's Origin (or Sec-Fetch-Site) does
 * not name another site. Another site can neither read the field nor make the browser send the
 * cookie, so it cannot approve with a key the owner pasted. The secret is derived from
 * SECRETS_KEY, so every api process checks what any other one issued.
 */
export const CSRF_COOKIE = 'gpr_approve_csrf';
const CSRF_FIELD = 'csrf';

export class ApprovalCsrf {
  private readonly secret: Buffer;
  private readonly origin: string;
  private readonly secure: boolean;

  /** @param cookiePath the pages whose forms it guards (the approval page's; the OAuth consent page's). */
  constructor(
    secretsKey: Buffer,
    publicBaseUrl: string,
    private readonly cookiePath = '/approve',
  ) {
    this.secret = createHmac('sha256', secretsKey).update('approval-page-csrf').digest();
    const base = new URL(publicBaseUrl);
    this.origin = base.origin;
    this.secure = base.protocol === 'https:';
  }

  private tokenFor(code: string, nonce: string): string {
    return createHmac('sha256', this.secret).update(`${code}.${nonce}`).digest('base64url');
  }

  /** Sets the cookie on `res` and returns the hidden field's value for the form about `code`. */
  issue(res: Response, code: string): string {
    const nonce = randomBytes(18).toString('base64url');
    res.append(
      'Set-Cookie',
      `${CSRF_COOKIE}=${nonce}; Path=${this.cookiePath}; Max-Age=1800; HttpOnly; SameSite=Strict${this.secure ? '; Secure' : ''}`,
    );
    return this.tokenFor(code, nonce);
  }

  /** Whether a POST about `code` comes from our own form in the owner's browser. */
  verify(req: Request, code: string): boolean {
    // Our pages send no referrer, so browsers say `Origin: null` even for our own form: that
    // tells nothing either way, and the cookie and token below decide.
    const origin = req.header('origin');
    if (origin !== undefined && origin !== 'null' && origin !== this.origin) return false;
    const site = req.header('sec-fetch-site');
    if (site !== undefined && site !== 'same-origin' && site !== 'none') return false;
    const nonce = cookie(req, CSRF_COOKIE);
    const sent = typeof req.body?.[CSRF_FIELD] === 'string' ? (req.body[CSRF_FIELD] as string) : '';
    if (!nonce || !/^[A-Za-z0-9_-]{24}$/.test(nonce) || !sent) return false;
    const expected = Buffer.from(this.tokenFor(code, nonce));
    const given = Buffer.from(sent);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
}

function cookie(req: Request, name: string): string | undefined {
  for (const part of (req.header('cookie') ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim();
  }
  return undefined;
}

/** A form field in dollars as cents; null when missing or not an amount. */
function usdField(raw: unknown): number | null {
  return typeof raw === 'string' ? parseUsd(raw) : null;
}

type LimitField = keyof KeyAmounts;

/** How the form names each limit to the person filling it in. */
const FORM_NAMES: Record<LimitField, string> = {
  maxPerRentalMinor: 'the per-rental limit',
  budgetLimitMinor: 'the total limit',
  maxConcurrentDeployments: 'the number of machines at once',
};

/** A limit as a person reads it: dollars for money (the API keeps cents), a plain count otherwise. */
function shown(field: LimitField, value: number): string {
  return field === 'maxConcurrentDeployments' ? String(value) : formatUsd(value);
}

/** The longest rental's bounds in words, e.g. "from 1 minute to 30 days". */
const RENTAL_LENGTH_RANGE = `from ${describeRentalLength(MAX_RENTAL_SECONDS.minimum)} to ${describeRentalLength(MAX_RENTAL_SECONDS.maximum)}`;

/**
 * The form's longest rental: a written length ("8h", "90m"), empty or "none" for no limit; the
 * error is the form's words.
 */
function rentalLengthField(raw: unknown): { value: number | null } | { error: string } {
  const text = typeof raw === 'string' ? raw.trim() : '';
  if (text === '') return { value: null };
  const value = parseRentalLength(text);
  if (value === undefined)
    return { error: 'the longest rental must be a length such as 8h, 90m or 2d, or empty for no limit' };
  if (maxRentalSecondsProblem(value)) return { error: `the longest rental must be ${RENTAL_LENGTH_RANGE}` };
  return { value };
}

/** The form's idle minutes: whole minutes, empty or "none" for never; the error is the form's words. */
function idleMinutesField(raw: unknown): { value: number | null } | { error: string } {
  const text = typeof raw === 'string' ? raw.trim().toLowerCase() : '';
  if (text === '' || text === 'none') return { value: null };
  const value = /^\d{1,6}$/.test(text) ? Number(text) : NaN;
  if (idleTerminateMinutesProblem(value))
    return {
      error: `the idle minutes must be a whole number from ${IDLE_TERMINATE_MINUTES.minimum} to ${IDLE_TERMINATE_MINUTES.maximum}, or empty to never end idle machines`,
    };
  return { value };
}

/**
 * The limits from the form, in the API's units, checked here once (the page's door): against the
 * API's own bounds (APPROVAL_LIMITS, MAX_RENTAL_SECONDS, IDLE_TERMINATE_MINUTES), told in dollars
 * and hours, as the API's own message speaks in cents and seconds to programs, not to the owner
 * at this form.
 */
export function limitsFromForm(body: Record<string, unknown> | undefined): { limits: KeyLimits } | { error: string } {
  const perRental = usdField(body?.perRentalUsd);
  const total = usdField(body?.totalUsd);
  const concurrentRaw = typeof body?.concurrent === 'string' ? body.concurrent.trim() : '';
  const concurrent = /^\d{1,6}$/.test(concurrentRaw) ? Number(concurrentRaw) : null;
  const bad: string[] = [];
  const { minimums: min, maximums: max } = APPROVAL_LIMITS;
  const range = (f: LimitField) => `from ${shown(f, min[f])} to ${shown(f, max[f])}`;
  const check = (f: LimitField, v: number | null) => {
    if (v === null)
      bad.push(
        `${FORM_NAMES[f]} must be ${f === 'maxConcurrentDeployments' ? 'a whole number' : `an amount in US dollars (${DOLLARS_HINT})`}`,
      );
    else if (!amountWithin(f, v, APPROVAL_LIMITS)) bad.push(`${FORM_NAMES[f]} must be ${range(f)}`);
  };
  check('maxPerRentalMinor', perRental);
  check('budgetLimitMinor', total);
  check('maxConcurrentDeployments', concurrent);
  const rentalLength = rentalLengthField(body?.maxRental);
  if ('error' in rentalLength) bad.push(rentalLength.error);
  const idle = idleMinutesField(body?.idleMinutes);
  if ('error' in idle) bad.push(idle.error);
  if (bad.length || 'error' in rentalLength || 'error' in idle)
    return { error: `Please check the form: ${bad.join('; ')}.` };
  return {
    limits: {
      maxPerRentalMinor: perRental!,
      budgetLimitMinor: total!,
      maxConcurrentDeployments: concurrent!,
      maxRentalSeconds: rentalLength.value,
      idleTerminateMinutes: idle.value,
    },
  };
}

/**
 * The form's words for a refusal because the limits asked exceed the approving key's own
 * (KEY_LIMIT_EXCEEDED, decided by AgentsService), in dollars and hours.
 */
export function overOwnLimitsMessage(limits: KeyLimits, own: KeyLimits): string {
  const parts = limitsBeyond(limits, own).map((f) => {
    if (f !== 'maxRentalSeconds')
      return `${FORM_NAMES[f]} is ${shown(f, limits[f])}, your key allows at most ${shown(f, own[f])}`;
    const asked = limits.maxRentalSeconds === null ? 'unlimited' : describeRentalLength(limits.maxRentalSeconds);
    return `the longest rental is ${asked}, your key allows at most ${describeRentalLength(own.maxRentalSeconds)}`;
  });
  return `An agent's limits may not exceed your owner key's own: ${parts.join('; ')}. Lower them, or approve with a key that allows more.`;
}

/** The form's HTML; `error` (plain text) is shown above it. Never echoes a pasted key. */
export function approvalFormHtml(code: string, csrfToken: string, error?: string): string {
  const min = APPROVAL_LIMITS.minimums;
  const max = APPROVAL_LIMITS.maximums;
  const field = (id: string, label: string, attrs: string, hint: string, required = true) =>
    `<p><label for="${id}">${label}</label><br><input id="${id}" name="${id}" ${attrs}${required ? ' required' : ''} style="font:inherit;padding:.4rem;width:100%;max-width:16rem"><br><span class="muted">${hint}</span></p>`;
  return `<h2 style="font-size:1.15rem;margin:1.5rem 0 .75rem">Approve with an owner key</h2>
${error ? `<p role="alert" class="banner">${escapeHtml(error)}</p>` : ''}<form method="post" action="/approve/${encodeURIComponent(code)}" autocomplete="off">
<input type="hidden" name="${CSRF_FIELD}" value="${escapeHtml(csrfToken)}">
${field('perRentalUsd', 'Per rental (USD)', `type="number" inputmode="decimal" min="${usdDecimal(min.maxPerRentalMinor)}" max="${usdDecimal(max.maxPerRentalMinor)}" step="0.01" value="20"`, `${formatUsd(min.maxPerRentalMinor)} to ${formatUsd(max.maxPerRentalMinor)}`)}
${field('totalUsd', 'In total (USD)', `type="number" inputmode="decimal" min="${usdDecimal(min.budgetLimitMinor)}" max="${usdDecimal(max.budgetLimitMinor)}" step="0.01" value="100"`, `${formatUsd(min.budgetLimitMinor)} to ${formatUsd(max.budgetLimitMinor)}`)}
${field('concurrent', 'Machines at once', `type="number" inputmode="numeric" min="${min.maxConcurrentDeployments}" max="${max.maxConcurrentDeployments}" step="1" value="1"`, `${min.maxConcurrentDeployments} to ${max.maxConcurrentDeployments}`)}
${field('maxRental', 'Longest rental (optional)', 'type="text" spellcheck="false" autocapitalize="off" placeholder="e.g. 8h, 90m, 2d"', `${RENTAL_LENGTH_RANGE}; empty: no limit`, false)}
${field('idleMinutes', 'End idle machines after (minutes, optional)', `type="number" inputmode="numeric" min="${IDLE_TERMINATE_MINUTES.minimum}" max="${IDLE_TERMINATE_MINUTES.maximum}" step="1"`, `${IDLE_TERMINATE_MINUTES.minimum} to ${IDLE_TERMINATE_MINUTES.maximum}: a rental whose GPUs stay idle this long is warned, then ended; empty: never`, false)}
${field('ownerKey', 'Your owner key', 'type="password" spellcheck="false" autocapitalize="off" placeholder="gpr_…"', 'an OWNER key with read, rent and manage; it is used for this approval only and never stored or shown to the agent')}
<p class="actions"><button type="submit">Approve</button></p>
</form>`;
}
