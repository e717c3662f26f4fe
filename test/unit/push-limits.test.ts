import assert from 'node:assert/strict';
import { openFileLimit, pushCeiling, PushLimits } from '../../src/http/push-limits.js';

describe('push limits: the bounds', () => {
  it('reads the soft open-file limit where /proc says it, and none where it cannot', () => {
    const limits =
      'Limit                     Soft Limit           Hard Limit           Units     \nMax open files            20000                524288               files     \n';
    assert.equal(
      openFileLimit(() => limits),
      20000,
    );
    assert.equal(
      openFileLimit(() => limits.replace('20000 ', 'unlimited ')),
      Number.POSITIVE_INFINITY,
    );
    assert.equal(
      openFileLimit(() => {
        throw new Error('ENOENT');
      }),
      null,
    );
    const own = openFileLimit();
    assert.ok(own === null || own > 0);
  });

  it('keeps the ceiling below the file limit, with room for everything else', () => {
    assert.deepEqual(
      pushCeiling(undefined, 20_000),
      { open: 4096, lowered: false },
      'the audit machine: 4096 of 20,000 files',
    );
    assert.deepEqual(pushCeiling(undefined, 1024), { open: 512, lowered: false });
    assert.deepEqual(pushCeiling(undefined, null), { open: 512, lowered: false }, 'unreadable: the usual 1024 assumed');
    assert.deepEqual(pushCeiling(undefined, Number.POSITIVE_INFINITY), { open: 4096, lowered: false });
    assert.deepEqual(
      pushCeiling(20_000, 20_000),
      { open: 19_744, lowered: true },
      'a configured ceiling at the file limit is lowered',
    );
    assert.deepEqual(pushCeiling(100, 20_000), { open: 100, lowered: false });
    assert.deepEqual(pushCeiling(undefined, 200), { open: 1, lowered: false });
  });

  it('leaves no entry behind once every place is given back, and a release counts once', () => {
    const sut = new PushLimits({ perKey: 2, perAddress: 2, open: 3 });
    const a = sut.enterAddress('::ffff:10.0.0.1');
    const b = sut.enterAddress('10.0.0.1');
    assert.throws(
      () => sut.enterAddress('10.0.0.1'),
      /This address already holds 2/,
      'an IPv4-mapped address is the same address',
    );
    const c = sut.enterAddress('2001:db8::1');
    assert.throws(() => sut.enterAddress('2001:db8:1::1'), /This server holds/);
    const k = sut.enterKey('k');
    k();
    k();
    assert.equal(sut.listeners, 0);
    [a, b, c].forEach((r) => r());
    a();
    assert.deepEqual([sut.open, sut.tracked.keys, sut.tracked.addresses], [0, 0, 0]);
  });
});
