import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Store } from '../../src/db/store.js';
import { resealSecrets } from '../../src/modules/credentials/reseal-secrets.js';
import { SecretBox } from '../../src/modules/credentials/secret-box.js';
import { SEALED_SECRET_KINDS, type SealedColumnRepositories } from '../../src/modules/credentials/sealed-secrets.js';
import { memoryCredentialsSeed } from '../fakes/store/credentials.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

const OLD = randomBytes(32);
const NEW = randomBytes(32);
const before = new SecretBox(new Map([['k1', OLD]]), 'k1');
const during = new SecretBox(
  new Map([
    ['k1', OLD],
    ['k2', NEW],
  ]),
  'k2',
);
const after = new SecretBox(new Map([['k2', NEW]]), 'k2');

const [SSH, MACHINE, WEBHOOK, RECEIPT_KEYS] = SEALED_SECRET_KINDS;

describe('resealSecrets (memory store)', () => {
  let store: ReturnType<typeof memoryStore>;
  let seed: ReturnType<typeof memoryCredentialsSeed>;

  beforeEach(() => {
    store = memoryStore();
    seed = memoryCredentialsSeed(store.tables);
  });

  /**
   * A rental whose SSH key and machine secrets `box` sealed, a webhook endpoint's secret and a
   * receipt signing key's private half; their plaintexts.
   */
  async function sealedRental(box: SecretBox) {
    const ids = {
      deploymentId: randomUUID(),
      orderId: randomUUID(),
      endpointId: randomUUID(),
      signingKeyId: `rk_${randomUUID()}`,
    };
    const plain = {
      ssh: `ssh-${randomUUID()}`,
      machine: `env-${randomUUID()}`,
      webhook: `whsec-${randomUUID()}`,
      signing: `d-${randomUUID()}`,
    };
    const ssh = box.seal(plain.ssh, SSH.binding(ids.deploymentId));
    const machine = box.seal(plain.machine, MACHINE.binding(ids.orderId));
    const webhook = box.seal(plain.webhook, WEBHOOK.binding(ids.endpointId));
    await seed.rental({
      accountId: randomUUID(),
      keyId: randomUUID(),
      orderId: ids.orderId,
      deploymentId: ids.deploymentId,
      status: 'ACTIVE',
      sshKey: { sealed: ssh.ciphertext, keyId: ssh.keyId },
      machineSecrets: { sealed: machine.ciphertext, keyId: machine.keyId },
    });
    await seed.webhookEndpoint({
      id: ids.endpointId,
      accountId: randomUUID(),
      sealed: webhook.ciphertext,
      keyId: webhook.keyId,
    });
    // As the receipts service stores a pair (receipts.repository.ts), each under a SECRETS_KEY id of its own.
    const signing = box.seal(plain.signing, RECEIPT_KEYS.binding(ids.signingKeyId));
    store.tables.table('receipt_signing_keys').insert(ids.signingKeyId, {
      id: ids.signingKeyId,
      publicKey: Buffer.alloc(32),
      privateKeySealed: signing.ciphertext,
      privateKeyKid: signing.keyId,
      activeForKid: `made-under-${ids.signingKeyId}`,
      createdAt: new Date(),
      retiredAt: null,
    });
    return { ids, plain };
  }

  /** Every stored secret of a kind, opened with `box`. */
  async function opened(box: SecretBox, kind = SSH): Promise<string[]> {
    const rows = await store.read((r) => kind.column(r).underOtherKeys('none', '', 10_000));
    return rows.map((s) => box.open(s.sealed, s.keyId, kind.binding(s.id))).sort();
  }

  it('seals every kind again under the current key, each opening to what it was with the new key alone', async () => {
    const a = await sealedRental(before);
    const b = await sealedRental(before);
    const out = await resealSecrets(store, during);
    assert.deepEqual(
      out.map((o) => [o.kind, o.resealed, o.skipped, o.byKey]),
      SEALED_SECRET_KINDS.map((k) => [k.name, 2, 0, { k2: 2 }]),
    );
    assert.deepEqual(await opened(after, SSH), [a.plain.ssh, b.plain.ssh].sort());
    assert.deepEqual(await opened(after, MACHINE), [a.plain.machine, b.plain.machine].sort());
    assert.deepEqual(await opened(after, WEBHOOK), [a.plain.webhook, b.plain.webhook].sort());
    assert.deepEqual(await opened(after, RECEIPT_KEYS), [a.plain.signing, b.plain.signing].sort());
  });

  it('finds nothing to do on a second run, and leaves secrets already under the current key as they are', async () => {
    await sealedRental(during);
    const stored = await store.read((r) => SSH.column(r).underOtherKeys('none', '', 10));
    await resealSecrets(store, during);
    const again = await resealSecrets(store, during);
    assert.deepEqual(
      again.map((o) => [o.resealed, o.skipped, o.byKey]),
      SEALED_SECRET_KINDS.map(() => [0, 0, { k2: 1 }]),
    );
    assert.deepEqual(await store.read((r) => SSH.column(r).underOtherKeys('none', '', 10)), stored);
  });

  it('stops at a secret under a key it does not hold, naming the kind, the row and the key, before touching it', async () => {
    const { ids } = await sealedRental(before);
    await assert.rejects(
      resealSecrets(store, after),
      new RegExp(`cannot open ${SSH.name} row ${ids.deploymentId} sealed under key "k1".*SECRETS_KEY_PREVIOUS`),
    );
    const counts = await store.read((r) => MACHINE.column(r).countsByKey());
    assert.deepEqual(counts, { k1: 1 }, 'kinds after it are not reached');
  });

  it('walks more secrets than one page holds', async () => {
    const n = 205;
    for (let i = 0; i < n; i++) {
      const id = randomUUID();
      const sealed = before.seal(`key ${i}`, id);
      await seed.rental({
        accountId: 'a',
        keyId: 'k',
        orderId: randomUUID(),
        deploymentId: id,
        status: 'TERMINATED',
        sshKey: { sealed: sealed.ciphertext, keyId: sealed.keyId },
      });
    }
    const [ssh] = await resealSecrets(store, during);
    assert.deepEqual([ssh.resealed, ssh.byKey], [n, { k2: n }]);
  });

  it('skips a secret sealed afresh between its read and its write, keeping the fresh one', async () => {
    const { ids } = await sealedRental(before);
    const fresh = during.seal('sealed meanwhile', SSH.binding(ids.deploymentId));
    // A store whose first replacement finds the row already rewritten, as by a service running meanwhile.
    let raced = false;
    const racing: Store<SealedColumnRepositories> = {
      read: (fn) =>
        store.read((repos) => {
          const ssh = repos.rentals.sealed.sshKeys;
          return fn({
            webhooks: repos.webhooks,
            receipts: repos.receipts,
            rentals: {
              sealed: {
                machineSecrets: repos.rentals.sealed.machineSecrets,
                sshKeys: {
                  underOtherKeys: (...a) => ssh.underOtherKeys(...a),
                  countsByKey: () => ssh.countsByKey(),
                  async replace(previous, next) {
                    if (!raced) {
                      raced = true;
                      await ssh.replace(previous, { sealed: fresh.ciphertext, keyId: fresh.keyId });
                    }
                    return ssh.replace(previous, next);
                  },
                },
              },
            },
          });
        }),
      transaction: (fn, options) => store.transaction(fn, options),
      pipelined: (fn) => store.pipelined(fn),
    };
    const [ssh, machine] = await resealSecrets(racing, during);
    assert.deepEqual([ssh.resealed, ssh.skipped, ssh.byKey], [0, 1, { k2: 1 }]);
    assert.deepEqual([machine.resealed, machine.skipped], [1, 0]);
    assert.deepEqual(await opened(after, SSH), ['sealed meanwhile']);
  });

  it('binds each kind to its own row: a secret copied onto another row does not open', async () => {
    const a = await sealedRental(before);
    const b = await sealedRental(before);
    const [first] = await store.read((r) => WEBHOOK.column(r).underOtherKeys('none', '', 10));
    const other = first.id === a.ids.endpointId ? b.ids.endpointId : a.ids.endpointId;
    assert.throws(() => before.open(first.sealed, first.keyId, WEBHOOK.binding(other)));
    assert.notEqual(WEBHOOK.binding(first.id), first.id, 'webhook secrets are bound to more than the bare id');
  });
});
