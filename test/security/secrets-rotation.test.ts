import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { runOwnerCommand } from '../../src/cli/owner-command.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { SecretBox } from '../../src/modules/credentials/secret-box.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { machineSettingsOf } from '../../src/modules/rentals/store/machine-secrets.js';
import { Order } from '../../src/modules/rentals/store/order.entity.js';
import { signingKeyBinding } from '../../src/modules/receipts/receipt-keys.js';
import { secretBinding } from '../../src/modules/webhooks/webhooks.service.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { account, makeActive, offerIds, rentOk } from '../helpers/rentals.js';
import { scratchDatabase } from '../jobs/scratch-database.js';

const OLD = randomBytes(32).toString('base64');
const NEW = randomBytes(32).toString('base64');

/** Runs `owner reseal-secrets --json` with `env`'s keys; returns its exit status and parsed output. */
async function reseal(url: string, env: Record<string, string>) {
  const out: string[] = [];
  const err: string[] = [];
  const config = loadConfig({ DATABASE_URL: url, LOG_LEVEL: 'silent', ...env });
  const status = await runOwnerCommand(['reseal-secrets', '--json'], config, {
    out: (t) => void out.push(t),
    err: (t) => void err.push(t),
  });
  return { status, json: out.length ? JSON.parse(out.join('')) : undefined, err: err.join('') };
}

describe('SECRETS_KEY rotation', function () {
  this.timeout(60_000);

  it('SECRETS_KEY_PREVIOUS takes id:key entries and refuses malformed ones, the current id and duplicates', () => {
    const cfg = loadConfig({ SECRETS_KEY: NEW, SECRETS_KEY_ID: 'k2', SECRETS_KEY_PREVIOUS: ` k1:${OLD} , k0:${NEW}` });
    assert.deepEqual(
      cfg.secrets.previous.map((k) => k.id),
      ['k1', 'k0'],
    );
    assert.deepEqual(cfg.secrets.previous[0].key, Buffer.from(OLD, 'base64'));
    for (const bad of [
      OLD,
      `k1:${randomBytes(16).toString('base64')}`,
      `k2:${OLD}`,
      `k1:${OLD},k1:${NEW}`,
      `bad id:${OLD}`,
    ]) {
      assert.throws(
        () => loadConfig({ SECRETS_KEY: NEW, SECRETS_KEY_ID: 'k2', SECRETS_KEY_PREVIOUS: bad }),
        ConfigError,
        bad,
      );
    }
  });

  it('an earlier key opens what it sealed and never seals', () => {
    const before = SecretBox.fromConfig(loadConfig({ SECRETS_KEY: OLD, SECRETS_KEY_ID: 'k1' }));
    const sealed = before.seal('ssh key', 'row-1');
    const during = SecretBox.fromConfig(
      loadConfig({ SECRETS_KEY: NEW, SECRETS_KEY_ID: 'k2', SECRETS_KEY_PREVIOUS: `k1:${OLD}` }),
    );
    assert.equal(during.open(sealed.ciphertext, 'k1', 'row-1'), 'ssh key');
    assert.equal(during.seal('x', 'row-2').keyId, 'k2');
    const after = SecretBox.fromConfig(loadConfig({ SECRETS_KEY: NEW, SECRETS_KEY_ID: 'k2' }));
    assert.throws(() => after.open(sealed.ciphertext, 'k1', 'row-1'), /k1 is not configured/);
  });

  describe('owner reseal-secrets, on a database of its own', () => {
    let db: Awaited<ReturnType<typeof scratchDatabase>>;
    let ctx: TestContext;

    before(async () => {
      db = await scratchDatabase(4);
      ctx = await createTestContext({
        database: { ds: db.ds, url: db.url },
        env: { SECRETS_KEY: OLD, SECRETS_KEY_ID: 'k1', WEBHOOK_ALLOW_PRIVATE_DESTINATIONS: 'true' },
      });
    });
    after(async () => {
      await ctx?.close();
      await db?.drop();
    });

    it('seals SSH keys, machine secrets, webhook secrets and receipt signing keys again under the new key, each still opening to what it was', async () => {
      // Secrets sealed under k1 by the service's own paths: admission (machine variables), the
      // provisioning seal (makeActive), webhook endpoint creation.
      const who = await account(ctx, { creditsMinor: 100_000 });
      const ids = await offerIds(ctx);
      const env = { HF_TOKEN: `hf_${randomUUID()}` };
      const rental = await rentOk(ctx, who, { offerId: Object.values(ids)[0], machine: { env } });
      const pair = await makeActive(ctx, rental.deploymentId);
      const made = await ctx.api
        .post('/api/v1/webhook-endpoints')
        .set(who.auth)
        .set('Idempotency-Key', randomUUID())
        .send({ url: 'http://127.0.0.1:9/hook', eventTypes: ['rental.active'] });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      const { id: endpointId, secret } = made.body.data as { id: string; secret: string };
      // The receipt signing key, made under k1 by the first signing.
      const signingKeyId = (await ctx.services.receipts.signer()).keyId;

      // Without the old key the command stops, naming it, and changes nothing.
      const refused = await reseal(db.url, { SECRETS_KEY: NEW, SECRETS_KEY_ID: 'k2' });
      assert.equal(refused.status, 1);
      assert.match(refused.err, /sealed under key "k1".*SECRETS_KEY_PREVIOUS/);
      assert.equal(
        (await db.ds.getRepository(Deployment).findOneByOrFail({ id: rental.deploymentId })).sshKeyKid,
        'k1',
      );

      const done = await reseal(db.url, { SECRETS_KEY: NEW, SECRETS_KEY_ID: 'k2', SECRETS_KEY_PREVIOUS: `k1:${OLD}` });
      assert.equal(done.status, 0, done.err);
      assert.equal(done.json.underOtherKeys, 0);
      assert.deepEqual(
        done.json.kinds.map((k: { resealed: number; byKey: Record<string, number> }) => [k.resealed, k.byKey]),
        [
          [1, { k2: 1 }],
          [1, { k2: 1 }],
          [1, { k2: 1 }],
          [1, { k2: 1 }],
        ],
      );

      // The new key alone now opens everything, to the same plaintexts.
      const box = SecretBox.fromConfig(loadConfig({ SECRETS_KEY: NEW, SECRETS_KEY_ID: 'k2' }));
      const d = await db.ds.getRepository(Deployment).findOneByOrFail({ id: rental.deploymentId });
      assert.equal(d.sshKeyKid, 'k2');
      assert.equal(box.open(d.sshPrivateKeyEnc!, d.sshKeyKid, d.id), pair.privateKey);
      const order = await db.ds.getRepository(Order).findOneByOrFail({ id: d.orderId });
      assert.deepEqual(machineSettingsOf(box, order).env, env);
      const [endpoint] = (await db.ds.query('SELECT secret_sealed, secret_key_id FROM webhook_endpoints WHERE id = ?', [
        endpointId,
      ])) as { secret_sealed: Buffer; secret_key_id: string }[];
      assert.equal(endpoint.secret_key_id, 'k2');
      assert.equal(box.open(endpoint.secret_sealed, 'k2', secretBinding(endpointId)), secret);
      const [signing] = (await db.ds.query(
        'SELECT private_key_sealed, private_key_kid FROM receipt_signing_keys WHERE id = ?',
        [signingKeyId],
      )) as { private_key_sealed: Buffer; private_key_kid: string }[];
      assert.equal(signing.private_key_kid, 'k2');
      assert.match(box.open(signing.private_key_sealed, 'k2', signingKeyBinding(signingKeyId)), /^[A-Za-z0-9_-]{43}$/);

      // A second run finds nothing to do.
      const again = await reseal(db.url, { SECRETS_KEY: NEW, SECRETS_KEY_ID: 'k2', SECRETS_KEY_PREVIOUS: `k1:${OLD}` });
      assert.equal(again.status, 0);
      assert.deepEqual(
        again.json.kinds.map((k: { resealed: number }) => k.resealed),
        [0, 0, 0, 0],
      );
    });
  });
});
