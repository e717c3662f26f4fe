import { Composer } from 'grammy';
import type { BotContext } from '../context.js';

/**
 * The bot manages money and keys, so it works only in private chats. In groups and channels it
 * says so once when added (and leaves) or when someone sends it a command, and ignores the rest.
 */
export function privateChatsFeature(): Composer<BotContext> {
  const composer = new Composer<BotContext>();

  composer.on('my_chat_member', async (ctx, next) => {
    if (ctx.chat.type === 'private') return next();
    const status = ctx.myChatMember.new_chat_member.status;
    if (status === 'member' || status === 'administrator') {
      if (ctx.chat.type !== 'channel') await ctx.reply(refusal(ctx)).catch(() => undefined);
      await ctx.leaveChat().catch(() => undefined);
    }
  });

  composer.use(async (ctx, next) => {
    if (ctx.chat?.type === 'private') return next();
    if (ctx.callbackQuery) {
      // Buttons on inline messages or in groups: answered, never acted on.
      await ctx.answerCallbackQuery({ text: 'Please use me in a private chat.' });
      return;
    }
    const text = ctx.message?.text;
    if (text && text.startsWith('/')) await ctx.reply(refusal(ctx));
  });

  return composer;
}

function refusal(ctx: BotContext): string {
  const me = ctx.me.username ? ` https://t.me/${ctx.me.username}` : '';
  return `Sorry, I only work in private chats, because I handle your account, keys and money. Please message me directly:${me}`;
}
