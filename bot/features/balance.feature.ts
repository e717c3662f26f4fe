import { Composer, InlineKeyboard } from 'grammy';
import { AppError } from '../../src/errors/app-error.js';
import { TOPUP_LIMITS } from '../../src/modules/billing/topup-limits.js';
import { getAccount } from '../../src/modules/accounts/accounts.repository.js';
import { TOPUP_PAYLOAD } from '../../src/modules/telegram/deep-links.js';
import { ownerOf, type BotContext } from '../context.js';
import { html, utc } from '../format.js';
import { formatUsd, formatUsdShort, notDollarsMessage, parseUsd } from '../../src/vocabulary/money.js';

const { minimumMinor: TOPUP_MIN, maximumMinor: TOPUP_MAX } = TOPUP_LIMITS;
const RANGE = `any amount from ${formatUsdShort(TOPUP_MIN)} to ${formatUsdShort(TOPUP_MAX)}`;
const PRESETS = [1000, 2500, 5000, 10000];

/**
 * The deep link `/start topup_<cents>` an agent hands its owner when a rental is refused for
 * credits (the agent's key cannot add any): the same card payment link /topup gives.
 */
export function topupLinkFeature(): Composer<BotContext> {
  const composer = new Composer<BotContext>();
  composer.command('start', async (ctx, next) => {
    if (!ctx.match.startsWith('topup_')) return next();
    const m = TOPUP_PAYLOAD.exec(ctx.match);
    const amount = m ? Number(m[1]) : NaN;
    if (!(amount >= TOPUP_MIN && amount <= TOPUP_MAX)) {
      await ctx.reply(`This top-up link is not valid. Send /topup with ${RANGE}, e.g. /topup 20.`);
      return;
    }
    await ctx.reply(`Your agent asks for ${formatUsd(amount)} of compute credits to start a rental.`);
    await sendTopupLink(ctx, amount);
  });
  return composer;
}

/** /balance and /topup <usd>. */
export function balanceFeature(): Composer<BotContext> {
  const composer = new Composer<BotContext>();

  composer.command('balance', async (ctx) => {
    const owner = ownerOf(ctx);
    const account = await getAccount(ctx.services.ds, owner.id);
    const entries = await ctx.services.ledger.recent(owner.id, 5);
    const lines = [
      `Compute credits: <b>${formatUsd(account.balanceMinor)}</b>${account.frozen ? ' (account frozen: no new rentals)' : ''}`,
    ];
    if (entries.length) {
      lines.push('', 'Recent movements:');
      for (const e of entries)
        lines.push(
          `${utc(e.createdAt)}  ${e.amountMinor >= 0 ? '+' : ''}${formatUsd(e.amountMinor)}  ${html(e.description)}`,
        );
    } else {
      lines.push('', `No movements yet. Add credits with /topup 20 (${RANGE}).`);
    }
    await ctx.reply(lines.join('\n'), { parse_mode: 'HTML' });
  });

  composer.command('topup', async (ctx) => {
    const arg = ctx.match.trim();
    if (!arg) {
      const kb = new InlineKeyboard();
      for (const p of PRESETS) kb.text(formatUsdShort(p), `tu:${p}`);
      await ctx.reply(`How much would you like to add? Pick an amount, or send /topup with ${RANGE}, e.g. /topup 20.`, {
        reply_markup: kb,
      });
      return;
    }
    const amount = parseUsd(arg);
    if (amount === null) {
      await ctx.reply(`${notDollarsMessage(arg)}, e.g. /topup 20 or /topup 12.50.`);
      return;
    }
    if (amount < TOPUP_MIN || amount > TOPUP_MAX) {
      await ctx.reply(
        `A top-up must be between ${formatUsd(TOPUP_MIN)} and ${formatUsd(TOPUP_MAX)}; you asked for ${formatUsd(amount)}.`,
      );
      return;
    }
    await sendTopupLink(ctx, amount);
  });

  composer.callbackQuery(/^tu:(\d{1,7})$/, async (ctx) => {
    const amount = Number(ctx.match[1]);
    if (!PRESETS.includes(amount)) {
      await ctx.answerCallbackQuery({
        text: 'That button is not valid. Send /topup with an amount.',
        show_alert: true,
      });
      return;
    }
    await ctx.answerCallbackQuery();
    await sendTopupLink(ctx, amount);
  });

  return composer;
}

async function sendTopupLink(ctx: BotContext, amountMinor: number): Promise<void> {
  const owner = ownerOf(ctx);
  // The update id makes a redelivered update (webhook retry, restart mid-batch) reuse the same link.
  const idempotencyKey = `telegram-update-${ctx.update.update_id}`;
  let result;
  try {
    result = await ctx.services.payments.topups.create({ accountId: owner.id, keyId: null }, idempotencyKey, {
      amountMinor,
    });
  } catch (err) {
    if (err instanceof AppError && (err.code === 'UNAVAILABLE' || err.code === 'TOPUP_EXPIRED')) {
      await ctx.reply(
        `No payment link right now: ${err.message.split('.')[0]}. Please try again with /topup in a moment.`,
      );
      return;
    }
    throw err;
  }
  const { topup } = result;
  const kb =
    topup.paymentUrl && /^https?:\/\//.test(topup.paymentUrl)
      ? new InlineKeyboard().url(`Pay ${formatUsd(amountMinor)}`, topup.paymentUrl)
      : undefined;
  await ctx.reply(
    [
      `Payment link for <b>${formatUsd(amountMinor)}</b> of compute credits${topup.expiresAt ? ` (valid until ${utc(topup.expiresAt)})` : ''}:`,
      html(topup.paymentUrl ?? ''),
      '',
      "Credits are added once the card payment is confirmed; I'll tell you here. Credits are non-transferable and non-withdrawable.",
    ].join('\n'),
    { parse_mode: 'HTML', link_preview_options: { is_disabled: true }, ...(kb ? { reply_markup: kb } : {}) },
  );
}
