import { randomBytes, randomUUID } from 'node:crypto';
import runpodPlugin from '../../plugins/runpod/index.js';
import { offerKey } from '../../plugins/runpod/offers.js';
import { RunpodProvider, type RunpodProviderHooks } from '../../plugins/runpod/provider.js';
import { systemClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import type { OfferRef, ProviderDeps } from '../../src/providers/provider.js';
import { FakeRunpodApi, type FakeRunpodOptions } from '../fakes/runpod-api.js';
import { testDataSource } from '../helpers/db.js';
import { IGNORE_DRIFT } from '../../src/providers/kit/drift.js';

export const H100 = 'NVIDIA H100 80GB HBM3';

/** No client-side spacing: tests that make many calls should not wait for it. */
export const NO_LIMITS = {
  catalog: { minIntervalMs: 0 },
  'pods.create': { minIntervalMs: 0 },
  'pods.read': { minIntervalMs: 0 },
  'pods.delete': { minIntervalMs: 0 },
};

export interface RunpodHarness {
  fake: FakeRunpodApi;
  provider: RunpodProvider;
  deps: ProviderDeps;
  labelPrefix: string;
  /** Everything the provider logged, one parsed pino line each. */
  logs: Record<string, unknown>[];
  label(): string;
  offer(gpuId?: string, count?: number): OfferRef;
  /** Another provider against the same fake (a restarted or second worker process). */
  newProvider(hooks?: RunpodProviderHooks, raw?: Record<string, string>): Promise<RunpodProvider>;
  cleanup(): Promise<void>;
}

export async function makeRunpodHarness(
  opts: { fake?: FakeRunpodOptions; hooks?: RunpodProviderHooks; raw?: Record<string, string> } = {},
): Promise<RunpodHarness> {
  const fake = await FakeRunpodApi.start({ bootMs: 200, directSshDelayMs: 100, ...opts.fake });
  const labelPrefix = `t${randomBytes(4).toString('hex')}-`;
  const logs: Record<string, unknown>[] = [];
  const deps: ProviderDeps = {
    logger: createLogger('debug', { write: (line: string) => void logs.push(JSON.parse(line)) }),
    clock: systemClock,
    dataSource: await testDataSource(),
    production: false,
    labelPrefix,
    drift: IGNORE_DRIFT,
  };
  const newProvider = async (hooks: RunpodProviderHooks = {}, raw: Record<string, string> = {}) => {
    const options = runpodPlugin.validateOptions({ API_KEY: fake.apiKey, API_URL: fake.url, ...opts.raw, ...raw });
    // Built with the test's limits and clock; `runpodPlugin.create` builds the same class with the defaults.
    return new RunpodProvider(options, deps, {
      limits: NO_LIMITS,
      pollTtlMs: 100,
      timeoutMs: 2000,
      ...opts.hooks,
      ...hooks,
    });
  };
  const provider = await newProvider();
  return {
    fake,
    provider,
    deps,
    labelPrefix,
    logs,
    label: () => `${labelPrefix}${randomUUID().slice(0, 13)}`,
    offer: (gpuId = H100, count = 1) => ({
      id: randomUUID(),
      key: offerKey(gpuId, count),
      name: gpuId,
      gpuCount: count,
    }),
    newProvider,
    async cleanup() {
      await fake.close();
    },
  };
}
