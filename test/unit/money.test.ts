import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatUsd, formatUsdAmount, formatUsdShort, parseUsd, usdDecimal } from '../../src/modules/billing/money.js';

/** Every .ts file under `dir`, generated code left out. */
function sources(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.includes('generated'))
    .map((f) => join(dir, f));
}

describe('money (the service formats and parses dollars in one module)', () => {
  it('formats cents for people, for buttons and for machine-read fields', () => {
    assert.deepEqual([500, 123456, -5, 0].map(formatUsd), ['$5.00', '$1,234.56', '-$0.05', '$0.00']);
    assert.deepEqual([2000, 1250, 100_000_00].map(formatUsdShort), ['$20', '$12.50', '$100,000']);
    assert.equal(formatUsdAmount(1250), '12.50');
    assert.deepEqual([123456, 500, 7].map(usdDecimal), ['1234.56', '5.00', '0.07']);
  });

  it('parses dollars as people type them into cents, and nothing else', () => {
    assert.deepEqual(
      ['5', '$12.5', ' 12,50 ', 'USD 20', '20$', '$ 7'].map(parseUsd),
      [500, 1250, 1250, 2000, 2000, 700],
    );
    for (const bad of ['', 'five', '-5', '5.001', '1e3', '0x10', '5 5', 'NaN', '1234567890'])
      assert.equal(parseUsd(bad), null, bad);
  });

  it('is the only place in the service and the bot that turns cents into dollars or back', () => {
    // pricing.ts turns providers' floating prices into cents for the inventory, not for people.
    const allowed = new Set([join('src', 'modules', 'billing', 'money.ts'), join('src', 'providers', 'pricing.ts')]);
    const offenders: string[] = [];
    for (const file of [...sources('src'), ...sources('bot')]) {
      if (allowed.has(file)) continue;
      const text = readFileSync(file, 'utf8');
      // toFixed(2) or a division by 100 makes dollars; "* 100 +" makes cents; the SDK's copy is for clients.
      if (/toFixed\(2\)|\/ 100\b(?!0)|\* 100 \+|clients\/sdk\/src\/money/.test(text)) offenders.push(file);
    }
    assert.deepEqual(offenders, []);
  });
});
