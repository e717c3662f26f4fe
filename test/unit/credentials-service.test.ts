import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { ManualClock } from '../../src/clock.js';
import type { Store } from '../../src/db/store.js';
import { AppError } from '../../src/errors/app-error.js';
import type { CredentialReveal } from '../../src/modules/credentials/credential-reveal.entity.js';
import type { CredentialsRepository } from '../../src/modules/credentials/credentials.repository.js';
import { CredentialsService, sshCommand } from '../../src/modules/credentials/credentials.service.js';
import { SecretBox } from '../../src/modules/credentials/secret-box.js';
import type { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import type { Principal } from '../../src/modules/keys/principal.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import type { RentalStatus } from '../../src/vocabulary/statuses.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

const PRIVATE_KEY = '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n-----END OPENSSH PRIVATE KEY-----';

const principal = (accountId: string, kind: 'AGENT' | 'OWNER' = 'AGENT', keyId = randomUUID()): Principal => ({
  accountId,
  keyId,
  kind,
  scopes: ['read', 'rent'],
  key: {} as ApiKey,
});

/** The error `p` rejects with, which must be an AppError. */
async function refusal(p: Promise<unknown>): Promise<AppError> {
  const err = await p.then(
    () => assert.fail('expected a refusal'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof AppError, String(err));
  return err;
}

describe('CredentialsService (memory store)', () => {
  let store: ReturnType<typeof memoryStore>;
  let clock: ManualClock;
  let box: SecretBox;
  let sut: CredentialsService;
  let agent: Principal;

  beforeEach(() => {
    store = memoryStore();
    clock = new ManualClock(new Date('2026-05-01T12:00:30.250Z'));
    box = new SecretBox(new Map([['k1', randomBytes(32)]]), 'k1');
    sut = new CredentialsService(store, clock, box);
    agent = principal(randomUUID());
  });

  /** A deployment of `who`'s key, as the rentals aggregate keeps it; ACTIVE with its SSH access unless told otherwise. */
  function deployment(who: Principal, o: Partial<Deployment> = {}): Deployment {
    const id = o.id ?? randomUUID();
    const sealed = box.seal(PRIVATE_KEY, id);
    const d = Object.assign(new Deployment(), {
      id,
      orderId: randomUUID(),
      accountId: who.accountId,
      keyId: who.keyId,
      status: 'ACTIVE' as RentalStatus,
      phase: null,
      sshHost: '203.0.113.7',
      sshPort: 2222,
      sshUser: 'ubuntu',
      sshPublicKey: 'ssh-ed25519 AAAA test',
      sshPrivateKeyEnc: sealed.ciphertext,
      sshKeyKid: sealed.keyId,
      ...o,
    });
    store.tables.table<Deployment>('deployments').put(d.id, d);
    return d;
  }

  const audit = (keyId: string): Promise<CredentialReveal[]> => store.read((r) => r.credentials.reveals.ofKey(keyId));

  it('opens the private key of an ACTIVE deployment for the key that made it, with a ready ssh command', async () => {
    const d = deployment(agent);
    const dto = await sut.reveal(agent, d.id, 'req-1');
    const keyFile = `gpr-${d.id.slice(0, 8)}.key`;
    assert.deepEqual(dto, {
      deploymentId: d.id,
      host: '203.0.113.7',
      port: 2222,
      user: 'ubuntu',
      privateKey: PRIVATE_KEY,
      publicKey: 'ssh-ed25519 AAAA test',
      privateKeyFile: keyFile,
      sshCommand: sshCommand(keyFile, 'ubuntu', '203.0.113.7', 2222),
      revealedAt: '2026-05-01T12:00:30.250Z',
    });
    assert.match(dto.sshCommand, /^ssh -i gpr-\w{8}\.key -p 2222 -o IdentitiesOnly=yes .* ubuntu@203\.0\.113\.7$/);
    const rows = await audit(agent.keyId);
    assert.deepEqual(
      rows.map((r) => [r.outcome, r.deploymentId, r.accountId, r.requestId, r.calledAt.toISOString()]),
      [['REVEALED', d.id, agent.accountId, 'req-1', '2026-05-01T12:00:30.250Z']],
    );
  });

  it("reveals by the rental's id too, and to the account's owner key", async () => {
    const d = deployment(agent);
    assert.equal((await sut.reveal(agent, d.orderId, 'req-1')).deploymentId, d.id);
    const owner = principal(agent.accountId, 'OWNER');
    assert.equal((await sut.reveal(owner, d.id, 'req-2')).privateKey, PRIVATE_KEY);
    assert.equal((await audit(owner.keyId))[0].outcome, 'REVEALED');
  });

  it('answers NOT_FOUND for a deployment another key of the account made, or another account, and audits it', async () => {
    const d = deployment(agent);
    const sibling = principal(agent.accountId);
    const stranger = principal(randomUUID(), 'OWNER');
    for (const who of [sibling, stranger]) {
      for (const id of [d.id, d.orderId]) {
        const err = await refusal(sut.reveal(who, id, 'req-x'));
        assert.deepEqual([err.code, err.status], ['NOT_FOUND', 404]);
      }
      const rows = await audit(who.keyId);
      assert.deepEqual(
        rows.map((r) => [r.outcome, r.refusal, r.refusedCalls]),
        [['REFUSED', 'NOT_FOUND', 2]],
      );
    }
    assert.deepEqual(await audit(agent.keyId), []);
  });

  it('refuses a starting deployment as DEPLOYMENT_NOT_ACTIVE with Retry-After, audited under the deployment id', async () => {
    const d = deployment(agent, { status: 'PROVISIONING', phase: 'booting', sshHost: null });
    const err = await refusal(sut.reveal(agent, d.orderId, 'req-1'));
    assert.deepEqual([err.code, err.status], ['DEPLOYMENT_NOT_ACTIVE', 409]);
    assert.deepEqual(err.headers, { 'Retry-After': '10' });
    assert.match(err.message, new RegExp(`${d.id} is PROVISIONING`));
    const [row] = await audit(agent.keyId);
    assert.deepEqual([row.refusal, row.deploymentId], ['NOT_ACTIVE', d.id]);
  });

  it('refuses a finished deployment without Retry-After, and an ACTIVE one whose SSH access is not recorded yet', async () => {
    const ended = deployment(agent, { status: 'TERMINATED' });
    const ended409 = await refusal(sut.reveal(agent, ended.id, 'req-1'));
    assert.equal(ended409.code, 'DEPLOYMENT_NOT_ACTIVE');
    assert.deepEqual(ended409.headers, {});
    for (const missing of [{ sshUser: null }, { sshPort: null }, { sshPrivateKeyEnc: null }, { sshKeyKid: null }]) {
      const d = deployment(agent, missing);
      assert.equal((await refusal(sut.reveal(agent, d.id, 'req-2'))).code, 'DEPLOYMENT_NOT_ACTIVE');
    }
    assert.deepEqual(
      (await audit(agent.keyId)).map((r) => r.refusedCalls),
      [5],
    );
  });

  it('reveals nothing and audits an ERROR when the key cannot be opened', async () => {
    const other = box.seal(PRIVATE_KEY, 'another-row');
    const d = deployment(agent, { sshPrivateKeyEnc: other.ciphertext });
    await assert.rejects(sut.reveal(agent, d.id, 'req-1'), (e: unknown) => !(e instanceof AppError));
    assert.deepEqual(
      (await audit(agent.keyId)).map((r) => [r.outcome, r.refusal]),
      [['REFUSED', 'ERROR']],
    );
  });

  it('counts refusals of one key and reason within a minute on one row, and starts a row each minute', async () => {
    for (let i = 0; i < 3; i++) await sut.recordRefusal(agent, randomUUID(), `req-${i}`, 'NOT_FOUND');
    clock.advance(29_750);
    await sut.recordRefusal(agent, randomUUID(), 'req-3', 'NOT_FOUND');
    await sut.recordRefusal(agent, randomUUID(), 'req-4', 'JSON_BODY');
    const rows = await audit(agent.keyId);
    assert.deepEqual(
      rows.map((r) => [r.refusal, r.refusedCalls, r.refusalWindow?.toISOString(), r.requestId]),
      [
        ['NOT_FOUND', 3, '2026-05-01T12:00:00.000Z', 'req-0'],
        ['NOT_FOUND', 1, '2026-05-01T12:01:00.000Z', 'req-3'],
        ['JSON_BODY', 1, '2026-05-01T12:01:00.000Z', 'req-4'],
      ],
    );
  });

  it('cuts the ids an audit row keeps to their columns', async () => {
    await sut.recordRefusal(agent, 'd'.repeat(100), 'r'.repeat(300), 'NOT_FOUND');
    const [row] = await audit(agent.keyId);
    assert.deepEqual([row.deploymentId.length, row.requestId.length], [64, 128]);
  });

  it('writes one audit row when its transaction loses its commit once and runs again', async () => {
    const d = deployment(agent);
    store.loseNextCommits(1);
    const attempts = store.attempts;
    assert.equal((await sut.reveal(agent, d.id, 'req-1')).privateKey, PRIVATE_KEY);
    assert.equal(store.attempts - attempts, 2);
    assert.equal((await audit(agent.keyId)).length, 1);
  });

  it('keeps its answer when the audit of a refusal cannot be written', async () => {
    const failing: Store<{ credentials: CredentialsRepository }> = {
      read: () => Promise.reject(new Error('the database is gone')),
      transaction: (fn, options) => store.transaction(fn, options),
      pipelined: (fn) => store.pipelined(fn),
    };
    const service = new CredentialsService(failing, clock, box);
    await service.recordRefusal(agent, randomUUID(), 'req-1', 'NOT_FOUND');
    assert.equal((await refusal(service.reveal(agent, randomUUID(), 'req-2'))).code, 'NOT_FOUND');
  });
});
