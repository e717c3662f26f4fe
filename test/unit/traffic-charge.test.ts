import assert from 'node:assert/strict';
import { accrual } from '../../src/modules/rentals/lifecycle/metering.js';
import { trafficAccrual, trafficRef } from '../../src/modules/rentals/lifecycle/traffic.js';
import { customerTrafficPrice, trafficCostMinor, usdToMicro } from '../../src/providers/pricing.js';

const GB = 2 ** 30;

describe('traffic charges', () => {
  it('prices traffic per GB of 2^30 bytes, cumulative and rounded down to a cent', () => {
    const price = { upMicroUsdPerGb: 33_000, downMicroUsdPerGb: 11_000 };
    assert.equal(trafficCostMinor({ upBytes: 10 * GB, downBytes: 20 * GB }, price), 55);
    assert.equal(trafficCostMinor({ upBytes: GB - 1, downBytes: 0 }, price), 3, '3.29 cents is 3');
    assert.equal(trafficCostMinor({ upBytes: 0, downBytes: 0 }, price), 0);
    // Charging the growth of cumulative readings never drifts: the sum of the steps is the whole.
    let charged = 0;
    for (let mb = 0; mb <= 10_240; mb += 37) {
      charged += trafficCostMinor({ upBytes: mb * 2 ** 20, downBytes: 0 }, price) - charged;
    }
    assert.equal(charged, trafficCostMinor({ upBytes: 10_212 * 2 ** 20, downBytes: 0 }, price));
  });

  it('stays exact where bytes times millionths pass 2^53', () => {
    const petabyte = 2 ** 50;
    assert.equal(
      trafficCostMinor({ upBytes: petabyte, downBytes: 0 }, { upMicroUsdPerGb: 999_999, downMicroUsdPerGb: 0 }),
      // 2^20 GB at 0.999999 USD: 1,048,574 dollars and 95 cents (rounded down).
      104_857_495,
    );
  });

  it('reads sub-cent per-GB prices as whole millionths and marks them up with the hourly formula', () => {
    assert.equal(usdToMicro(0.00456), 4560);
    assert.equal(usdToMicro(0.03), 30_000);
    assert.deepEqual(customerTrafficPrice({ upMicroUsdPerGb: 4560, downMicroUsdPerGb: 1230 }, 10), {
      upMicroUsdPerGb: 5016,
      downMicroUsdPerGb: 1353,
    });
    assert.deepEqual(customerTrafficPrice({ upMicroUsdPerGb: 1, downMicroUsdPerGb: 0 }, 0.01), {
      upMicroUsdPerGb: 2,
      downMicroUsdPerGb: 0,
    });
  });

  it('keeps time and traffic together within the spend cap', () => {
    const d = {
      trafficUpPriceMicro: 33_000,
      trafficDownPriceMicro: 0,
      trafficUpBytes: 1000 * GB,
      trafficDownBytes: 0,
      trafficMinor: 0,
      spendCapMinor: 500,
    };
    assert.equal(trafficAccrual(d, 120), 380, 'what the cap leaves beside the time charged');
    assert.equal(trafficAccrual({ ...d, trafficMinor: 380 }, 120), 0);
    assert.equal(trafficAccrual({ ...d, trafficMinor: 380 }, 200), 0, 'never negative once time takes more of the cap');
    assert.equal(trafficAccrual({ ...d, spendCapMinor: null }, 120), 3300, '1000 GB at 3.3 cents');
    assert.equal(
      trafficAccrual({ ...d, trafficUpPriceMicro: null, trafficDownPriceMicro: null }, 0),
      0,
      'free traffic is never charged',
    );
    // And time's share of the cap is what traffic left it.
    const startedAt = new Date(0);
    const time = accrual(
      {
        startedAt,
        meteredUntil: startedAt,
        usageMinor: 0,
        hourlyPriceMinor: 3600,
        spendCapMinor: 500,
        endsAt: null,
        terminateRequestedAt: null,
        trafficMinor: 450,
      },
      3600_000,
    );
    assert.equal(time.amount, 50);
  });

  it('gives each traffic posting of a deployment its own reference', () => {
    assert.notEqual(trafficRef('d', 55), trafficRef('d', 58));
    assert.equal(trafficRef('d', 55), 'traffic:d:55');
  });
});
