import { AppError } from '../src/errors/app-error.js';
import type { BotContext } from './context.js';

/** Telegram keeps messages under 4096 characters; beyond this many keys a list says "and N more". */
export const MAX_LISTED_KEYS = 15;

/**
 * The confirmed revocation of a key from its list: a key that is not on the owner's account gets
 * an alert and nothing else; otherwise the confirmation message becomes `revoked(result)`.
 */
export async function confirmRevocation<T>(
  ctx: BotContext,
  revoke: () => Promise<T>,
  revoked: (result: T) => string,
): Promise<void> {
  let result: T;
  try {
    result = await revoke();
  } catch (err) {
    if (err instanceof AppError && err.status === 404) {
      await ctx.answerCallbackQuery({ text: 'That key is not on your account.', show_alert: true });
      return;
    }
    throw err;
  }
  await ctx.answerCallbackQuery({ text: 'Revoked.' });
  await ctx.editMessageText(revoked(result));
}

/** The "keep it" answer to a revocation's confirmation. */
export async function keepKey(ctx: BotContext): Promise<void> {
  await ctx.answerCallbackQuery();
  await ctx.editMessageText('Kept. Nothing changed.');
}
