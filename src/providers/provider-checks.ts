import { performance } from 'node:perf_hooks';
import { formatUsd } from '../vocabulary/money.js';
import { optionVariable } from './kit/options.js';
import type { ProviderCheck, ProviderCheckErrorClass } from './provider-check.js';
import type { RegisteredProvider } from './provider-registry.js';

/** How long one provider's check may take: two calls of a slow cloud, each bounded by the client's 30 s, rarely both slow. */
export const PROVIDER_CHECK_TIMEOUT_MS = 45_000;

/** One configured provider's check, and what it means for the operator. */
export interface ProviderCheckEntry {
  /** The provider's id (`vast`). */
  id: string;
  description: string;
  /** False for a plugin without a check: nothing is known of it, and that is no problem. */
  supported: boolean;
  /** True when nothing stops a rental on it: {@link problems} is empty. */
  usable: boolean;
  /** Wall time of the whole check, in milliseconds. */
  ms: number;
  /** What the plugin's check found; null when it has none, timed out or failed. */
  check: ProviderCheck | null;
  /** One line each, `<id>: what is wrong: what to change`. */
  problems: string[];
  /** One line each: what leaves part of the market out, without stopping rentals. */
  warnings: string[];
}

/** The check of every configured provider (`owner providers check`, `GET /api/v1/providers/check`). */
export interface ProviderCheckReport {
  /** When the checks started (ISO 8601). */
  checkedAt: string;
  /** True only when every configured provider is usable. */
  usable: boolean;
  /** In configuration order. */
  providers: ProviderCheckEntry[];
  /** Every provider's problems, in order. */
  problems: string[];
  /** Every provider's warnings, in order. */
  warnings: string[];
}

/** What to do about a failed call whose plugin said nothing more, by its class. */
function fixFor(id: string, errorClass: ProviderCheckErrorClass | undefined): string {
  const url = optionVariable(id, 'API_URL');
  switch (errorClass) {
    case 'auth':
      return `set ${optionVariable(id, 'API_KEY')} to a key the cloud accepts`;
    case 'rate_limited':
      return "the cloud is rate-limiting this key (the service's own calls share the limit): run the check again in a minute";
    case 'unavailable':
      return `no answer from the API: check ${url} and the network path to it, or the cloud's status page`;
    case 'timeout':
      return `the API did not answer in time: run the check again, and check the network path to ${url}`;
    case 'bad_response':
      return 'an answer the plugin cannot read: see owner providers drift, and report it';
    case 'user_agent':
      return 'the edge in front of the API refused the request by its signature: report it';
    default:
      return 'report it with this line';
  }
}

/**
 * The drops by reason, most first, reasons of one hint together: "traffic_price_above_limit 700
 * (raise ...); no_dph_total 2, no_gpu_name 1 (asks Vast answered without ...)".
 */
function dropsText(c: ProviderCheck): string {
  const groups = new Map<string, { codes: string[]; total: number }>();
  for (const [code, n] of Object.entries(c.offers.dropped).sort((a, b) => b[1] - a[1])) {
    const hint = c.offers.hints[code] ?? '';
    const g = groups.get(hint) ?? { codes: [], total: 0 };
    g.codes.push(`${code} ${n}`);
    g.total += n;
    groups.set(hint, g);
  }
  return [...groups.entries()]
    .sort((a, b) => b[1].total - a[1].total)
    .map(([hint, g]) => `${g.codes.join(', ')}${hint ? ` (${hint})` : ''}`)
    .join('; ');
}

/**
 * What a check means, as lines for the operator: problems (what stops a rental: the edge, the key,
 * a failed call, SSH keys, an empty balance, no offer at all), each saying what to change, and
 * warnings (asks left out while others are offered).
 */
export function judgeCheck(id: string, c: ProviderCheck): { problems: string[]; warnings: string[] } {
  const problems: string[] = [];
  const say = (what: string, fix?: string) => problems.push(`${id}: ${what}${fix ? `: ${fix}` : ''}`);
  const edge = c.calls.find((x) => x.errorClass === 'user_agent');
  if (edge)
    say(
      `the edge refused our User-Agent "${c.userAgent.sent}" (${edge.name}: HTTP ${edge.status ?? '?'})`,
      c.userAgent.fix ?? fixFor(id, 'user_agent'),
    );
  else if (!c.credentials.accepted)
    say(
      c.credentials.errorClass === 'auth'
        ? c.credentials.detail
        : `the key could not be checked (${c.credentials.errorClass}): ${c.credentials.detail}`,
      c.credentials.fix ?? fixFor(id, c.credentials.errorClass),
    );
  for (const call of c.calls) {
    if (call.ok || call.errorClass === 'user_agent') continue;
    // The call that told of the credentials is said once, above.
    if (!c.credentials.accepted && call.detail === c.credentials.detail) continue;
    say(`${call.name} failed (${call.errorClass}): ${call.detail}`, call.fix ?? fixFor(id, call.errorClass));
  }
  if (c.sshKeys && !c.sshKeys.possible && c.credentials.accepted) say(`SSH keys: ${c.sshKeys.detail}`, c.sshKeys.fix);
  const b = c.balance;
  if (b && b.amountMinor !== null && b.amountMinor <= 0)
    say(`the account's balance is ${formatUsd(b.amountMinor)}`, b.fix ?? 'top the account up at the cloud');
  const o = c.offers;
  const dropped = Object.values(o.dropped).reduce((a, n) => a + n, 0);
  if (problems.length === 0 && o.parsed === 0)
    say(
      o.considered === 0
        ? `the cloud answered with no asks at all${o.detail ? ` (${o.detail})` : ''}`
        : `none of its ${o.considered} asks could be offered: ${dropsText(c)}`,
    );
  const warnings: string[] = [];
  if (o.parsed > 0 && dropped > 0) warnings.push(`${id}: ${dropped} of ${o.considered} asks dropped: ${dropsText(c)}`);
  if (o.parsed > 0 && o.detail) warnings.push(`${id}: ${o.detail}`);
  return { problems, warnings };
}

/** One provider's check within `timeoutMs`; a check that throws or outlives it is a problem, never a failed report. */
async function checkOne(entry: RegisteredProvider, timeoutMs: number): Promise<ProviderCheckEntry> {
  const { id, description, provider } = entry;
  const base = { id, description, supported: true };
  const start = performance.now();
  const ms = () => Math.round(performance.now() - start);
  if (typeof provider.check !== 'function')
    return { ...base, supported: false, usable: true, ms: 0, check: null, problems: [], warnings: [] };
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), timeoutMs);
    timer.unref?.();
  });
  try {
    const check = await Promise.race([provider.check(), late]);
    if (check === 'late') {
      const bound = timeoutMs >= 1000 ? `${Math.round(timeoutMs / 1000)} s` : `${timeoutMs} ms`;
      const problem = `${id}: the check did not finish within ${bound}: ${fixFor(id, 'timeout')}`;
      return { ...base, usable: false, ms: ms(), check: null, problems: [problem], warnings: [] };
    }
    const { problems, warnings } = judgeCheck(id, check);
    return { ...base, usable: problems.length === 0, ms: ms(), check, problems, warnings };
  } catch (err) {
    const problem = `${id}: the check failed: ${(err as Error).message}: ${fixFor(id, 'internal')}`;
    return { ...base, usable: false, ms: ms(), check: null, problems: [problem], warnings: [] };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs the check of every configured provider at once, each within `timeoutMs`, and says whether
 * each is usable and what to change. Read-only: the plugins' checks create nothing.
 */
export async function checkProviders(
  providers: readonly RegisteredProvider[],
  opts: { now: () => Date; timeoutMs?: number },
): Promise<ProviderCheckReport> {
  const checkedAt = opts.now().toISOString();
  const entries = await Promise.all(providers.map((p) => checkOne(p, opts.timeoutMs ?? PROVIDER_CHECK_TIMEOUT_MS)));
  return {
    checkedAt,
    usable: entries.every((e) => e.usable),
    providers: entries,
    problems: entries.flatMap((e) => e.problems),
    warnings: entries.flatMap((e) => e.warnings),
  };
}
