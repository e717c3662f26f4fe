/** Escapes text for Telegram's HTML parse mode. */
export function html(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** A moment in UTC, minute precision: "2026-11-22 19:40 UTC". */
export function utc(d: Date | string): string {
  const iso = (typeof d === 'string' ? new Date(d) : d).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

/** Whole minutes from `now` until `until`, at least 0. */
export function minutesLeft(until: Date | string, now: Date): number {
  const ms = new Date(until).getTime() - now.getTime();
  return Math.max(0, Math.round(ms / 60_000));
}

/** Parses a positive whole count ("1", " 3 "); null otherwise. */
export function parseCount(input: string): number | null {
  const s = input.trim();
  if (!/^\d{1,6}$/.test(s)) return null;
  return Number(s);
}
