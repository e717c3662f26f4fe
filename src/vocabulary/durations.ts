/**
 * Durations as people type them and read them. The API counts seconds (`terminateAfterSeconds`,
 * `waitForCapacitySeconds`, `leaseSeconds`); the command line takes `2h`, `90m`, `3600s`.
 */

const UNIT_SECONDS: Record<string, number> = { d: 86_400, h: 3600, m: 60, s: 1 };

/**
 * Whole seconds of `2h`, `90m`, `3600s`, `1d`, `1h30m` (each unit at most once, largest first) or
 * a bare number of seconds; undefined when the text is none of these.
 */
export function parseDuration(text: string): number | undefined {
  const t = text.trim().toLowerCase();
  if (/^\d{1,9}$/.test(t)) return Number(t);
  const m = /^(?:(\d{1,9})d)?(?:(\d{1,9})h)?(?:(\d{1,9})m)?(?:(\d{1,9})s)?$/.exec(t);
  if (!m || t === '') return undefined;
  const [, d, h, min, s] = m;
  const seconds =
    Number(d ?? 0) * UNIT_SECONDS.d +
    Number(h ?? 0) * UNIT_SECONDS.h +
    Number(min ?? 0) * UNIT_SECONDS.m +
    Number(s ?? 0);
  return Number.isSafeInteger(seconds) ? seconds : undefined;
}

/** Seconds in words as the hints write them: `2 h`, `1 h 30 min`, `45 s`, `1 d 2 h`. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds <= 0) return '0 s';
  let left = Math.round(seconds);
  const parts: string[] = [];
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3600],
    ['min', 60],
    ['s', 1],
  ] as const) {
    const n = Math.floor(left / size);
    left -= n * size;
    if (n > 0) parts.push(`${n} ${unit}`);
  }
  return parts.join(' ');
}
