import { Composer, InlineKeyboard } from 'grammy';
import type { EventType } from '../../src/modules/events/event-types.js';
import {
  NOTIFIABLE_EVENT_TYPES,
  NOTIFIABLE_LABELS,
  NotifyPreferences,
} from '../../src/modules/notifications/notify-preferences.js';
import type { BotContext } from '../context.js';

const TEXT = 'What should this chat be told about? Tap a line to turn it on or off.';

function keyboard(on: readonly EventType[]): InlineKeyboard {
  const kb = new InlineKeyboard();
  NOTIFIABLE_EVENT_TYPES.forEach((t, i) =>
    kb.text(`${on.includes(t) ? '✅' : '▫️'} ${NOTIFIABLE_LABELS[t]}`, `nt:${i}`).row(),
  );
  return kb;
}

const preferencesOf = (ctx: BotContext) => new NotifyPreferences(ctx.services.store, ctx.services.clock);

/** /notify: which events this owner's chat is told about, one toggle button per event type. */
export function notifyFeature(): Composer<BotContext> {
  const composer = new Composer<BotContext>();

  composer.command('notify', async (ctx) => {
    const on = await preferencesOf(ctx).of(ctx.chat.id);
    await ctx.reply(TEXT, { reply_markup: keyboard(on) });
  });

  composer.callbackQuery(/^nt:(\d{1,2})$/, async (ctx) => {
    const type = NOTIFIABLE_EVENT_TYPES[Number(ctx.match[1])];
    const chatId = ctx.chat?.id;
    if (!type || chatId === undefined) {
      await ctx.answerCallbackQuery({ text: 'That button is not valid. Send /notify again.', show_alert: true });
      return;
    }
    const on = await preferencesOf(ctx).toggle(chatId, type);
    await ctx.answerCallbackQuery({ text: `${NOTIFIABLE_LABELS[type]}: ${on.includes(type) ? 'on' : 'off'}` });
    await ctx.editMessageReplyMarkup({ reply_markup: keyboard(on) });
  });

  return composer;
}
