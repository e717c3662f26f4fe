import { readFileSync } from 'node:fs';

/**
 * How a cloud fake answers: `documented` follows the vendor's published API document (the default,
 * which every plugin test was written against); `recorded` answers as the live API has been seen to
 * answer in the bodies kept under `test/fixtures/providers/<id>/` (see `DIFFERENCES.md` there).
 */
export type FakeBehaviour = 'documented' | 'recorded';

/**
 * One switch per recorded deviation. `true` turns it on with every recorded form (taken in turn
 * where there are several); a variant name pins one form; `false` leaves the documented answer.
 */
export type QuirkSetting<V extends string | number = never> = boolean | V;

/** The recorded deviations of one fake, each as a {@link QuirkSetting}. */
export type QuirkSettings = Record<string, QuirkSetting<string | number>>;

const FIXTURES = new URL('../fixtures/providers/', import.meta.url);

/**
 * A fixture file's text exactly as kept, so a fake serving it cannot drift from it. Read once per
 * fake start, not per request: the files are small and never change during a run.
 */
export function fixtureText(provider: 'vast' | 'runpod' | 'lambda', file: string): string {
  return readFileSync(new URL(`${provider}/${file}`, FIXTURES), 'utf8');
}

/** A JSON fixture, parsed. */
export function fixtureJson<T>(provider: 'vast' | 'runpod' | 'lambda', file: string): T {
  return JSON.parse(fixtureText(provider, file)) as T;
}

/**
 * The settings a fake runs with: all on in `recorded`, all off in `documented`, then the caller's
 * own choices on top (so a documented fake can carry a single quirk, or a recorded one drop one).
 */
export function resolveQuirks<Q extends QuirkSettings>(
  names: readonly (keyof Q)[],
  behaviour: FakeBehaviour | undefined,
  overrides: Partial<Q> | undefined,
): Q {
  const on = behaviour === 'recorded';
  const out = Object.fromEntries(names.map((n) => [n, on])) as Q;
  for (const [k, v] of Object.entries(overrides ?? {})) {
    if (!names.includes(k)) throw new Error(`unknown quirk ${k}; known: ${names.join(', ')}`);
    if (v !== undefined) (out as QuirkSettings)[k] = v;
  }
  return out;
}

/**
 * The form a quirk answers with now: the pinned variant, or with `true` the recorded forms in
 * turn (first, second, ..., first again), so a client meets every form and a test knows the order.
 */
export class VariantCycle<V extends string | number> {
  private turn = 0;
  constructor(private readonly variants: readonly V[]) {}

  next(setting: QuirkSetting<V>): V {
    if (setting !== true && setting !== false) return setting;
    return this.variants[this.turn++ % this.variants.length];
  }
}

/**
 * User-Agents that HTTP runtimes and generic libraries send when the caller sets none (Node's
 * fetch sends `node`, older undici `undici`, `node:http` none at all). Edges that block "bots by
 * signature" refuse exactly these while letting a product's own `name/version` through.
 */
const RUNTIME_AGENTS =
  /^(node|undici|node-fetch|axios|got|python-requests|python-urllib|python-httpx|aiohttp|curl|wget|go-http-client|java|okhttp|libwww-perl)\b/i;

/** True when a request carries no User-Agent of its own product (absent, empty or a runtime's default). */
export function isRuntimeUserAgent(userAgent: string | string[] | undefined): boolean {
  const ua = (Array.isArray(userAgent) ? userAgent[0] : userAgent)?.trim() ?? '';
  return ua === '' || RUNTIME_AGENTS.test(ua);
}
