import assert from 'node:assert/strict';
import { customerPriceMinor, usdToCentsCeil } from '../../src/providers/pricing.js';
import { parseRetryAfter, SharedRead } from '../../src/providers/provider-http.js';

describe('ProviderHttpClient: Retry-After', () => {
  it('reads Retry-After as seconds or as an HTTP date', () => {
    assert.equal(parseRetryAfter('3', 0), 3000);
    assert.equal(parseRetryAfter(new Date(10_000).toUTCString(), 4_000), 6000);
    assert.equal(parseRetryAfter('soon', 0), undefined);
    assert.equal(parseRetryAfter(null, 0), undefined);
  });
});

describe('SharedRead', () => {
  it('serves concurrent and repeated reads from one load within the TTL, and reloads after it or after invalidate', async () => {
    let t = 0;
    let loads = 0;
    const sut = new SharedRead(
      async () => ++loads,
      1000,
      () => t,
    );
    assert.deepEqual(await Promise.all([sut.get(), sut.get(), sut.get()]), [1, 1, 1]);
    t = 999;
    assert.equal(await sut.get(), 1);
    t = 1000;
    assert.equal(await sut.get(), 2);
    sut.invalidate();
    assert.equal(await sut.get(), 3);
  });

  it('does not cache a failure', async () => {
    let fail = true;
    const sut = new SharedRead(async () => {
      if (fail) throw new Error('down');
      return 'ok';
    }, 60_000);
    await assert.rejects(sut.get(), /down/);
    fail = false;
    assert.equal(await sut.get(), 'ok');
  });
});

describe('pricing', () => {
  it('rounds float USD up to whole cents without float noise', () => {
    assert.equal(usdToCentsCeil(0.35), 35);
    assert.equal(usdToCentsCeil(2.1), 210);
    assert.equal(usdToCentsCeil(0.3512), 36);
    assert.equal(usdToCentsCeil(2.39 * 8), 1912);
    assert.equal(usdToCentsCeil(0), 0);
    assert.throws(() => usdToCentsCeil(-1), RangeError);
    assert.throws(() => usdToCentsCeil(Number.NaN), RangeError);
  });

  it('applies the markup to the cost and rounds up to a whole cent', () => {
    assert.equal(customerPriceMinor(210, 0), 210);
    assert.equal(customerPriceMinor(210, 15), 242); // 241.5 -> 242
    assert.equal(customerPriceMinor(329, 12.5), 371); // 370.125 -> 371
    assert.equal(customerPriceMinor(100, 10), 110); // exact: no spurious extra cent
    assert.equal(customerPriceMinor(35, 0.01), 36);
    assert.throws(() => customerPriceMinor(1.5, 0), RangeError);
  });
});
