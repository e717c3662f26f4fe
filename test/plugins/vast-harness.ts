import { randomBytes, randomUUID } from 'node:crypto';
import vastPlugin from '../../plugins/vast/index.js';
import type { VastOptions } from '../../plugins/vast/options.js';
import { VastProvider, type VastTuning } from '../../plugins/vast/provider.js';
import { systemClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import type { OfferRef, ProviderDeps } from '../../src/providers/provider.js';
import { FakeVastApi, type FakeVastOptions } from '../fakes/vast-api.js';
import { testDataSource } from '../helpers/db.js';
import { IGNORE_DRIFT } from '../../src/providers/kit/drift.js';

/** No spacing, short timeouts: the fake does not enforce limits unless a test asks it to. */
export const FAST_TUNING: VastTuning = {
  intervalsMs: { offers: 0, create: 0, attach: 0, get: 0, list: 0, destroy: 0 },
  timeoutMs: 3000,
  backoffMs: 20,
  maxBackoffMs: 200,
  listTtlMs: 20,
};

export interface VastHarness {
  fake: FakeVastApi;
  provider: VastProvider;
  deps: ProviderDeps;
  options: VastOptions;
  labelPrefix: string;
  label(): string;
  /** The OfferRef the host would pass for an ask id of the fake's fixture (with `costPerHourMinor` when given). */
  offer(askId: number | string, costPerHourMinor?: number): OfferRef;
  /** Another provider on the same fake (a second worker, or one with other options or tuning). */
  newProvider(o?: { raw?: Record<string, string>; tuning?: VastTuning }): VastProvider;
  cleanup(): Promise<void>;
}

/** `fake` starts the fake in another mode (`behaviour: 'recorded'`) or with single quirks. */
export async function makeVastHarness(
  o: { raw?: Record<string, string>; tuning?: VastTuning; fake?: FakeVastOptions } = {},
): Promise<VastHarness> {
  const fake = await FakeVastApi.start(o.fake);
  const labelPrefix = `t${randomBytes(4).toString('hex')}-`;
  const deps: ProviderDeps = {
    logger: createLogger('silent'),
    clock: systemClock,
    dataSource: await testDataSource(),
    production: false,
    labelPrefix,
    drift: IGNORE_DRIFT,
  };
  const providers: VastProvider[] = [];
  const newProvider = (p: { raw?: Record<string, string>; tuning?: VastTuning } = {}) => {
    const options = vastPlugin.validateOptions({ API_KEY: fake.apiKey, API_URL: fake.url, ...o.raw, ...p.raw });
    const provider = new VastProvider(options, deps, { ...FAST_TUNING, ...o.tuning, ...p.tuning });
    providers.push(provider);
    return provider;
  };
  const provider = newProvider();
  return {
    fake,
    provider,
    deps,
    options: vastPlugin.validateOptions({ API_KEY: fake.apiKey, API_URL: fake.url, ...o.raw }),
    labelPrefix,
    label: () => `${labelPrefix}${randomUUID().slice(0, 13)}`,
    offer(askId, costPerHourMinor) {
      const f = fake.offers.find((x) => String(x.id) === String(askId));
      const ref: OfferRef = {
        id: randomUUID(),
        key: String(askId),
        name: f?.gpu_name ?? 'unknown',
        gpuCount: f?.num_gpus ?? 1,
      };
      if (costPerHourMinor !== undefined) ref.costPerHourMinor = costPerHourMinor;
      return ref;
    },
    newProvider,
    async cleanup() {
      await Promise.all(providers.map((p) => p.close()));
      await fake.close();
    },
  };
}
