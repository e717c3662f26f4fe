import { Composer } from 'grammy';
import type { BotContext } from '../context.js';

/**
 * Last in the chain: whatever no feature took. Unknown commands and stray text get a pointer to
 * /help, other messages (stickers, photos, voice, ...) a short note, stale or forged buttons an
 * answer so the client stops spinning; everything else (edits, member updates) is ignored.
 */
export function unhandledFeature(): Composer<BotContext> {
  const composer = new Composer<BotContext>();

  composer.on('message:text', async (ctx) => {
    const text = ctx.message.text;
    if (text.startsWith('/')) {
      const cmd = text.split(/\s/)[0].slice(0, 40);
      await ctx.reply(`I don't know the command ${cmd}. Send /help to see what I can do.`);
      return;
    }
    await ctx.reply("I didn't understand that. Send /help to see what I can do.");
  });

  composer.on('message', async (ctx) => {
    await ctx.reply('I only understand text commands. Send /help to see them.');
  });

  composer.on('callback_query', async (ctx) => {
    await ctx.answerCallbackQuery({ text: 'This button is no longer valid.', show_alert: false });
  });

  return composer;
}
