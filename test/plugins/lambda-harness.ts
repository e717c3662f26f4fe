import { spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import lambdaPlugin from '../../plugins/lambda/index.js';
import type { LambdaTuning } from '../../plugins/lambda/options.js';
import type { LambdaProvider } from '../../plugins/lambda/provider.js';
import { systemClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import type { OfferRef, ProviderDeps } from '../../src/providers/provider.js';
import { FakeLambdaApi, type FakeLambdaOptions } from '../fakes/lambda-api.js';
import { testDataSource } from '../helpers/db.js';
import { IGNORE_DRIFT } from '../../src/providers/kit/drift.js';

/** The offer every test launches unless it says otherwise. */
export const H100_OFFER_KEY = 'gpu_1x_h100_sxm5@us-east-1';

/** Limits short enough for tests; the real ones are 1 s and 12 s. */
export const FAST_TUNING: LambdaTuning = {
  apiIntervalMs: 0,
  launchIntervalMs: 0,
  timeoutMs: 1000,
  backoffMs: 10,
  listTtlMs: 200,
};

export interface LambdaHarness {
  fake: FakeLambdaApi;
  provider: LambdaProvider;
  deps: ProviderDeps;
  labelPrefix: string;
  /** Everything the provider logged, for checks that no secret reaches a log. */
  logText(): string;
  label(): string;
  offer(key?: string): OfferRef;
  /** Another provider against the same fake, with its own options and limiter. */
  newProvider(opts?: { raw?: Record<string, string>; tuning?: LambdaTuning }): Promise<LambdaProvider>;
  /**
   * Moves the providers' clock (`tuning.now`: the list's time to live, the unknown-state bound,
   * the rate limits) `ms` ahead of the wall clock, so a test lets that time pass without waiting it out.
   */
  advance(ms: number): void;
  cleanup(): Promise<void>;
}

export async function makeLambdaHarness(
  opts: { fake?: FakeLambdaOptions; tuning?: LambdaTuning; raw?: Record<string, string> } = {},
): Promise<LambdaHarness> {
  const fake = await FakeLambdaApi.start({ bootMs: 100, ...opts.fake });
  const labelPrefix = `gpr-t${randomBytes(4).toString('hex')}-`;
  let logged = '';
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logged += String(chunk);
      cb();
    },
  });
  const deps: ProviderDeps = {
    logger: createLogger('debug', sink),
    clock: systemClock,
    dataSource: await testDataSource(),
    production: false,
    labelPrefix,
    drift: IGNORE_DRIFT,
  };
  const providers: LambdaProvider[] = [];
  let aheadMs = 0;
  const now = () => Date.now() + aheadMs;
  const newProvider = async (o: { raw?: Record<string, string>; tuning?: LambdaTuning } = {}) => {
    const options = lambdaPlugin.validateOptions({
      API_KEY: fake.apiKey,
      API_URL: fake.url,
      SSH_PORT: String(fake.sshPort),
      ...o.raw,
    });
    const p = (await lambdaPlugin.create(
      { ...options, tuning: { now, ...FAST_TUNING, ...o.tuning } },
      deps,
    )) as LambdaProvider;
    providers.push(p);
    return p;
  };
  const provider = await newProvider({ raw: opts.raw, tuning: opts.tuning });
  return {
    fake,
    provider,
    deps,
    labelPrefix,
    logText: () => logged,
    label: () => `${labelPrefix}${randomUUID().slice(0, 13)}`,
    offer: (key = H100_OFFER_KEY) => ({ id: randomUUID(), key, name: key.split('@')[0], gpuCount: 1 }),
    newProvider,
    advance: (ms) => void (aheadMs += ms),
    async cleanup() {
      await Promise.all(providers.map((p) => p.close()));
      await fake.close();
    },
  };
}

// ---- machine settings: reading what a launch's user_data holds ----

/**
 * Variables whose values break any naive quoting: quotes of both kinds, command substitution,
 * expansions, backslashes, newlines (trailing ones too), an empty value, spaces at both ends and
 * characters beyond ASCII.
 */
export const AWKWARD_ENV: Record<string, string> = {
  QUOTES: `it's "quoted" \`uname\` $(id -u) $HOME \\ back'slash'`,
  LINES: 'line one\nline two\n',
  TRAILING: 'value\n\n',
  EMPTY: '',
  SPACES: '  both ends  ',
  UNICODE: 'grüße 🚀 ünïcödé',
  _UNDER_SCORE_9: '--not-an-option',
};

/** What each `echo '<base64>' | base64 -d > <target>` line of a user_data script writes, by target. */
export function decodedWrites(userData: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of userData.matchAll(/^echo '([A-Za-z0-9+/=]*)' \| base64 -d > (.+)$/gm))
    out.set(m[2], Buffer.from(m[1], 'base64').toString('utf8'));
  return out;
}

/** Every base64 blob of a user_data script: what must never reach a log line. */
export function encodedBlobs(userData: string): string[] {
  return [...userData.matchAll(/^echo '([A-Za-z0-9+/=]+)'/gm)].map((m) => m[1]);
}

/** A NUL-separated `env -0` listing as name/value pairs. */
export function parseEnv0(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of text.split('\0')) {
    const at = entry.indexOf('=');
    if (at > 0) out[entry.slice(0, at)] = entry.slice(at + 1);
  }
  return out;
}

/** The environment `shell` (sh or bash) has after sourcing `profileText` from an empty one. */
export function sourcedEnv(shell: string, profileText: string): Record<string, string> {
  const dir = mkdtempSync(join(tmpdir(), 'gpr-lambda-env-'));
  try {
    const file = join(dir, 'env.sh');
    writeFileSync(file, profileText);
    const r = spawnSync('env', ['-i', shell, '-c', '. "$1" && env -0', 'sh', file], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`${shell} could not source the profile: ${r.stderr}`);
    return parseEnv0(r.stdout);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The subset of `env` named by `names`. */
export function pick(env: Record<string, string>, names: string[]): Record<string, string> {
  return Object.fromEntries(names.filter((n) => n in env).map((n) => [n, env[n]]));
}
