/**
 * The account e-mail as stored: trimmed, one `@`, a dot in the domain, at most 254 characters.
 * Null when `raw` is not such an address.
 */
export function normalizeEmail(raw: string): string | null {
  const clean = raw.trim();
  return /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(clean) && clean.length <= 254 ? clean : null;
}
