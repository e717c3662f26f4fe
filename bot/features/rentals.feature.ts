import { Composer, InlineKeyboard } from 'grammy';
import { AppError } from '../../src/errors/app-error.js';
import { ownerOf, type BotContext } from '../context.js';
import { html, utc } from '../format.js';
import { formatUsd } from '../../src/modules/billing/money.js';

const LISTED = 10;
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
/** Deployment states a terminate request moves on (the rentals service decides; this only picks buttons). */
const RUNNING = ['PENDING', 'PROVISIONING', 'ACTIVE'];

interface RentalRow {
  id: string;
  status: string;
  created_at: Date;
  hourly_price_minor: string | number;
  gpu_model: string | null;
  deployment_id: string | null;
  deployment_status: string | null;
  offer_name: string | null;
  key_name: string | null;
  key_prefix: string | null;
  failure_reason: string | null;
}

/** The account's most recent rentals, newest first, with what the owner needs to recognise them. */
export async function recentRentals(ctx: BotContext, accountId: string, limit = LISTED): Promise<RentalRow[]> {
  return ctx.services.ds.query(
    `SELECT o.id, o.status, o.created_at, o.hourly_price_minor, o.gpu_model, o.failure_reason,
            d.id AS deployment_id, d.status AS deployment_status, f.name AS offer_name,
            k.name AS key_name, k.prefix AS key_prefix
       FROM orders o
       LEFT JOIN deployments d ON d.order_id = o.id
       LEFT JOIN offers f ON f.id = COALESCE(d.offer_id, o.offer_id)
       LEFT JOIN api_keys k ON k.id = o.key_id
      WHERE o.account_id = ?
      ORDER BY o.created_at DESC, o.id DESC
      LIMIT ?`,
    [accountId, limit],
  );
}

/** /rentals: recent rentals, each with its state, machine, price and which key started it. */
export function rentalsFeature(): Composer<BotContext> {
  const composer = new Composer<BotContext>();

  composer.command('rentals', async (ctx) => {
    const rows = await recentRentals(ctx, ownerOf(ctx).id);
    if (rows.length === 0) {
      await ctx.reply('No rentals yet. Your agents start them through the API once you have credits (/balance) and a connected agent (/agents).');
      return;
    }
    const lines = rows.map((r, i) => {
      const status = r.deployment_status ?? r.status;
      const what = r.offer_name ?? r.gpu_model ?? 'GPU machine';
      const by = r.key_name ? ` · by ${html(r.key_name)}${r.key_prefix ? ` <code>${html(r.key_prefix)}</code>` : ''}` : '';
      const why = status === 'FAILED' && r.failure_reason ? `\n   ${html(r.failure_reason)}` : '';
      return `${i + 1}. <b>${html(status)}</b> ${html(what)} · ${formatUsd(Number(r.hourly_price_minor))}/h\n   ${utc(r.created_at)}${by}\n   <code>${r.id}</code>${why}`;
    });
    const kb = new InlineKeyboard();
    rows.forEach((r, i) => {
      if (r.deployment_id && RUNNING.includes(r.deployment_status ?? '')) kb.text(`Terminate ${i + 1}.`, `tm:${r.deployment_id}`).row();
    });
    await ctx.reply(`<b>Recent rentals</b>\n\n${lines.join('\n\n')}`, {
      parse_mode: 'HTML',
      ...(kb.inline_keyboard.some((row) => row.length) ? { reply_markup: kb } : {}),
    });
  });

  composer.callbackQuery(new RegExp(`^tm:(${UUID})$`), async (ctx) => {
    const id = ctx.match[1];
    const rows: { status: string; order_id: string }[] = await ctx.services.ds.query(
      'SELECT status, order_id FROM deployments WHERE id = ? AND account_id = ?',
      [id, ownerOf(ctx).id],
    );
    if (!rows[0]) {
      await ctx.answerCallbackQuery({ text: 'That rental is not on your account.', show_alert: true });
      return;
    }
    if (!RUNNING.includes(rows[0].status)) {
      await ctx.answerCallbackQuery({ text: `That rental is already ${rows[0].status}.`, show_alert: true });
      return;
    }
    await ctx.answerCallbackQuery();
    const kb = new InlineKeyboard().text('Yes, terminate it', `tmy:${id}`).text('Keep it running', 'tmn');
    await ctx.reply(
      `Terminate rental <code>${rows[0].order_id}</code>? This is irreversible: the machine and everything on it are destroyed. Billing stops once its destruction is verified.`,
      { parse_mode: 'HTML', reply_markup: kb },
    );
  });

  composer.callbackQuery(new RegExp(`^tmy:(${UUID})$`), async (ctx) => {
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
    await ctx.editMessageText('Termination requested. I\'ll tell you here when the machine is gone (TERMINATED).');
  });

  composer.callbackQuery('tmn', async (ctx) => {
    await ctx.answerCallbackQuery();
    await ctx.editMessageText('Kept running. Nothing changed.');
  });

  return composer;
}
