import { Composer, InlineKeyboard } from 'grammy';
import { readMinor } from '../../src/db/columns.js';
import { AppError } from '../../src/errors/app-error.js';
import { UUID_PATTERN } from '../../src/ids.js';
import {
  deploymentOfAccount,
  recentRentalsOf,
  type OwnerRentalRow,
} from '../../src/modules/rentals/reads/owner-rental-list.js';
import { isOneOf, TERMINABLE_STATUSES } from '../../src/modules/rentals/state/rental-status.js';
import { ownerOf, type BotContext } from '../context.js';
import { html, utc } from '../format.js';
import { formatUsd } from '../../src/vocabulary/money.js';

const LISTED = 10;

/** The account's most recent rentals, newest first, with what the owner needs to recognise them. */
export function recentRentals(ctx: BotContext, accountId: string, limit = LISTED): Promise<OwnerRentalRow[]> {
  return recentRentalsOf(ctx.services.store, accountId, limit);
}

/** /rentals: recent rentals, each with its state, machine, price and which key started it. */
export function rentalsFeature(): Composer<BotContext> {
  const composer = new Composer<BotContext>();

  composer.command('rentals', async (ctx) => {
    const rows = await recentRentals(ctx, ownerOf(ctx).id);
    if (rows.length === 0) {
      await ctx.reply(
        'No rentals yet. Your agents start them through the API once you have credits (/balance) and a connected agent (/agents).',
      );
      return;
    }
    const lines = rows.map((r, i) => {
      const status = r.deployment_status ?? r.status;
      const what = r.offer_name ?? r.gpu_model ?? 'GPU machine';
      const by = r.key_name
        ? ` · by ${html(r.key_name)}${r.key_prefix ? ` <code>${html(r.key_prefix)}</code>` : ''}`
        : '';
      const why = status === 'FAILED' && r.failure_reason ? `\n   ${html(r.failure_reason)}` : '';
      return `${i + 1}. <b>${html(status)}</b> ${html(what)} · ${formatUsd(readMinor(r.hourly_price_minor))}/h\n   ${utc(r.created_at)}${by}\n   <code>${r.id}</code>${why}`;
    });
    const kb = new InlineKeyboard();
    rows.forEach((r, i) => {
      if (r.deployment_id && isOneOf(TERMINABLE_STATUSES, r.deployment_status))
        kb.text(`Terminate ${i + 1}.`, `tm:${r.deployment_id}`).row();
    });
    await ctx.reply(`<b>Recent rentals</b>\n\n${lines.join('\n\n')}`, {
      parse_mode: 'HTML',
      ...(kb.inline_keyboard.some((row) => row.length) ? { reply_markup: kb } : {}),
    });
  });

  composer.callbackQuery(new RegExp(`^tm:(${UUID_PATTERN})$`), async (ctx) => {
    const id = ctx.match[1];
    const d = await deploymentOfAccount(ctx.services.store, id, ownerOf(ctx).id);
    if (!d) {
      await ctx.answerCallbackQuery({ text: 'That rental is not on your account.', show_alert: true });
      return;
    }
    // The rentals service decides what a terminate request does; this only picks what to offer.
    if (!isOneOf(TERMINABLE_STATUSES, d.status)) {
      await ctx.answerCallbackQuery({ text: `That rental is already ${d.status}.`, show_alert: true });
      return;
    }
    await ctx.answerCallbackQuery();
    const kb = new InlineKeyboard().text('Yes, terminate it', `tmy:${id}`).text('Keep it running', 'tmn');
    await ctx.reply(
      `Terminate rental <code>${d.order_id}</code>? This is irreversible: the machine and everything on it are destroyed. Billing stops once its destruction is verified.`,
      { parse_mode: 'HTML', reply_markup: kb },
    );
  });

  composer.callbackQuery(new RegExp(`^tmy:(${UUID_PATTERN})$`), async (ctx) => {
    try {
      await ctx.services.rentals.terminate({ kind: 'OWNER', accountId: ownerOf(ctx).id }, ctx.match[1]);
    } catch (err) {
      if (err instanceof AppError && err.status === 404) {
        await ctx.answerCallbackQuery({ text: 'That rental is not on your account.', show_alert: true });
        return;
      }
      throw err;
    }
    await ctx.answerCallbackQuery({ text: 'Termination requested.' });
    await ctx.editMessageText("Termination requested. I'll tell you here when the machine is gone (TERMINATED).");
  });

  composer.callbackQuery('tmn', async (ctx) => {
    await ctx.answerCallbackQuery();
    await ctx.editMessageText('Kept running. Nothing changed.');
  });

  return composer;
}
