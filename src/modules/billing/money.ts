// The service's one reading and writing of money for people: every page, form, bot message and
// notification turns US-dollar text into integer cents and cents into text here. The API itself
// speaks integer cents (`…Minor`); the SDK keeps its own copy for clients.

/**
 * Cents as US dollars for people, the one format every page, bot message and notification uses:
 * 500 -> "$5.00", 123456 -> "$1,234.56", -5 -> "-$0.05".
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

/** Cents as a plain decimal for machine-read fields (an HTML number input's min, max): 123456 -> "1234.56". */
export function usdDecimal(minor: number): string {
  const abs = Math.abs(minor);
  return `${minor < 0 ? '-' : ''}${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, '0')}`;
}

/**
 * A dollar amount as people type it ("5", "$12.50", "12,5", "USD 20", "20$") in cents; null when
 * it is not a plain non-negative amount with at most two decimals (and at most nine digits of dollars).
 */
export function parseUsd(input: string): number | null {
  const s = input
    .trim()
    .replace(/^(usd|us\$|\$)\s*/i, '')
    .replace(/\s*(usd|\$)$/i, '')
    .replace(',', '.');
  if (!/^\d{1,9}(\.\d{1,2})?$/.test(s)) return null;
  const [whole, frac = ''] = s.split('.');
  return Number(whole) * 100 + Number(frac.padEnd(2, '0'));
}
