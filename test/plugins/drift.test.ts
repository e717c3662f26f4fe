import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import lambdaPlugin from '../../plugins/lambda/index.js';
import runpodPlugin from '../../plugins/runpod/index.js';
import { RunpodProvider } from '../../plugins/runpod/provider.js';
import { VastProvider } from '../../plugins/vast/provider.js';
import type { DriftRecord } from '../../src/modules/inventory/provider-drift.repository.js';
import { DriftLog } from '../../src/providers/drift-log.js';
import type { Provider } from '../../src/providers/provider.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { createStore, type AppStore } from '../../src/repositories.js';
import { FAKE_VAST_OFFERS } from '../fakes/vast-api.js';
import { testDataSource } from '../helpers/db.js';
import { FAST_TUNING as LAMBDA_FAST, makeLambdaHarness, type LambdaHarness } from './lambda-harness.js';
import { waitForRunning } from './provider-contract.js';
import { makeRunpodHarness, NO_LIMITS, type RunpodHarness } from './runpod-harness.js';
import { FAST_TUNING as VAST_FAST, makeVastHarness, type VastHarness } from './vast-harness.js';

/** A name-like word no other test sends: letters only, so the report keeps it as it is. */
const word = (prefix: string) =>
  `${prefix}_${[...randomBytes(8)].map((b) => String.fromCharCode(97 + (b % 26))).join('')}`;

/** Values of the answers below that must never reach a stored row. */
const SECRET_TEXT = 'sk_live_51Hx9aZt0ken0123456789';
const ADDRESS = '203.0.113.57';
const EMAIL = 'ada@example.com';

/**
 * The drift report through the real plugins against the fakes: each plugin records what it could
 * not fully read, the process's drift log writes it to MariaDB, and the stored rows hold shapes,
 * never the answers' values. The table is shared by the files of a worker, so each test looks at
 * its own shapes (a name of its own, or the growth of a row's count).
 */
describe('the drift report, through the plugins against their fakes', function () {
  this.timeout(60_000);
  const keys = generateDeploymentKeyPair('drift');
  let store: AppStore;
  let log: DriftLog;

  before(async () => {
    store = createStore(await testDataSource());
  });
  beforeEach(() => {
    // Written when the test flushes: a delay no test reaches.
    log = new DriftLog({ flushDelayMs: 3_600_000 });
    log.attach((batch, max) => store.read((r) => r.providerDrift.record(batch, max)));
  });
  afterEach(() => log.close());

  const listed = (provider: string) => store.read((r) => r.providerDrift.list(provider));
  const rowsLike = async (provider: string, pick: (r: DriftRecord) => boolean) => (await listed(provider)).filter(pick);
  /** The stored rows of a shape, as MariaDB holds them, every column as text. */
  const rawRows = async (provider: string, like: string) =>
    JSON.stringify(
      await (
        await testDataSource()
      ).query(`SELECT * FROM provider_drift WHERE provider = ? AND shape LIKE ?`, [provider, `%${like}%`]),
    );

  describe('vast', () => {
    let h: VastHarness;
    let provider: VastProvider;
    beforeEach(async () => {
      h = await makeVastHarness({ fake: { bootMs: 50 } });
      provider = new VastProvider(h.options, { ...h.deps, drift: log }, { ...VAST_FAST, listTtlMs: 0 });
    });
    afterEach(async () => {
      await provider.close();
      await h.cleanup();
    });

    it('an unknown state seen on several polls is one shape in the report, with a count, and no value of the instance', async () => {
      const res = await provider.create(h.label(), h.offer(FAKE_VAST_OFFERS[0].id), keys.publicKey);
      assert.equal(res.kind, 'created', JSON.stringify(res));
      const id = (res as { instanceId: string }).instanceId;
      const running = await waitForRunning(provider, id);
      const state = word('hibernating');
      h.fake.setStatus(id, state);
      for (let poll = 0; poll < 3; poll++) assert.equal((await provider.get(id)).state, 'pending');
      await log.flush();

      const mine = await rowsLike('vast', (r) => r.kind === 'unknown_state' && JSON.stringify(r.shape).includes(state));
      assert.equal(mine.length, 1, JSON.stringify(mine));
      assert.deepEqual([mine[0].where, mine[0].shape, mine[0].seen], ['instance actual_status', { state }, 3]);
      const raw = await rawRows('vast', state);
      for (const value of [id, running.ssh.host, String(running.ssh.port), h.fake.apiKey, h.labelPrefix])
        assert.ok(!raw.includes(value), `${value} is in ${raw}`);
    });

    it('a page whose cursor it cannot read is recorded by its shape: no id, label or address of the page', async () => {
      const page = {
        instances: [
          { id: 31_000_999, label: `${h.labelPrefix}leak`, actual_status: 'running', public_ipaddr: ADDRESS },
        ],
        next_token: 424_242,
      };
      const where = (r: DriftRecord) => r.kind === 'unknown_page_shape' && r.where === 'GET /api/v1/instances/';
      const before = (await rowsLike('vast', where)).find((r) => JSON.stringify(r.shape).includes('next_token'));
      h.fake.respondNext('list', 200, page);
      await assert.rejects(provider.listInstances(), { errorClass: 'bad_response' });
      await log.flush();
      const after = (await rowsLike('vast', where)).filter((r) => JSON.stringify(r.shape).includes('next_token'));
      assert.equal(after.length, 1);
      assert.deepEqual(after[0].shape, {
        instances: [{ actual_status: 'string', id: 'number', label: 'string', public_ipaddr: 'string' }],
        next_token: 'number',
      });
      assert.equal(after[0].seen, (before?.seen ?? 0) + 1);
      const raw = await rawRows('vast', 'next_token');
      for (const value of ['31000999', '424242', ADDRESS, h.labelPrefix]) assert.ok(!raw.includes(value), value);
    });
  });

  describe('runpod', () => {
    let h: RunpodHarness;
    let provider: Provider;
    beforeEach(async () => {
      h = await makeRunpodHarness();
      provider = new RunpodProvider(
        runpodPlugin.validateOptions({ API_KEY: h.fake.apiKey, API_URL: h.fake.url }),
        { ...h.deps, drift: log },
        { limits: NO_LIMITS, pollTtlMs: 0, timeoutMs: 2000 },
      );
    });
    afterEach(() => h.cleanup());

    it('an error body no row of meaning matches appears once, counted, without its words', async () => {
      const shapeOf409 = (r: DriftRecord) =>
        r.kind === 'unmatched_error' && r.where === 'GET /v2/pods' && (r.shape as { status?: string }).status === '409';
      const before = (await rowsLike('runpod', shapeOf409))[0]?.seen ?? 0;
      const problem = {
        status: 409,
        title: 'Conflict',
        detail: `pod x7f9s2k3l4m5n6 of ${EMAIL} at ${ADDRESS} holds ${SECRET_TEXT}`,
      };
      h.fake.answerNext('list', problem);
      h.fake.answerNext('list', problem);
      await assert.rejects(provider.listInstances(), { errorClass: 'request' });
      await assert.rejects(provider.listInstances(), { errorClass: 'request' });
      await log.flush();

      const mine = await rowsLike('runpod', shapeOf409);
      assert.equal(mine.length, 1, JSON.stringify(mine));
      assert.deepEqual(mine[0].shape, {
        body: { detail: 'string', status: 'number', title: 'string' },
        status: '409',
      });
      assert.equal(mine[0].seen, before + 2);
      const raw = await rawRows('runpod', '"409"');
      for (const value of ['x7f9s2k3l4m5n6', EMAIL, ADDRESS, SECRET_TEXT, 'Conflict', h.fake.apiKey])
        assert.ok(!raw.includes(value), `${value} is in ${raw}`);
    });

    it('an error a row of meaning reads (no capacity) is no drift', async () => {
      const capacity = (r: DriftRecord) => r.kind === 'unmatched_error' && r.where === 'GET /v2/pods';
      const before = JSON.stringify(await rowsLike('runpod', capacity));
      h.fake.answerNext('list', { status: 401, detail: 'invalid api key' });
      await assert.rejects(provider.listInstances(), { errorClass: 'auth' });
      await log.flush();
      assert.equal(JSON.stringify(await rowsLike('runpod', capacity)), before);
      assert.deepEqual(log.seen(), []);
    });
  });

  describe('lambda', () => {
    let h: LambdaHarness;
    beforeEach(async () => {
      h = await makeLambdaHarness();
    });
    afterEach(() => h.cleanup());

    it('an error code no row knows is recorded with the code, and without the message', async () => {
      const provider = await lambdaPlugin.create(
        {
          ...lambdaPlugin.validateOptions({
            API_KEY: h.fake.apiKey,
            API_URL: h.fake.url,
            SSH_PORT: String(h.fake.sshPort),
          }),
          tuning: LAMBDA_FAST,
        },
        { ...h.deps, drift: log },
      );
      const code = `global/${word('brand-new').replace('_', '-')}`;
      const instance = '0920582c7ff041399e34823a0be62549';
      h.fake.failNextWith('get', 400, { error: { code, message: `instance ${instance} at ${ADDRESS} of ${EMAIL}` } });
      await assert.rejects(provider.get(instance));
      await log.flush();
      const mine = await rowsLike('lambda', (r) => JSON.stringify(r.shape).includes(code));
      assert.deepEqual(
        mine.map((r) => [r.kind, r.where, r.shape, r.seen]),
        [
          [
            'unmatched_error',
            'GET /api/v1/instances/{id}',
            { body: { error: { code: 'string', message: 'string' } }, code, status: '400' },
            1,
          ],
        ],
      );
      const raw = await rawRows('lambda', code);
      for (const value of [instance, ADDRESS, EMAIL]) assert.ok(!raw.includes(value), value);
      await provider.close?.();
    });
  });
});
