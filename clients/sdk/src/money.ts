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
