import assert from 'node:assert/strict';
import { parseCount } from '../../bot/format.js';
import { formatUsd as usd, parseUsd } from '../../src/vocabulary/money.js';
import {
  checkIdleMinutes,
  checkLimit,
  checkRentalLength,
  describeIdleMinutes,
  parseIdleMinutes,
} from '../../bot/limits-dialogue.js';
import { parseLimitArgs } from '../../bot/limit-args.js';
import { parseRentalLength } from '../../src/modules/keys/rental-length.js';

describe('bot limit parsing', () => {
  it('reads dollar amounts as people type them, and nothing else', () => {
    assert.equal(parseUsd('5'), 500);
    assert.equal(parseUsd('$12.5'), 1250);
    assert.equal(parseUsd(' 12,50 '), 1250);
    assert.equal(parseUsd('USD 20'), 2000);
    assert.equal(parseUsd('20$'), 2000);
    for (const bad of ['', 'five', '-5', '5.001', '1e3', '0x10', '5 5', 'NaN', '∞', '１'])
      assert.equal(parseUsd(bad), null, bad);
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
      limits: {
        maxPerRentalMinor: 500,
        budgetLimitMinor: 5000,
        maxConcurrentDeployments: 1,
        maxRentalSeconds: null,
        idleTerminateMinutes: null,
      },
      name: 'my agent',
    });
    assert.equal(parseLimitArgs('  '), null);
    const bad = parseLimitArgs('5 4 1');
    assert.ok(
      bad && 'errors' in bad && bad.errors.length === 1 && /total cap must be at least \$5\.00/.test(bad.errors[0]),
    );
  });

  it('reads a longest rental with its unit, "none" for no limit, and holds it to the API\'s bounds', () => {
    assert.equal(parseRentalLength('8h'), 8 * 3600);
    assert.equal(parseRentalLength('90m'), 5400);
    assert.equal(parseRentalLength('1h 30m'), 5400);
    assert.equal(parseRentalLength('1.5 hours'), 5400);
    assert.equal(parseRentalLength('2 days'), 2 * 86_400);
    assert.equal(parseRentalLength('None'), null);
    for (const bad of ['8', '', 'h', '8 hx', 'soon', '-1h', '1h-', '30s'])
      assert.equal(parseRentalLength(bad), undefined, bad);
    assert.deepEqual(checkRentalLength(60), { ok: true, value: 60 });
    assert.deepEqual(checkRentalLength(null), { ok: true, value: null });
    assert.equal(checkRentalLength(59).ok, false);
    assert.equal(checkRentalLength(30 * 86_400 + 1).ok, false);
    assert.equal(checkRentalLength(undefined).ok, false);
  });

  it('takes an optional longest rental as the fourth word of the one-line form, before the name', () => {
    assert.deepEqual(parseLimitArgs('5 50 1 8h my agent'), {
      limits: {
        maxPerRentalMinor: 500,
        budgetLimitMinor: 5000,
        maxConcurrentDeployments: 1,
        maxRentalSeconds: 8 * 3600,
        idleTerminateMinutes: null,
      },
      name: 'my agent',
    });
    assert.deepEqual(parseLimitArgs('5 50 1 2d'), {
      limits: {
        maxPerRentalMinor: 500,
        budgetLimitMinor: 5000,
        maxConcurrentDeployments: 1,
        maxRentalSeconds: 2 * 86_400,
        idleTerminateMinutes: null,
      },
      name: undefined,
    });
    const bad = parseLimitArgs('5 50 1 31d trainer');
    assert.ok(
      bad &&
        'errors' in bad &&
        bad.errors.length === 1 &&
        /longest rental must be from 1 minute to 30 days; you sent 31 days/.test(bad.errors[0]),
      JSON.stringify(bad),
    );
  });

  it('reads idle minutes as a bare number or a length, "none" for never, and holds them to the API\'s bounds', () => {
    assert.equal(parseIdleMinutes('45'), 45);
    assert.equal(parseIdleMinutes('30m'), 30);
    assert.equal(parseIdleMinutes('1h 30m'), 90);
    assert.equal(parseIdleMinutes('2 hours'), 120);
    assert.equal(parseIdleMinutes('none'), null);
    for (const bad of ['', 'soon', '-5', '5x']) assert.equal(parseIdleMinutes(bad), undefined, bad);
    assert.deepEqual(checkIdleMinutes(1), { ok: true, value: 1 });
    assert.deepEqual(checkIdleMinutes(1440), { ok: true, value: 1440 });
    assert.deepEqual(checkIdleMinutes(null), { ok: true, value: null });
    assert.match((checkIdleMinutes(0) as { error: string }).error, /from 1 min to 24 h; you sent 0 min/);
    assert.match((checkIdleMinutes(1441) as { error: string }).error, /you sent 24 h 1 min/);
    assert.match((checkIdleMinutes(parseIdleMinutes('1.5m')) as { error: string }).error, /whole minutes/);
    assert.equal(checkIdleMinutes(undefined).ok, false);
    assert.deepEqual([15, 60, 90, 1440].map(describeIdleMinutes), ['15 min', '1 h', '1 h 30 min', '24 h']);
  });

  it('takes an optional idle time as "idle <minutes>" in the one-line form, before or after the longest rental', () => {
    const limits = { maxPerRentalMinor: 500, budgetLimitMinor: 5000, maxConcurrentDeployments: 1 };
    assert.deepEqual(parseLimitArgs('5 50 1 8h idle 30m my agent'), {
      limits: { ...limits, maxRentalSeconds: 8 * 3600, idleTerminateMinutes: 30 },
      name: 'my agent',
    });
    assert.deepEqual(parseLimitArgs('5 50 1 idle 45 8h'), {
      limits: { ...limits, maxRentalSeconds: 8 * 3600, idleTerminateMinutes: 45 },
      name: undefined,
    });
    assert.deepEqual(parseLimitArgs('5 50 1 idle 2h'), {
      limits: { ...limits, maxRentalSeconds: null, idleTerminateMinutes: 120 },
      name: undefined,
    });
    assert.deepEqual(parseLimitArgs('5 50 1 idle watcher'), {
      limits: { ...limits, maxRentalSeconds: null, idleTerminateMinutes: null },
      name: 'idle watcher',
    });
    const bad = parseLimitArgs('5 50 1 idle 2d trainer');
    assert.ok(
      bad &&
        'errors' in bad &&
        bad.errors.length === 1 &&
        /idle time must be from 1 min to 24 h; you sent 48 h/.test(bad.errors[0]),
      JSON.stringify(bad),
    );
  });
});
