/**
 * A key's longest rental as people write and read it (the Telegram bot, the approval page, the
 * owner CLI's summary): "8h", "90m", "1h30m", "2 days", or "none". The API keeps seconds.
 */

const UNIT_SECONDS: Record<string, number> = { d: 86_400, h: 3600, m: 60 };

/** "none" and its kin: the key has no longest rental. */
const NO_LIMIT = /^(none|no|no limit|unlimited|-)$/i;

/**
 * Seconds from a written length; `null` for "none" (no limit); undefined when the text is not a
 * length. Every number needs its unit (d, h, m, or the words), so "8" is not guessed at.
 */
export function parseRentalLength(input: string): number | null | undefined {
  const s = input.trim().toLowerCase();
  if (NO_LIMIT.test(s)) return null;
  // One or more "<number><unit>" parts, spaces allowed between them and nothing else.
  const part = /\s*(\d{1,6}(?:[.,]\d{1,2})?)\s*(days?|d|hours?|hrs?|h|minutes?|mins?|m)(?![a-z])/y;
  let total = 0;
  let at = 0;
  while (at < s.length) {
    part.lastIndex = at;
    const m = part.exec(s);
    if (!m) return undefined;
    total += Number(m[1].replace(',', '.')) * UNIT_SECONDS[m[2][0]];
    at = part.lastIndex;
  }
  if (at === 0) return undefined;
  return Math.round(total);
}

/** Seconds as a person reads them: "8 hours", "1 hour 30 minutes", "2 days"; "no limit" for null. */
export function describeRentalLength(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return 'no limit';
  const units: [number, string][] = [
    [86_400, 'day'],
    [3600, 'hour'],
    [60, 'minute'],
    [1, 'second'],
  ];
  const words: string[] = [];
  let left = seconds;
  for (const [size, name] of units) {
    const n = Math.floor(left / size);
    if (n > 0) words.push(`${n} ${name}${n === 1 ? '' : 's'}`);
    left -= n * size;
  }
  return words.length ? words.join(' ') : '0 seconds';
}
