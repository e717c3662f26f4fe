import assert from 'node:assert/strict';
import { parseCount } from '../../bot/format.js';
import { formatUsd as usd, parseUsd } from '../../src/modules/billing/money.js';
import { checkLimit, parseLimitArgs } from '../../bot/limits-dialogue.js';

describe('bot limit parsing', () => {
  it('reads dollar amounts as people type them, and nothing else', () => {
    assert.equal(parseUsd('5'), 500);
    assert.equal(parseUsd('$12.5'), 1250);
    assert.equal(parseUsd(' 12,50 '), 1250);
    assert.equal(parseUsd('USD 20'), 2000);
    assert.equal(parseUsd('20$'), 2000);
    for (const bad of ['', 'five', '-5', '5.001', '1e3', '0x10', '5 5', 'NaN', '∞', '１']) assert.equal(parseUsd(bad), null, bad);
    assert.equal(parseCount('3'), 3);
    for (const bad of ['1.5', '-1', 'two', '']) assert.equal(parseCount(bad), null, bad);
    assert.equal(usd(123456), '$1,234.56');
    assert.equal(usd(-5), '-$0.05');
  });

  it('holds every limit to the approval minimums of the API', () => {
    assert.deepEqual(checkLimit('perRental', 500), { ok: true, value: 500 });
    assert.equal(checkLimit('perRental', 499).ok, false);
    assert.equal(checkLimit('budget', 499).ok, false);
    assert.equal(checkLimit('concurrent', 0).ok, false);
    assert.deepEqual(checkLimit('concurrent', 1), { ok: true, value: 1 });
    assert.deepEqual(parseLimitArgs('5 50 1 my agent'), {
      limits: { maxPerRentalMinor: 500, budgetLimitMinor: 5000, maxConcurrentDeployments: 1 },
      name: 'my agent',
    });
    assert.equal(parseLimitArgs('  '), null);
    const bad = parseLimitArgs('5 4 1');
    assert.ok(bad && 'errors' in bad && bad.errors.length === 1 && /total cap must be at least \$5\.00/.test(bad.errors[0]));
  });
});
