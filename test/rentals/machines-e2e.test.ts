import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { sshExec, type SshTarget } from '../../src/providers/ssh-probe.js';
import { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { assertSecretsNowhere } from '../helpers/secrets.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';
import { waitFor } from '../helpers/wait.js';
import { account, offerIds } from '../helpers/rentals.js';

const base = { category: 'datacenter', vramGb: 80, maximumDurationSeconds: 86400, provisionSeconds: 0 };
const OFFERS: LocalInventoryOffer[] = [
  { ...base, key: 'm-full', name: 'NVIDIA H100 SXM', gpuCount: 1, pricePerHourMinor: 300 },
  {
    ...base,
    key: 'm-plain',
    name: 'NVIDIA A100 80GB',
    gpuCount: 1,
    pricePerHourMinor: 200,
    capabilities: { customImage: false, startupScript: false, ports: 0, maxDiskGb: null },
  },
  { ...base, key: 'm-short', name: 'NVIDIA L40S', vramGb: 48, gpuCount: 2, pricePerHourMinor: 250, actualGpuCount: 1 },
  { ...base, key: 'm-whole', name: 'NVIDIA L40S', vramGb: 48, gpuCount: 2, pricePerHourMinor: 260 },
];
const LATER: LocalInventoryOffer = {
  ...base,
  key: 'm-later',
  name: 'NVIDIA B200',
  vramGb: 180,
  gpuCount: 1,
  pricePerHourMinor: 900,
};

const SECRET = `s3cret-${randomUUID()}`;
const SCRIPT_MARK = `script-text-${randomUUID()}`;

/** A startup script that proves it ran (a file) and serves the environment's GREETING on `port`. */
function script(port: number): string {
  return [
    '#!/bin/sh',
    `# ${SCRIPT_MARK}`,
    'echo "started by the script" > "$HOME/script-ran"',
    `exec ${process.execPath} -e "require('http').createServer((q, r) => r.end('hello ' + process.env.GREETING.length)).listen(${port}, '127.0.0.1')"`,
    '',
  ].join('\n');
}

/** From outside, on the local provider: settings, endpoints, leases, GPU checks and waiting for capacity. */
describe('machines agents can work with (API + worker + local provider)', function () {
  // Bounds, not waits: a loaded machine takes seconds to start the processes a machine runs.
  this.timeout(150_000);
  let ctx: TestContext;
  let worker: TestWorker;
  let ids: Record<string, string>;
  const logs: string[] = [];

  before(async () => {
    ctx = await createTestContext({ offers: OFFERS, env: { RENTAL_POLL_MS: '50' }, logTo: (l) => logs.push(l) });
    ids = await offerIds(ctx);
    worker = await startTestWorker(ctx, { processEveryMs: 50 });
  });
  after(async () => {
    await worker.stop();
    await ctx.close();
  });

  const rent = (who: SignedUp, body: object) =>
    ctx.api.post('/api/v1/rentals').set(who.auth).set('Idempotency-Key', randomUUID()).send(body);

  async function until(who: SignedUp, rentalId: string, done: (r: Record<string, unknown>) => boolean, what: string) {
    let last: Record<string, unknown> = {};
    await waitFor(
      async () => {
        ctx.clock.advance(200);
        last = (await ctx.api.get(`/api/v1/rentals/${rentalId}`).set(who.auth)).body.data;
        return done(last);
      },
      { timeoutMs: 60_000, what },
    );
    return last;
  }

  async function target(who: SignedUp, deploymentId: string): Promise<SshTarget> {
    const c = (await ctx.api.post(`/api/v1/deployments/${deploymentId}/credentials/reveal`).set(who.auth)).body.data;
    return { host: c.host, port: c.port, user: c.user, privateKey: c.privateKey };
  }

  it('runs the image, environment, startup script and port it was given, and becomes ACTIVE only once usable', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const res = await rent(who, {
      offerId: ids['m-full'],
      machine: {
        image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
        env: { GREETING: SECRET, MODEL_ID: 'tiny' },
        startupScript: script(8000),
        ports: [8000],
        diskGb: 40,
      },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const { rentalId, deploymentId } = res.body.data;
    assert.deepEqual(res.body.data.machine, {
      image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
      envNames: ['GREETING', 'MODEL_ID'],
      startupScriptSha256: res.body.data.machine.startupScriptSha256,
      ports: [8000],
      diskGb: 40,
    });
    assert.match(res.body.data.machine.startupScriptSha256, /^[0-9a-f]{64}$/);

    const phases = new Set<string>();
    const active = await until(
      who,
      rentalId,
      (r) => (r.phase && phases.add(String(r.phase)), r.status === 'ACTIVE' || r.status === 'FAILED'),
      'ACTIVE',
    );
    assert.equal(active.status, 'ACTIVE', JSON.stringify(active));
    assert.equal(active.phase, null);
    assert.ok(
      [...phases].every((p) =>
        ['creating', 'booting', 'pulling_image', 'waiting_for_ssh', 'checking_gpus', 'starting'].includes(p),
      ),
      [...phases].join(),
    );

    const ssh = await target(who, deploymentId);
    assert.equal((await sshExec(ssh, 'echo "$GREETING"')).stdout, `${SECRET}\n`, 'the variable is in the shell');
    assert.equal(
      (await sshExec(ssh, 'cat script-ran')).stdout,
      'started by the script\n',
      'the script ran before ACTIVE',
    );
    const endpoints = active.endpoints as { port: number; url: string }[];
    assert.equal(endpoints.length, 1);
    assert.equal(endpoints[0].port, 8000);
    const body = await waitFor(
      async () => {
        try {
          const r = await fetch(endpoints[0].url);
          return r.status === 200 ? await r.text() : undefined;
        } catch {
          return undefined;
        }
      },
      { timeoutMs: 30_000, what: 'the endpoint answers' },
    );
    assert.equal(body, `hello ${SECRET.length}`);

    // Neither the variable's value nor the script's text is in any read, log line or row.
    const reads = [
      res.body,
      active,
      (await ctx.api.get('/api/v1/rentals').set(who.auth)).body,
      (await ctx.api.get(`/api/v1/deployments/${deploymentId}`).set(who.auth)).body,
    ];
    await assertSecretsNowhere(ctx, [SECRET, SCRIPT_MARK], { reads, logs });
    assert.equal((await ctx.api.post(`/api/v1/deployments/${deploymentId}/terminate`).set(who.auth)).status, 202);
    await until(who, rentalId, (r) => r.status === 'TERMINATED', 'TERMINATED');
  });

  it('refuses an explicit offer that cannot honour a setting, naming it', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    for (const [machine, setting] of [
      [{ image: 'pytorch/pytorch:latest' }, 'machine.image'],
      [{ startupScript: 'echo hi' }, 'machine.startupScript'],
      [{ ports: [8000] }, 'machine.ports'],
      [{ diskGb: 10 }, 'machine.diskGb'],
    ] as const) {
      const res = await rent(who, { offerId: ids['m-plain'], machine });
      assert.equal(res.status, 422, JSON.stringify(res.body));
      assert.equal(res.body.error.code, 'VALIDATION_FAILED');
      assert.ok(res.body.error.message.includes(setting), res.body.error.message);
    }
    const ok = await rent(who, { offerId: ids['m-plain'], machine: { env: { ANY: '1' } } });
    assert.equal(ok.status, 201, 'variables go to every offer');
  });

  it('ends a lease as TERMINATED/EXPIRED within one metering period after endsAt, on a metered rental', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const res = await rent(who, { offerId: ids['m-full'], terminateAfterSeconds: 90 });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const active = await until(who, res.body.data.rentalId, (r) => r.status === 'ACTIVE', 'ACTIVE');
    assert.equal(active.billingModel, 'ACCOUNT_BALANCE');
    assert.equal(active.leaseSeconds, 90);
    const endsAt = new Date(String(active.endsAt));
    const startedAt = new Date(String((active.deployment as { startedAt: string }).startedAt));
    assert.equal(endsAt.getTime() - startedAt.getTime(), 90_000);

    ctx.clock.advance(60_000);
    await ctx.services.lifecycle.meter();
    assert.equal(
      (await ctx.api.get(`/api/v1/rentals/${res.body.data.rentalId}`).set(who.auth)).body.data.status,
      'ACTIVE',
      'not before endsAt',
    );
    ctx.clock.advance(31_000);
    await ctx.services.lifecycle.meter();
    const ended = await until(who, res.body.data.rentalId, (r) => r.status === 'TERMINATED', 'TERMINATED');
    assert.equal(ended.terminationReason, 'EXPIRED');
    assert.ok(new Date(String(ended.endedAt)).getTime() >= endsAt.getTime(), 'never before endsAt');
  });

  it("keeps every rental of a key within its maxRentalSeconds: a longer lease is refused, none given is the key's", async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    await ctx.services.ds.getRepository(ApiKey).update({ id: who.keyId }, { maxRentalSeconds: 600 });
    const longer = await rent(who, { offerId: ids['m-full'], terminateAfterSeconds: 601 });
    assert.equal(longer.status, 422, JSON.stringify(longer.body));
    assert.match(longer.body.error.message, /terminateAfterSeconds.*600/);
    const none = await rent(who, { offerId: ids['m-full'] });
    assert.equal(none.status, 201);
    assert.equal(none.body.data.leaseSeconds, 600);
  });

  it('never makes ACTIVE a machine with fewer GPUs than promised: it is destroyed and the rental fails GPU_MISMATCH', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const res = await rent(who, { offerId: ids['m-short'] });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const seen = new Set<string>();
    const done = await until(
      who,
      res.body.data.rentalId,
      (r) => (seen.add(String(r.status)), r.status === 'FAILED' || r.status === 'ACTIVE'),
      'an outcome',
    );
    assert.equal(done.status, 'FAILED', JSON.stringify(done));
    assert.ok(!seen.has('ACTIVE'));
    assert.equal(done.failureCode, 'GPU_MISMATCH');
    const attempts = await ctx.services.ds.query(
      `SELECT outcome, detail FROM deployment_attempts WHERE deployment_id = ?`,
      [res.body.data.deploymentId],
    );
    assert.deepEqual(
      attempts.map((a: { outcome: string }) => a.outcome),
      ['GPU_MISMATCH'],
    );
    assert.match(attempts[0].detail, /listed 1 of 2 GPUs/);
  });

  it('tries the next candidate of a GPU intent when a machine comes up with fewer GPUs, destroying the short one', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const res = await rent(who, { gpuModel: 'L40S', gpuCount: 2, maxHourlyPriceMinor: 300 });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.deepEqual(res.body.data.candidateOfferIds, [ids['m-short'], ids['m-whole']]);
    const active = await until(
      who,
      res.body.data.rentalId,
      (r) => r.status === 'ACTIVE' || r.status === 'FAILED',
      'an outcome',
    );
    assert.equal(active.status, 'ACTIVE', JSON.stringify(active));
    assert.equal((active.deployment as { offerId: string }).offerId, ids['m-whole']);
    const attempts = await ctx.services.ds.query(
      `SELECT outcome FROM deployment_attempts WHERE deployment_id = ? ORDER BY attempt`,
      [res.body.data.deploymentId],
    );
    assert.deepEqual(
      attempts.map((a: { outcome: string }) => a.outcome),
      ['GPU_MISMATCH', 'CREATED'],
    );
    const ssh = await target(who, res.body.data.deploymentId);
    assert.equal((await sshExec(ssh, 'nvidia-smi -L | wc -l')).stdout.trim(), '2');
  });

  it('holds an Idempotency-Key to its settings: the same settings replay, changed ones are 409', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const key = randomUUID();
    const send = (env: Record<string, string>, lease = 600) =>
      ctx.api
        .post('/api/v1/rentals')
        .set(who.auth)
        .set('Idempotency-Key', key)
        .send({ offerId: ids['m-plain'], terminateAfterSeconds: lease, machine: { env } });
    const first = await send({ TOKEN: 'one' });
    assert.equal(first.status, 201, JSON.stringify(first.body));
    assert.equal((await send({ TOKEN: 'one' })).status, 200);
    const changedValue = await send({ TOKEN: 'two' });
    assert.equal(changedValue.status, 409);
    assert.equal(changedValue.body.error.code, 'IDEMPOTENCY_CONFLICT');
    assert.equal((await send({ TOKEN: 'one' }, 700)).status, 409, 'a changed lease too');
  });

  it('keeps a GPU intent waiting for capacity, holding its reservation, and starts it when an offer appears', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const res = await rent(who, {
      gpuModel: 'B200',
      gpuCount: 1,
      maxHourlyPriceMinor: 1000,
      waitForCapacitySeconds: 600,
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.data.status, 'PENDING');
    assert.equal(res.body.data.phase, 'waiting_for_capacity');
    assert.ok(res.body.data.waitForCapacityUntil);
    const reserved = await ctx.services.ds.query(`SELECT hourly_price_minor FROM deployments WHERE id = ?`, [
      res.body.data.deploymentId,
    ]);
    assert.equal(Number(reserved[0].hourly_price_minor), 1000, 'reserved at the ceiling while waiting');

    await ctx.setInventory([...OFFERS, LATER]);
    try {
      const active = await until(
        who,
        res.body.data.rentalId,
        (r) => r.status === 'ACTIVE' || r.status === 'FAILED',
        'ACTIVE',
      );
      assert.equal(active.status, 'ACTIVE', JSON.stringify(active));
      assert.match(String(active.gpuName), /B200/);
      assert.equal((active.quote as { hourlyPriceMinor: number }).hourlyPriceMinor, 900);
    } finally {
      await ctx.setInventory(OFFERS);
    }
  });

  it('fails a waiting rental with NO_CAPACITY at its deadline, releasing what it held', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const res = await rent(who, {
      gpuModel: 'B200',
      gpuCount: 1,
      maxHourlyPriceMinor: 1000,
      waitForCapacitySeconds: 60,
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    ctx.clock.advance(61_000);
    const failed = await until(who, res.body.data.rentalId, (r) => r.status !== 'PENDING', 'the deadline');
    assert.equal(failed.status, 'FAILED', JSON.stringify(failed));
    assert.equal(failed.failureCode, 'NO_CAPACITY');
    const held = await ctx.services.ds.query(
      `SELECT COUNT(*) AS n FROM deployments WHERE account_id = ? AND status IN ('PENDING', 'PROVISIONING', 'ACTIVE', 'TERMINATING')`,
      [who.accountId],
    );
    assert.equal(Number(held[0].n), 0, 'nothing left reserving credit');
  });

  it('refuses to wait for a model nobody knows', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const res = await rent(who, {
      gpuModel: 'Quantum Blaster 9000',
      gpuCount: 1,
      maxHourlyPriceMinor: 1000,
      waitForCapacitySeconds: 600,
    });
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.equal(res.body.error.code, 'NO_MATCHING_OFFER');
  });
});
