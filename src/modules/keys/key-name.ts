import { AppError } from '../../errors/app-error.js';

/** The longest key or agent name: the length of the name columns. */
export const KEY_NAME_MAX = 100;

/**
 * Characters a name may not hold, because owners read names on pages and in chats and these change
 * what they see without being seen themselves: controls (Cc), format characters (Cf: bidirectional
 * overrides and isolates such as U+202E, zero-width spaces and joiners, the BOM, tag characters),
 * line and paragraph separators (U+2028, U+2029), lone surrogates, and the rest of Unicode's
 * default-ignorable code points (Hangul fillers, the combining grapheme joiner), which render as
 * nothing. Variation selectors (U+FE00 to U+FE0F) stay allowed: they only choose how the character
 * before them is drawn, as in emoji.
 */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]|(?![\uFE00-\uFE0F])\p{Default_Ignorable_Code_Point}/u;

/**
 * A key or agent name given through any door (API bodies, the Telegram bot, the operator CLI):
 * trimmed, 1 to {@link KEY_NAME_MAX} characters, no invisible or control characters. Anything else
 * is 422 VALIDATION_FAILED naming `field`, never a silently altered name.
 */
export function keyName(raw: string, field = 'name'): string {
  const name = raw.trim();
  if (name.length < 1 || name.length > KEY_NAME_MAX) {
    throw new AppError('VALIDATION_FAILED', `Invalid request: ${field}: 1 to ${KEY_NAME_MAX} characters.`);
  }
  const bad = INVISIBLE.exec(name);
  if (bad) {
    const code = `U+${bad[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
    throw new AppError(
      'VALIDATION_FAILED',
      `Invalid request: ${field}: no control, bidirectional or invisible characters (found ${code}).`,
    );
  }
  return name;
}

/**
 * A name an agent gives itself (signup, authorization sessions), by the rule of {@link keyName}.
 * Undefined or blank is null: the agent simply gave none.
 */
export function agentName(raw: string | undefined, field = 'name'): string | null {
  if (raw === undefined || !raw.trim()) return null;
  return keyName(raw, field);
}
