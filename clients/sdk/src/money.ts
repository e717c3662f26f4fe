/** Dollars as typed by a person ("3", "3.5", "$3.50") to integer cents; throws on anything else. */
export function dollarsToCents(input: string | number): number {
  const s = String(input).trim().replace(/^\$/, '');
  if (!/^\d+(\.\d{1,2})?$/.test(s)) throw new RangeError(`"${input}" is not an amount in dollars (e.g. 3 or 3.50)`);
  const [whole, frac = ''] = s.split('.');
  const cents = Number(whole) * 100 + Number(frac.padEnd(2, '0'));
  if (!Number.isSafeInteger(cents)) throw new RangeError(`"${input}" is too large`);
  return cents;
}

/** Integer cents as "$12.34". */
export function formatCents(minor: number, currency = 'USD'): string {
  const sign = minor < 0 ? '-' : '';
  const abs = Math.abs(minor);
  const text = `${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, '0')}`;
  return currency === 'USD' ? `${sign}$${text}` : `${sign}${text} ${currency}`;
}

/** No GPU machine costs this many dollars an hour or more: a whole-number price this high was most likely typed in cents. */
export const IMPLAUSIBLE_HOURLY_USD = 100;

/**
 * A warning for an hourly price in dollars that looks like cents ("350" meant as 350 cents,
 * $3.50), naming the flag and what to type instead; null when it looks like dollars.
 */
export function centsLookingPrice(flag: string, input: string): string | null {
  const s = input.trim().replace(/^\$/, '');
  if (!/^\d+$/.test(s) || Number(s) < IMPLAUSIBLE_HOURLY_USD) return null;
  return `${flag} ${s} is ${formatCents(Number(s) * 100)} an hour: amounts are in dollars. If you meant ${s} cents, pass ${flag} ${formatCents(Number(s)).slice(1)}.`;
}
