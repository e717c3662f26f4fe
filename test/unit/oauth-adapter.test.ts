import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { SecretBox } from '../../src/modules/credentials/secret-box.js';
import { OAuthAdapter } from '../../src/modules/oauth/oauth-adapter.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

describe(OAuthAdapter.name, () => {
  const clock = { now: () => new Date(Date.UTC(2026, 11, 4, 12)) };
  const box = (id: string, key = randomBytes(32)) => new SecretBox(new Map([[id, key]]), id);

  it('stores no token value: ids only as hashes, payloads sealed; reads them back, consumed and all', async () => {
    const store = memoryStore();
    const sut = new OAuthAdapter('AccessToken', store, box('k1'), clock);
    const token = 'tok_' + randomBytes(24).toString('base64url');
    await sut.upsert(token, { jti: token, grantId: 'g1', accountId: 'key-1', exp: 1 }, 900);
    const rows = store.tables.table<{ idHash: string; payload: Buffer; grantHash: string }>('oauth_records').all();
    assert.equal(rows.length, 1);
    const stored = JSON.stringify(rows[0]) + Buffer.from(rows[0].payload).toString('latin1');
    assert.ok(!stored.includes(token) && !stored.includes('key-1') && !stored.includes('"g1"'), stored);
    assert.deepEqual(await sut.find(token), { jti: token, grantId: 'g1', accountId: 'key-1', exp: 1 });
    await sut.consume(token);
    assert.equal((await sut.find(token))!.consumed, Math.floor(clock.now().getTime() / 1000));
    await sut.revokeByGrantId('g1');
    assert.equal(await sut.find(token), undefined);
  });

  it('answers a record it cannot open (sealed under a key no longer configured) as absent', async () => {
    const store = memoryStore();
    await new OAuthAdapter('Grant', store, box('old'), clock).upsert('grant-1', { accountId: 'k' }, 60);
    assert.equal(await new OAuthAdapter('Grant', store, box('new'), clock).find('grant-1'), undefined);
  });

  it('keeps models apart and honours expiry by the clock', async () => {
    const store = memoryStore();
    const sealing = box('k1');
    await new OAuthAdapter('Session', store, sealing, clock).upsert('same-id', { uid: 'u1' }, 60);
    assert.equal(await new OAuthAdapter('Interaction', store, sealing, clock).find('same-id'), undefined);
    assert.deepEqual(await new OAuthAdapter('Session', store, sealing, clock).findByUid('u1'), { uid: 'u1' });
    const later = { now: () => new Date(clock.now().getTime() + 61_000) };
    assert.equal(await new OAuthAdapter('Session', store, sealing, later).find('same-id'), undefined);
  });
});
