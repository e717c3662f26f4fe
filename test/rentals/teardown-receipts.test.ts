import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createPublicKey } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { verifyReceipt } from '../../clients/sdk/src/receipts.js';
import { lifecycleDepsOf } from '../../src/container.js';
import { Account } from '../../src/modules/accounts/account.entity.js';
import { SecretBox } from '../../src/modules/credentials/secret-box.js';
import { signingKeyBinding } from '../../src/modules/receipts/receipt-keys.js';
import { ReceiptsService } from '../../src/modules/receipts/receipts.service.js';
import {
  createRentalLifecycle,
  type LifecycleTiming,
  type RentalLifecycle,
} from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { canonicalJson } from '../../src/vocabulary/receipts.js';
import type { DestroyMode, LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signup, type SignedUp } from '../helpers/factories.js';
import { addKey, credit, offerIds, rentOk } from '../helpers/rentals.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TIMING: Partial<LifecycleTiming> = { adoptBoundMs: 5000, activeBoundMs: 60_000, sshTimeoutMs: 1500 };

function offers(destroy: DestroyMode = 'ok'): LocalInventoryOffer[] {
  return [
    {
      key: 'tr-a',
      name: 'NVIDIA H100 SXM',
      category: 'datacenter',
      vramGb: 80,
      gpuCount: 1,
      pricePerHourMinor: 300,
      maximumDurationSeconds: 86400,
      provisionSeconds: 0,
      destroy,
    },
  ];
}

describe('teardown receipts (local provider, end to end)', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let life: RentalLifecycle;
  let offerId: string;

  before(async () => {
    ctx = await createTestContext({ offers: offers() });
    offerId = (await offerIds(ctx))['tr-a'];
    life = createRentalLifecycle(lifecycleDepsOf(ctx.services), TIMING);
  });
  after(() => ctx.close());

  const dep = (id: string) => ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id });
  const receiptOf = (who: SignedUp, id: string) => ctx.api.get(`/api/v1/rentals/${id}/receipt`).set(who.auth);
  const publishedKeys = async () => {
    const res = await ctx.api.get('/.well-known/gpr-receipt-keys.json');
    assert.equal(res.status, 200);
    return JSON.parse(res.text) as unknown;
  };

  /** An account with credits on metered billing: an OWNER key and an agent key. */
  async function owner(): Promise<{ owner: SignedUp; agent: SignedUp }> {
    const { accountId } = await signup(ctx);
    await ctx.services.ds.getRepository(Account).update({ id: accountId }, { billingModel: 'ACCOUNT_BALANCE' });
    await credit(ctx, accountId, 100_000);
    return {
      owner: await addKey(ctx, accountId, { kind: 'OWNER', scopes: ['read', 'rent', 'manage', 'billing'] }),
      agent: await addKey(ctx, accountId),
    };
  }

  /** A rental of the agent made ACTIVE, run `minutes`, then asked to end. */
  async function ranAndEnding(agent: SignedUp, minutes = 10) {
    const { rentalId, deploymentId } = await rentOk(ctx, agent, { offerId });
    for (let i = 0; i < 10 && (await dep(deploymentId)).status !== 'ACTIVE'; i++) await life.provision(deploymentId);
    assert.equal((await dep(deploymentId)).status, 'ACTIVE');
    ctx.clock.advance(minutes * 60_000);
    const res = await ctx.api.post(`/api/v1/deployments/${deploymentId}/terminate`).set(agent.auth);
    assert.equal(res.status, 202, JSON.stringify(res.body));
    return { rentalId, deploymentId };
  }

  it('a rental ended TERMINATED has a receipt that verifies with the published key, naming what was verified and charged', async () => {
    await ctx.setInventory(offers());
    const { owner: o, agent } = await owner();
    const { rentalId, deploymentId } = await ranAndEnding(agent);
    const before = await receiptOf(agent, rentalId);
    assert.equal(before.status, 404);
    assert.match(before.body.error.message, /is TERMINATING: .*issued when it becomes TERMINATED/);
    await life.terminate(deploymentId);
    const d = await dep(deploymentId);
    assert.equal(d.status, 'TERMINATED');

    const res = await receiptOf(agent, rentalId);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const signed = res.body.data;
    const rental = (await ctx.api.get(`/api/v1/rentals/${rentalId}`).set(agent.auth)).body.data;
    assert.deepEqual(
      { ...signed.receipt, issuedAt: undefined, keyId: undefined, provider: undefined, ssh: undefined },
      {
        version: 1,
        type: 'gpr.teardown-receipt',
        issuer: 'http://gpu.test',
        rentalId,
        deploymentId,
        providerId: 'local',
        instanceId: d.instanceId,
        label: d.label,
        startedAt: d.startedAt!.toISOString(),
        endedAt: rental.endedAt,
        // The figure the rental's read shows: 10 minutes at 300 cents an hour.
        charged: { totalMinor: rental.deployment.usageMinor, currency: 'USD' },
        issuedAt: undefined,
        keyId: undefined,
        provider: undefined,
        ssh: undefined,
      },
    );
    assert.equal(rental.deployment.usageMinor, 50);
    assert.equal(signed.receipt.provider.state, 'gone');
    assert.equal(signed.receipt.ssh.outcome, 'refused', 'the local machine is gone: its port refuses');
    assert.ok(Date.parse(signed.receipt.ssh.checkedAt) <= Date.parse(signed.receipt.endedAt));
    assert.deepEqual(signed.signature.keyId, signed.receipt.keyId);
    // The same receipt by the deployment's id, and to the owner of the account.
    assert.deepEqual((await receiptOf(agent, deploymentId)).body.data, signed);
    const byOwner = await receiptOf(o, rentalId);
    assert.deepEqual(byOwner.body.data, signed, JSON.stringify(byOwner.body));

    // The published keys: no credential, cacheable, readable from anywhere.
    const keysRes = await ctx.api.get('/.well-known/gpr-receipt-keys.json');
    assert.match(keysRes.headers['content-type'], /^application\/jwk-set\+json/);
    assert.match(keysRes.headers['cache-control'], /^public, max-age=\d+$/);
    assert.equal(keysRes.headers['access-control-allow-origin'], '*');
    const check = verifyReceipt(signed, await publishedKeys());
    assert.equal(check.valid, true, JSON.stringify(check));
    const index = (await ctx.api.get('/api/v1')).body.data.links;
    assert.equal(index.receiptKeys, 'http://gpu.test/.well-known/gpr-receipt-keys.json');
  });

  it('a re-run of the termination job issues no second receipt', async () => {
    await ctx.setInventory(offers());
    const { agent } = await owner();
    const { rentalId, deploymentId } = await ranAndEnding(agent, 1);
    await life.terminate(deploymentId);
    const first = (await receiptOf(agent, rentalId)).body.data;
    ctx.clock.advance(60_000);
    await life.terminate(deploymentId);
    // Even a direct second issue (a crash's re-run that got this far) keeps the first receipt.
    const d = await dep(deploymentId);
    const order = { funding: 'CREDITS' as const, currency: 'USD' };
    const evidence = {
      provider: { state: 'gone' as const, providerState: null, httpStatus: null, checkedAt: ctx.clock.now() },
      ssh: { outcome: 'refused' as const, checkedAt: ctx.clock.now() },
    };
    const issue = await ctx.services.receipts.issuerFor(order, evidence);
    await ctx.services.store.transaction((r) => issue!(r, d, ctx.clock.now()));
    assert.deepEqual((await receiptOf(agent, rentalId)).body.data, first);
    const rows = await ctx.services.ds.query('SELECT COUNT(*) AS n FROM teardown_receipts WHERE deployment_id = ?', [
      deploymentId,
    ]);
    assert.equal(Number(rows[0].n), 1);
  });

  it('changing any one byte of a served receipt fails verification', async () => {
    await ctx.setInventory(offers());
    const { agent } = await owner();
    const { rentalId, deploymentId } = await ranAndEnding(agent, 1);
    await life.terminate(deploymentId);
    const signed = (await receiptOf(agent, rentalId)).body.data;
    const keys = await publishedKeys();
    const body = Buffer.from(canonicalJson(signed.receipt));
    let tried = 0;
    for (let i = 0; i < body.length; i++) {
      const changed = Buffer.from(body);
      changed[i] = changed[i] === 0x41 ? 0x42 : 0x41;
      let receipt: unknown;
      try {
        receipt = JSON.parse(changed.toString());
      } catch {
        continue;
      }
      tried++;
      assert.equal(verifyReceipt({ ...signed, receipt }, keys).valid, false, `byte ${i}: ${changed}`);
    }
    assert.ok(tried > 0);
  });

  it('checks by hand as docs/teardown-receipts.md shows: its Node.js snippet takes the served receipt and refuses a changed one', async () => {
    await ctx.setInventory(offers());
    const { agent } = await owner();
    const { rentalId, deploymentId } = await ranAndEnding(agent, 1);
    await life.terminate(deploymentId);
    const signed = (await receiptOf(agent, rentalId)).body.data;
    const doc = readFileSync(join(ROOT, 'docs/teardown-receipts.md'), 'utf8');
    const snippet = /By hand with Node\.js[^\n]*\n\n```js\n([\s\S]*?)```/.exec(doc)?.[1];
    assert.ok(snippet, 'the page has the snippet');
    const dir = mkdtempSync(join(tmpdir(), 'receipt-by-hand-'));
    const write = (name: string, content: string) => (writeFileSync(join(dir, name), content), join(dir, name));
    const script = write('verify.mjs', snippet);
    const keys = write('keys.json', JSON.stringify(await publishedKeys()));
    const node = (receipt: string) =>
      new Promise<{ code: number | null; out: string }>((resolve) =>
        execFile(process.execPath, [script, receipt, keys], (err, stdout) =>
          resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: stdout }),
        ),
      );
    assert.deepEqual(await node(write('receipt.json', JSON.stringify(signed, null, 2))), { code: 0, out: 'valid\n' });
    const changed = { ...signed, receipt: { ...signed.receipt, endedAt: new Date().toISOString() } };
    assert.deepEqual(await node(write('changed.json', JSON.stringify(changed))), { code: 1, out: 'INVALID\n' });
  });

  it('issues no receipt while the provider says gone but the key still gets in, and one once destruction is verified', async () => {
    await ctx.setInventory(offers('ghost'));
    const { agent } = await owner();
    const { rentalId, deploymentId } = await ranAndEnding(agent, 1);
    await life.terminate(deploymentId);
    assert.equal((await dep(deploymentId)).status, 'TERMINATING');
    const none = await receiptOf(agent, rentalId);
    assert.equal(none.status, 404);
    assert.match(none.body.error.message, /TERMINATING/);
    const rows = await ctx.services.ds.query('SELECT COUNT(*) AS n FROM teardown_receipts WHERE deployment_id = ?', [
      deploymentId,
    ]);
    assert.equal(Number(rows[0].n), 0);
    await ctx.setInventory(offers());
    await life.terminate(deploymentId);
    assert.equal((await dep(deploymentId)).status, 'TERMINATED');
    const signed = (await receiptOf(agent, rentalId)).body.data;
    assert.equal(verifyReceipt(signed, await publishedKeys()).valid, true);
  });

  it('issues none for a rental that ended before it had a machine, and says so', async () => {
    await ctx.setInventory(offers());
    const { agent } = await owner();
    const { rentalId, deploymentId } = await rentOk(ctx, agent, { offerId });
    const res = await ctx.api.post(`/api/v1/deployments/${deploymentId}/terminate`).set(agent.auth);
    assert.equal(res.status, 202);
    await life.terminate(deploymentId);
    assert.equal((await dep(deploymentId)).status, 'TERMINATED');
    const none = await receiptOf(agent, rentalId);
    assert.equal(none.status, 404);
    assert.equal(none.body.error.code, 'NOT_FOUND');
    assert.match(none.body.error.message, /ended without a verified destruction of a machine/);
  });

  it('another account, and another agent of the same account, cannot read it', async () => {
    await ctx.setInventory(offers());
    const { owner: o, agent } = await owner();
    const { rentalId, deploymentId } = await ranAndEnding(agent, 1);
    await life.terminate(deploymentId);
    assert.equal((await receiptOf(agent, rentalId)).status, 200);
    const stranger = await signup(ctx);
    const sibling = await addKey(ctx, o.accountId);
    for (const who of [stranger, sibling]) {
      for (const id of [rentalId, deploymentId]) {
        const res = await receiptOf(who, id);
        assert.equal(res.status, 404);
        // The rental read's own answer: nothing says the rental exists.
        assert.deepEqual(res.body.error.code, 'NOT_FOUND');
        assert.doesNotMatch(res.body.error.message, /receipt|TERMINATED/);
      }
    }
    assert.equal((await ctx.api.get(`/api/v1/rentals/${rentalId}/receipt`)).status, 401);
  });

  it('keeps the signing key sealed in its table: no private key in the clear', async () => {
    const { keyId } = await ctx.services.receipts.signer();
    const [row] = (await ctx.services.ds.query(
      'SELECT public_key, private_key_sealed, private_key_kid FROM receipt_signing_keys WHERE id = ?',
      [keyId],
    )) as { public_key: Buffer; private_key_sealed: Buffer; private_key_kid: string }[];
    assert.equal(row.private_key_kid, ctx.config.secrets.keyId);
    const d = SecretBox.fromConfig(ctx.config).open(
      row.private_key_sealed,
      row.private_key_kid,
      signingKeyBinding(keyId),
    );
    const raw = Buffer.from(d, 'base64url');
    assert.equal(raw.length, 32);
    assert.ok(!row.private_key_sealed.includes(raw), 'the raw private key is not in the column');
    assert.ok(!row.private_key_sealed.includes(Buffer.from(d)), 'nor its base64url');
    const x = createPublicKey({
      key: { kty: 'OKP', crv: 'Ed25519', x: row.public_key.toString('base64url'), d },
      format: 'jwk',
    }).export({ format: 'jwk' }).x;
    assert.equal(x, row.public_key.toString('base64url'));
  });

  // Last: it retires the keys this database's other services sign with (they make new ones when they next sign).
  it('rotates with SECRETS_KEY: a new key signs, the old one is retired with its private half erased, and its receipts still verify', async () => {
    await ctx.setInventory(offers());
    const { agent } = await owner();
    const ended = await ranAndEnding(agent, 1);
    await life.terminate(ended.deploymentId);
    const old = (await receiptOf(agent, ended.rentalId)).body.data;

    const previous = ctx.config.secrets;
    const box = new SecretBox(
      new Map([
        [previous.keyId, previous.key],
        ['rotated-k2', Buffer.alloc(32, 7)],
      ]),
      'rotated-k2',
    );
    const rotated = new ReceiptsService(
      ctx.services.store,
      ctx.clock,
      box,
      (p, id) => ctx.services.rentalReads.get(p, id),
      {
        issuer: 'http://gpu.test',
      },
    );
    const rotatedLife = createRentalLifecycle({ ...lifecycleDepsOf(ctx.services), box, receipts: rotated }, TIMING);
    const next = await ranAndEnding(agent, 1);
    await rotatedLife.terminate(next.deploymentId);
    const fresh = (await receiptOf(agent, next.rentalId)).body.data;
    assert.notEqual(fresh.signature.keyId, old.signature.keyId);

    const rows = (await ctx.services.ds.query(
      'SELECT id, private_key_sealed, private_key_kid, active_for_kid, retired_at FROM receipt_signing_keys',
    )) as {
      id: string;
      private_key_sealed: Buffer | null;
      private_key_kid: string | null;
      active_for_kid: string | null;
      retired_at: Date | null;
    }[];
    const was = rows.find((r) => r.id === old.signature.keyId)!;
    assert.deepEqual([was.private_key_sealed, was.private_key_kid, was.active_for_kid], [null, null, null]);
    assert.ok(was.retired_at);
    // No signing secret is left under the previous SECRETS_KEY.
    assert.deepEqual(
      rows.filter((r) => r.private_key_sealed !== null).map((r) => [r.id, r.private_key_kid]),
      [[fresh.signature.keyId, 'rotated-k2']],
    );
    const keys = (await publishedKeys()) as { keys: { kid: string; retiredAt: string | null }[] };
    assert.ok(keys.keys.find((k) => k.kid === old.signature.keyId)?.retiredAt);
    assert.equal(keys.keys.find((k) => k.kid === fresh.signature.keyId)?.retiredAt, null);
    assert.equal(verifyReceipt(old, keys).valid, true, 'the retired key still verifies what it signed');
    assert.equal(verifyReceipt(fresh, keys).valid, true);
  });
});
