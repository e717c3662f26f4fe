/**
 * Money as people read and type it, once for the service, the bot and the clients: every page,
 * form, bot message, notification, API message and `gpr` line writes cents as dollars here, and
 * every amount typed by a person (the bot, the approval page, `gpr`'s dollar flags) is read here,
 * by one rule with one refusal. The API itself speaks integer USD cents in fields named `…Minor`.
 */
import { MIN_BUDGET_MINOR } from './limits.js';

/**
 * Cents as US dollars for people: 500 -> "$5.00", 123456 -> "$1,234.56", -5 -> "-$0.05".
 * The SDK also exports it as `formatCents`.
 */
export function formatUsd(minor: number): string {
  const sign = minor < 0 ? '-' : '';
  return `${sign}$${formatUsdAmount(Math.abs(minor))}`;
}

/** {@link formatUsd} without a zero cents part, for buttons and ranges: 2000 -> "$20", 1250 -> "$12.50". */
export function formatUsdShort(minor: number): string {
  return formatUsd(minor).replace(/\.00$/, '');
}

/** The number part of {@link formatUsd}, for texts that name the currency themselves ("USD 12.50"). */
export function formatUsdAmount(minor: number): string {
  const abs = Math.abs(minor);
  const sign = minor < 0 ? '-' : '';
  return `${sign}${Math.floor(abs / 100).toLocaleString('en-US')}.${String(abs % 100).padStart(2, '0')}`;
}

/**
 * Cents as a plain decimal, for what a program or a person types back (an HTML number input's
 * min and max, a flag's value): 123456 -> "1234.56".
 */
export function usdDecimal(minor: number): string {
  const abs = Math.abs(minor);
  return `${minor < 0 ? '-' : ''}${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, '0')}`;
}

/** How to write an amount that {@link parseUsd} refused, the same words wherever dollars are typed. */
export const DOLLARS_HINT = 'write dollars like 12.50';

/** The refusal of `input` as an amount in dollars, with {@link DOLLARS_HINT}: `"12.345" is not an amount in US dollars: write dollars like 12.50`. */
export function notDollarsMessage(input: string): string {
  const shown = input.trim().length > 40 ? `${input.trim().slice(0, 40)}…` : input.trim();
  return `"${shown}" is not an amount in US dollars: ${DOLLARS_HINT}`;
}

/** A whole number of dollars, plain ("1234") or in thousands groups ("1,234"), with an optional ".5" or ".50". */
const POINT_AMOUNT = /^(\d+|\d{1,3}(?:,\d{3})+)(?:\.(\d{1,2}))?$/;
/** A decimal comma: a comma followed by one or two final digits, and no dot ("12,5" is 12.50). */
const COMMA_AMOUNT = /^(\d+),(\d{1,2})$/;
/** At most nine digits of dollars: more than any limit or top-up, and well inside a safe integer of cents. */
const MAX_DOLLAR_DIGITS = 9;

/** The amount `input` writes, and whether it wrote a cents part; null when it is not an amount. */
function readUsd(input: string): { cents: number; withCents: boolean } | null {
  const s = input
    .trim()
    .replace(/^(?:usd|us\$|\$)\s*/i, '')
    .replace(/\s*(?:usd|\$)$/i, '');
  const m = POINT_AMOUNT.exec(s) ?? COMMA_AMOUNT.exec(s);
  if (!m) return null;
  const whole = m[1].replace(/,/g, '');
  if (whole.length > MAX_DOLLAR_DIGITS) return null;
  const frac = m[2] ?? '';
  return { cents: Number(whole) * 100 + Number(frac.padEnd(2, '0')), withCents: frac !== '' };
}

/**
 * Dollars as people type them, in cents: "20", "20.5", "20.50", "$20", "20$", "20 USD", "USD 20",
 * thousands groups ("1,234.50") and a decimal comma ("12,5" is 12.50: a comma followed by one or
 * two final digits and no dot). Null for anything else (a sign, more than two decimals, "1.234,50",
 * more than nine digits of dollars); refuse it with {@link notDollarsMessage}.
 */
export function parseUsd(input: string): number | null {
  return readUsd(input)?.cents ?? null;
}

/**
 * {@link parseUsd} for a caller that throws: the cents of `input`, or a RangeError whose message
 * is {@link notDollarsMessage}.
 */
export function dollarsToCents(input: string | number): number {
  const cents = parseUsd(String(input));
  if (cents === null) throw new RangeError(`${notDollarsMessage(String(input))}.`);
  return cents;
}

/** No GPU machine costs this many dollars an hour or more: a whole-number price this high was most likely typed in cents. */
export const IMPLAUSIBLE_HOURLY_USD = 100;

/**
 * A warning for an hourly price in dollars that looks like cents ("350" meant as 350 cents,
 * $3.50), naming the flag and what to type instead; null when it looks like dollars (it has a
 * cents part, or is under {@link IMPLAUSIBLE_HOURLY_USD}) or is not an amount at all.
 */
export function centsLookingPrice(flag: string, input: string): string | null {
  const read = readUsd(input);
  if (!read || read.withCents || read.cents < IMPLAUSIBLE_HOURLY_USD * 100) return null;
  const typed = read.cents / 100;
  return `${flag} ${typed} is ${formatUsd(read.cents)} an hour: amounts are in dollars. If you meant ${typed} cents, pass ${flag} ${usdDecimal(typed)}.`;
}

/** Every amount on the wire is integer USD cents in a field whose name ends in `Minor`. */
export const MONEY_UNIT = 'USD cents';

/** One sentence saying what a money field means, with a worked example: "USD cents: 350 = $3.50". */
export const MONEY_MEANING = `${MONEY_UNIT}: 350 = ${formatUsd(350)}`;

/** True for the name of a money field (`budgetMinor`, `body.amountMinor`, `maxHourlyPriceMinor`). */
export function isMoneyField(name: string): boolean {
  return /Minor$/.test(name);
}

/**
 * What a money field's value must be, for a validation error: the unit, an example, and the
 * range when it is known. `sent` is the value the caller sent, echoed only when it is a short
 * number or string, with its reading in cents when that helps ("3.5" is read as 3.5 cents, not $3.50).
 */
export function moneyFieldHint(field: string, declared: { min?: number; max?: number } = {}, sent?: unknown): string {
  // Admission holds budgetMinor to its floor with the price in hand (BUDGET_TOO_SMALL), so a
  // request schema does not declare it; the floor is part of the field's range all the same.
  const range =
    field === 'budgetMinor' && declared.min === undefined ? { ...declared, min: MIN_BUDGET_MINOR } : declared;
  const bounds =
    range.min !== undefined && range.max !== undefined
      ? ` from ${range.min} to ${range.max} (${formatUsd(range.min)} to ${formatUsd(range.max)})`
      : range.min !== undefined
        ? ` of at least ${range.min} (${formatUsd(range.min)})`
        : range.max !== undefined
          ? ` of at most ${range.max} (${formatUsd(range.max)})`
          : '';
  const meant = dollarsMeant(sent, range);
  const next = meant === undefined ? '' : ` If you meant ${formatUsd(meant)}, send ${meant}.`;
  return `${field} is in ${MONEY_MEANING}; send a whole number${bounds}.${next}`;
}

/**
 * The cents the caller probably meant by `sent`, or undefined: an amount with a cents part ("3.5",
 * 3.5, "$3.50"), or a whole number under the field's minimum whose cents would be in range (20
 * meaning $20).
 */
function dollarsMeant(sent: unknown, range: { min?: number; max?: number }): number | undefined {
  if (typeof sent !== 'number' && typeof sent !== 'string') return undefined;
  const read = readUsd(String(sent));
  if (!read) return undefined;
  if (read.withCents) return read.cents;
  const whole = read.cents / 100;
  if (range.min === undefined || whole >= range.min) return undefined;
  return read.cents >= range.min && (range.max === undefined || read.cents <= range.max) ? read.cents : undefined;
}

/** A per-GB traffic price as people type it: USD with at most six decimals ("0.05", "$0.00456"). */
const USD_PER_GB = /^(\d{1,4})(?:\.(\d{1,6}))?$/;

/**
 * A per-GB price typed in USD, in millionths of a dollar (the unit of the offers'
 * `trafficPricePerGb`): "0.05" is 50000. Null for anything else (a sign, more than six decimals,
 * more than four digits of dollars). Read exactly, never through a float.
 */
export function parseUsdPerGb(input: string): number | null {
  const m = USD_PER_GB.exec(input.trim().replace(/^\$/, ''));
  if (!m) return null;
  return Number(m[1]) * 1_000_000 + Number((m[2] ?? '').padEnd(6, '0'));
}

/** Millionths of a USD per GB for people: 33000 -> "$0.033/GB", 0 -> "free". */
export function formatUsdPerGb(micro: number): string {
  if (micro === 0) return 'free';
  const text = (micro / 1_000_000).toFixed(6).replace(/0+$/, '').replace(/\.$/, '');
  return `$${text}/GB`;
}
