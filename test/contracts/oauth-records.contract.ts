import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Store } from '../../src/db/store.js';
import type { OAuthRecord, OAuthRecordsRepository } from '../../src/modules/oauth/oauth-records.repository.js';

type OAuthStore = Store<{ oauth: OAuthRecordsRepository }>;

/** A time on the server's precision (milliseconds). */
const at = (offsetMs: number) => new Date(Date.UTC(2026, 11, 1, 12, 0, 0) + offsetMs);
const hash = () => randomBytes(32).toString('hex');

function record(o: Partial<Omit<OAuthRecord, 'consumedAt'>> = {}): Omit<OAuthRecord, 'consumedAt'> {
  return {
    model: 'AccessToken',
    idHash: hash(),
    grantHash: null,
    uidHash: null,
    userCodeHash: null,
    payload: randomBytes(40),
    keyId: 'k1',
    expiresAt: at(60_000),
    ...o,
  };
}

/**
 * What every store's authorization-server records do, run on MariaDB (test/store/) and on the
 * memory store (test/unit/). Each test writes records of hashes of its own.
 */
export function oauthRecordsContract(kind: string, makeStore: () => Promise<OAuthStore>): void {
  describe(`OAuth records repository (${kind})`, () => {
    let store: OAuthStore;
    before(async () => (store = await makeStore()));
    const r = <T>(fn: (o: OAuthRecordsRepository) => Promise<T>) => store.read((repos) => fn(repos.oauth));

    it('reads a record back by id, uid and user code until it expires, and never after', async () => {
      const rec = record({ model: 'Interaction', uidHash: hash(), userCodeHash: hash() });
      await r((o) => o.upsert(rec));
      const read = await r((o) => o.find('Interaction', rec.idHash, at(0)));
      assert.deepEqual(read, { ...rec, consumedAt: null });
      assert.deepEqual(await r((o) => o.findByUid('Interaction', rec.uidHash!, at(0))), read);
      assert.deepEqual(await r((o) => o.findByUserCode('Interaction', rec.userCodeHash!, at(0))), read);
      assert.equal(await r((o) => o.find('Session', rec.idHash, at(0))), null, 'another model is another record');
      assert.equal(await r((o) => o.find('Interaction', rec.idHash, at(60_000))), null, 'expired at its time');
      const forever = record({ expiresAt: null });
      await r((o) => o.upsert(forever));
      assert.ok(await r((o) => o.find('AccessToken', forever.idHash, at(10 ** 12))));
    });

    it('replaces a record on upsert, keeping its consumption; consume, destroy', async () => {
      const rec = record({ model: 'RefreshToken' });
      await r((o) => o.upsert(rec));
      await r((o) => o.consume('RefreshToken', rec.idHash, at(1000)));
      const payload = randomBytes(12);
      await r((o) => o.upsert({ ...rec, payload, expiresAt: at(120_000) }));
      const read = await r((o) => o.find('RefreshToken', rec.idHash, at(90_000)));
      assert.deepEqual(read, { ...rec, payload, expiresAt: at(120_000), consumedAt: at(1000) });
      await r((o) => o.destroy('RefreshToken', rec.idHash));
      assert.equal(await r((o) => o.find('RefreshToken', rec.idHash, at(0))), null);
    });

    it('revokes every record of a grant, of any model, and no other', async () => {
      const grant = hash();
      const access = record({ grantHash: grant });
      const refresh = record({ model: 'RefreshToken', grantHash: grant });
      const other = record({ grantHash: hash() });
      for (const x of [access, refresh, other]) await r((o) => o.upsert(x));
      await r((o) => o.revokeByGrant(grant));
      assert.equal(await r((o) => o.find('AccessToken', access.idHash, at(0))), null);
      assert.equal(await r((o) => o.find('RefreshToken', refresh.idHash, at(0))), null);
      assert.ok(await r((o) => o.find('AccessToken', other.idHash, at(0))));
    });

    it('purges records expired before a time, a batch at a time', async () => {
      const old = [
        record({ expiresAt: at(-5000) }),
        record({ expiresAt: at(-4000) }),
        record({ expiresAt: at(-3000) }),
      ];
      const live = record({ expiresAt: at(10 ** 9) });
      for (const x of [...old, live]) await r((o) => o.upsert(x));
      let purged = 0;
      for (let n = -1; n !== 0;) purged += n = await r((o) => o.purgeExpired(at(-2000), 2));
      assert.ok(purged >= old.length, `${purged} purged`);
      for (const x of old) assert.equal(await r((o) => o.find('AccessToken', x.idHash, at(-10_000))), null);
      assert.ok(await r((o) => o.find('AccessToken', live.idHash, at(0))));
    });
  });
}
