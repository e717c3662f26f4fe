import { randomBytes, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import lambdaPlugin from '../../plugins/lambda/index.js';
import type { LambdaTuning } from '../../plugins/lambda/options.js';
import type { LambdaProvider } from '../../plugins/lambda/provider.js';
import { systemClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import type { OfferRef, ProviderDeps } from '../../src/providers/provider.js';
import { FakeLambdaApi, type FakeLambdaOptions } from '../fakes/lambda-api.js';
import { testDataSource } from '../helpers/db.js';

/** The offer every test launches unless it says otherwise. */
export const H100_OFFER_KEY = 'gpu_1x_h100_sxm5@us-east-1';

/** Limits short enough for tests; the real ones are 1 s and 12 s. */
export const FAST_TUNING: LambdaTuning = { apiIntervalMs: 0, launchIntervalMs: 0, timeoutMs: 1000, backoffMs: 10, listTtlMs: 200 };

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
  cleanup(): Promise<void>;
}

export async function makeLambdaHarness(opts: { fake?: FakeLambdaOptions; tuning?: LambdaTuning; raw?: Record<string, string> } = {}): Promise<LambdaHarness> {
  const fake = await FakeLambdaApi.start({ bootMs: 100, ...opts.fake });
  const labelPrefix = `gpr-t${randomBytes(4).toString('hex')}-`;
  let logged = '';
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logged += String(chunk);
      cb();
    },
  });
  const deps: ProviderDeps = { logger: createLogger('debug', sink), clock: systemClock, dataSource: await testDataSource(), production: false, labelPrefix };
  const providers: LambdaProvider[] = [];
  const newProvider = async (o: { raw?: Record<string, string>; tuning?: LambdaTuning } = {}) => {
    const options = lambdaPlugin.validateOptions({ API_KEY: fake.apiKey, API_URL: fake.url, SSH_PORT: String(fake.sshPort), ...o.raw });
    const p = (await lambdaPlugin.create({ ...options, tuning: { ...FAST_TUNING, ...o.tuning } }, deps)) as LambdaProvider;
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
    async cleanup() {
      await Promise.all(providers.map((p) => p.close()));
      await fake.close();
    },
  };
}
