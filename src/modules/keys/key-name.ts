import { AppError } from '../../errors/app-error.js';

/** SPEC.md Limits: key names are at most 100 characters. */
export const KEY_NAME_MAX = 100;

/**
 * A name an agent gives itself (signup, authorization sessions): trimmed, 1 to 100 characters,
 * no control characters, since owners read it on pages and in chats. Undefined or blank is null.
 */
export function agentName(raw: string | undefined): string | null {
  const name = raw?.trim();
  if (!name) return null;
  if (name.length > KEY_NAME_MAX || /[\x00-\x1f\x7f]/.test(name)) {
    throw new AppError('VALIDATION_FAILED', `Invalid request: name: 1 to ${KEY_NAME_MAX} characters, no control characters.`);
  }
  return name;
}
