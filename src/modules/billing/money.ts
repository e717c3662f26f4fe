/**
 * Cents as US dollars for people, the one format every page, bot message and notification uses:
 * 500 -> "$5.00", 123456 -> "$1,234.56", -5 -> "-$0.05".
 */
export function formatUsd(minor: number): string {
  const sign = minor < 0 ? '-' : '';
  return `${sign}$${formatUsdAmount(Math.abs(minor))}`;
}

/** The number part of {@link formatUsd}, for texts that name the currency themselves ("USD 12.50"). */
export function formatUsdAmount(minor: number): string {
  const abs = Math.abs(minor);
  const sign = minor < 0 ? '-' : '';
  return `${sign}${Math.floor(abs / 100).toLocaleString('en-US')}.${String(abs % 100).padStart(2, '0')}`;
}
