import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  centsLookingPrice,
  dollarsToCents,
  formatUsd,
  formatUsdAmount,
  formatUsdPerGb,
  formatUsdShort,
  notDollarsMessage,
  parseUsd,
  parseUsdPerGb,
  usdDecimal,
} from '../../src/vocabulary/money.js';
import { formatCents, dollarsToCents as sdkDollarsToCents } from '../../clients/sdk/src/index.js';

/** Every .ts file under `dir`, generated code left out. */
function sources(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.includes('generated'))
    .map((f) => join(dir, f));
}

describe('money (one module formats and parses dollars for the service, the bot and the clients)', () => {
  const formats: [minor: number, usd: string, short: string, amount: string, decimal: string][] = [
    [0, '$0.00', '$0', '0.00', '0.00'],
    [7, '$0.07', '$0.07', '0.07', '0.07'],
    [-5, '-$0.05', '-$0.05', '-0.05', '-0.05'],
    [500, '$5.00', '$5', '5.00', '5.00'],
    [1250, '$12.50', '$12.50', '12.50', '12.50'],
    [2000, '$20.00', '$20', '20.00', '20.00'],
    [123456, '$1,234.56', '$1,234.56', '1,234.56', '1234.56'],
    [100_000_00, '$100,000.00', '$100,000', '100,000.00', '100000.00'],
    [-123456, '-$1,234.56', '-$1,234.56', '-1,234.56', '-1234.56'],
  ];
  for (const [minor, usd, short, amount, decimal] of formats) {
    it(`writes ${minor} cents as ${usd} (${short} on a button, ${decimal} to type back)`, () => {
      assert.equal(formatUsd(minor), usd);
      assert.equal(formatUsdShort(minor), short);
      assert.equal(formatUsdAmount(minor), amount);
      assert.equal(usdDecimal(minor), decimal);
    });
  }

  it("is the SDK's formatCents too: the clients print what the service prints", () => {
    for (const [minor, usd] of formats) assert.equal(formatCents(minor), usd);
  });

  const typed: [text: string, cents: number][] = [
    ['20', 2000],
    ['20.5', 2050],
    ['20.50', 2050],
    ['$20', 2000],
    ['20$', 2000],
    ['20 USD', 2000],
    ['20 usd', 2000],
    ['USD 20', 2000],
    ['US$ 20', 2000],
    ['$ 7', 700],
    [' 12.5 ', 1250],
    ['0.07', 7],
    ['1,234.50', 123450],
    ['1,234', 123400],
    ['$1,234,567.89', 123456789],
    ['12,5', 1250],
    ['12,50', 1250],
    ['0,5', 50],
    ['1,23', 123],
    ['999999999.99', 99999999999],
  ];
  for (const [text, cents] of typed) {
    it(`reads "${text}" as ${cents} cents`, () => {
      assert.equal(parseUsd(text), cents);
      assert.equal(dollarsToCents(text), cents);
    });
  }

  const refused = [
    '',
    ' ',
    'five',
    '-5',
    '+5',
    '5.001',
    '5.',
    '.5',
    '1e3',
    '0x10',
    '5 5',
    'NaN',
    'Infinity',
    '12,345,6',
    '1,2345',
    '12,3456',
    '1.234,50',
    '12,5.0',
    '1,23,456',
    '$$5',
    '5 EUR',
    '1234567890',
  ];
  for (const text of refused) {
    it(`refuses "${text}" with the one hint`, () => {
      assert.equal(parseUsd(text), null);
      assert.throws(
        () => dollarsToCents(text),
        (e: unknown) =>
          e instanceof RangeError &&
          e.message === `${notDollarsMessage(text)}.` &&
          /write dollars like 12\.50/.test(e.message),
      );
    });
  }

  it('takes numbers too, as gpr passes them, by the same rule', () => {
    assert.equal(dollarsToCents(3.5), 350);
    assert.equal(sdkDollarsToCents('12,5'), 1250);
    assert.throws(() => dollarsToCents(1e21), RangeError);
  });

  it('warns of an hourly price that looks typed in cents, and only then', () => {
    const table: [text: string, warning: string | null][] = [
      [
        '350',
        '--max-price 350 is $350.00 an hour: amounts are in dollars. If you meant 350 cents, pass --max-price 3.50.',
      ],
      [
        '$1200',
        '--max-price 1200 is $1,200.00 an hour: amounts are in dollars. If you meant 1200 cents, pass --max-price 12.00.',
      ],
      [
        '1,200',
        '--max-price 1200 is $1,200.00 an hour: amounts are in dollars. If you meant 1200 cents, pass --max-price 12.00.',
      ],
      ['3', null],
      ['99', null],
      ['3.50', null],
      ['150.00', null],
      ['150,5', null],
      ['2.5', null],
      ['lots', null],
    ];
    for (const [text, warning] of table) assert.equal(centsLookingPrice('--max-price', text), warning, text);
  });

  it('is the only place in the service and the bot that turns cents into dollars or back', () => {
    // pricing.ts turns providers' floating prices into cents for the inventory, not for people.
    const allowed = new Set([join('src', 'vocabulary', 'money.ts'), join('src', 'providers', 'pricing.ts')]);
    const offenders: string[] = [];
    for (const file of [...sources('src'), ...sources('bot'), ...sources(join('clients', 'sdk', 'src'))]) {
      if (allowed.has(file)) continue;
      const text = readFileSync(file, 'utf8');
      // toFixed(2) or a division by 100 makes dollars; "* 100 +" makes cents.
      if (/toFixed\(2\)|\/ 100\b(?!0)|\* 100 \+/.test(text)) offenders.push(file);
    }
    assert.deepEqual(offenders, []);
  });
});

describe('per-GB traffic prices typed by people', () => {
  it('reads USD per GB with up to six decimals as whole millionths, and writes them back', () => {
    assert.equal(parseUsdPerGb('0.05'), 50_000);
    assert.equal(parseUsdPerGb(' $0.00456 '), 4560);
    assert.equal(parseUsdPerGb('0'), 0);
    for (const bad of ['-1', '0.0000001', '1e-2', '0,05', '.05', 'free', '10000'])
      assert.equal(parseUsdPerGb(bad), null, bad);
    assert.equal(formatUsdPerGb(33_000), '$0.033/GB');
    assert.equal(formatUsdPerGb(1_500_000), '$1.5/GB');
    assert.equal(formatUsdPerGb(0), 'free');
  });
});
