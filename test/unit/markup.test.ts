import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../src/config.js';
import { customerPriceMinor } from '../../src/providers/pricing.js';

describe('markup configuration', () => {
  it('reads PRICE_MARKUP_PERCENT for every provider and <ID>_PROVIDER_MARKUP_PERCENT for one, not as a plugin option', () => {
    const c = loadConfig({
      PROVIDERS: 'local,vast',
      PRICE_MARKUP_PERCENT: '7.25',
      VAST_PROVIDER_MARKUP_PERCENT: '0',
      VAST_PROVIDER_API_KEY: 'k',
    });
    assert.deepEqual(c.providers, [
      { id: 'local', options: {}, markupPercent: 7.25 },
      { id: 'vast', options: { API_KEY: 'k' }, markupPercent: 0 },
    ]);
  });

  it('refuses markups that are negative, above 1000 or finer than a hundredth of a percent', () => {
    for (const [name, value] of [
      ['PRICE_MARKUP_PERCENT', '-5'],
      ['PRICE_MARKUP_PERCENT', '1000.01'],
      ['PRICE_MARKUP_PERCENT', '12.345'],
      ['PRICE_MARKUP_PERCENT', 'ten'],
      ['LOCAL_PROVIDER_MARKUP_PERCENT', '5%'],
    ]) {
      assert.throws(
        () => loadConfig({ [name]: value }),
        (e: Error) => e instanceof ConfigError && e.message.startsWith(name),
        `${name}=${value}`,
      );
    }
    assert.equal(loadConfig({ PRICE_MARKUP_PERCENT: '1000' }).providers[0].markupPercent, 1000);
  });

  it('defaults OFFER_MAX_AGE_SECONDS to ten minutes and keeps it above the refresh period', () => {
    assert.equal(loadConfig({}).inventory.offerMaxAgeSeconds, 600);
    assert.equal(loadConfig({ OFFER_MAX_AGE_SECONDS: '120' }).inventory.offerMaxAgeSeconds, 120);
    assert.throws(
      () => loadConfig({ OFFER_MAX_AGE_SECONDS: '30' }),
      /^ConfigError: OFFER_MAX_AGE_SECONDS|OFFER_MAX_AGE_SECONDS/,
    );
    assert.throws(() => loadConfig({ OFFER_MAX_AGE_SECONDS: 'soon' }), /OFFER_MAX_AGE_SECONDS/);
  });
});

describe(customerPriceMinor.name, () => {
  it('never charges less than the cost, and at most one cent above the exact markup', () => {
    for (const markup of [0, 0.01, 5, 12.5, 33.33, 100, 1000]) {
      for (let cost = 0; cost <= 5000; cost += 7) {
        const price = customerPriceMinor(cost, markup);
        const exact = (cost * (100 + markup)) / 100;
        assert.ok(
          Number.isSafeInteger(price) && price >= cost && price >= exact - 1e-9 && price < exact + 1,
          `${cost} at ${markup}%: ${price}`,
        );
      }
    }
  });
});
