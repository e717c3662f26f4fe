import assert from 'node:assert/strict';
import type { LambdaTuning } from '../../plugins/lambda/options.js';
import { errorClassOf, ProviderApiError } from '../../src/providers/provider-http.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { makeLambdaHarness, type LambdaHarness } from './lambda-harness.js';
import { waitForRunning } from './provider-contract.js';

describe('Lambda rate limits', () => {
  let h: LambdaHarness;
  let clock: number;
  let sleeps: number[];
  const keys = generateDeploymentKeyPair('lambda-limits');
  /** Wall time stands still except through the limiter's own waits, which are recorded. */
  const virtual = (extra: LambdaTuning = {}): LambdaTuning => ({
    now: () => clock,
    sleep: async (ms) => {
      sleeps.push(ms);
      clock += ms;
    },
    ...extra,
  });

  beforeEach(async () => {
    h = await makeLambdaHarness();
    clock = 1_000_000;
    sleeps = [];
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('waits as long as Retry-After says before calling again', async () => {
    const p = await h.newProvider({ tuning: virtual() });
    h.fake.rateLimitAll(true, 3);
    const err = await p.listOffers().catch((e: unknown) => e);
    assert.ok(err instanceof ProviderApiError);
    assert.equal(err.errorClass, 'rate_limited');
    assert.equal(err.retryAfterMs, 3000);
    h.fake.rateLimitAll(false);
    assert.ok((await p.listOffers()).length > 0);
    assert.deepEqual(sleeps, [3000]);
  });

  it('doubles its own back-off when a 429 carries no Retry-After, and resets after a success', async () => {
    const p = await h.newProvider({ tuning: virtual({ backoffMs: 100 }) });
    h.fake.rateLimitAll(true);
    for (let i = 0; i < 3; i++)
      assert.equal(errorClassOf(await p.listInstances().catch((e: unknown) => e)), 'rate_limited');
    h.fake.rateLimitAll(false);
    await p.listInstances();
    await p.listInstances();
    assert.deepEqual(sleeps, [100, 200, 400]);
  });

  it('a create refused by the rate limit is throttled for as long as Lambda asked', async () => {
    h.fake.failNextWith('create', 429, { error: { code: 'global/too-many-requests', message: 'slow down' } });
    const res = await h.provider.create(h.label(), h.offer(), keys.publicKey);
    assert.equal(res.kind, 'throttled');
    const p = await h.newProvider({ tuning: virtual() });
    h.fake.rateLimitAll(true, 7);
    const again = await p.create(h.label(), h.offer(), keys.publicKey);
    assert.deepEqual([again.kind, (again as { retryAfterMs: number }).retryAfterMs], ['throttled', 7000]);
  });

  it('spaces calls by the documented limits: one a second, launches one per 12 seconds', async () => {
    const p = await h.newProvider({ tuning: virtual({ apiIntervalMs: undefined, launchIntervalMs: undefined }) });
    assert.equal((await p.create(h.label(), h.offer(), keys.publicKey)).kind, 'created');
    assert.equal((await p.create(h.label(), h.offer('gpu_1x_a10@us-west-1'), keys.publicKey)).kind, 'created');
    // list, key, launch at 1 s; list and key a second apart each; the second launch 12 s after the first.
    assert.deepEqual(sleeps, [1000, 1000, 1000, 10_000]);
  });

  it('never logs the API key, even with the key refused', async () => {
    const wrong = await h.newProvider({ raw: { API_KEY: 'secret_wrong_key_123' } });
    assert.equal(errorClassOf(await wrong.listOffers().catch((e: unknown) => e)), 'auth');
    const res = await wrong.create(h.label(), h.offer(), keys.publicKey);
    assert.equal(res.kind, 'rejected');
    h.fake.rateLimitAll(true);
    await h.provider.listOffers().catch(() => undefined);
    assert.ok(h.logText().length > 0);
    assert.doesNotMatch(h.logText(), /secret_wrong_key_123/);
    assert.ok(!h.logText().includes(h.fake.apiKey));
  });

  it("a fake that enforces Lambda's limits refuses a client that does not space its calls", async () => {
    const strict = await makeLambdaHarness({ fake: { limits: { apiIntervalMs: 1000, launchIntervalMs: 5000 } } });
    try {
      await strict.provider.listOffers();
      assert.equal(errorClassOf(await strict.provider.listOffers().catch((e: unknown) => e)), 'rate_limited');
    } finally {
      await strict.cleanup();
    }
  });

  it('spacing calls by the limits gets no 429 through a whole lifecycle', async function () {
    this.timeout(30_000);
    const strict = await makeLambdaHarness({
      fake: { limits: { apiIntervalMs: 200, launchIntervalMs: 400 } },
      tuning: { apiIntervalMs: 300, launchIntervalMs: 500, listTtlMs: 300 },
    });
    try {
      const ids: string[] = [];
      for (const offer of ['gpu_1x_h100_sxm5@us-east-1', 'gpu_1x_a10@us-west-1']) {
        const res = await strict.provider.create(strict.label(), strict.offer(offer), keys.publicKey);
        ids.push((res as { instanceId: string }).instanceId);
      }
      await Promise.all(ids.map((id) => waitForRunning(strict.provider, id, 15_000)));
      for (const id of ids) await strict.provider.destroy(id);
      assert.ok(strict.fake.calls.length >= 8);
      assert.deepEqual(
        strict.fake.calls.filter((c) => c.status === 429),
        [],
      );
    } finally {
      await strict.cleanup();
    }
  });
});
