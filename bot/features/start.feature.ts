import { Composer } from 'grammy';
import { ownerOf, type BotContext } from '../context.js';
import { html } from '../format.js';
import { formatUsd } from '../../src/vocabulary/money.js';

/** The commands the bot offers, for the command menu and /help. */
export const COMMANDS: { command: string; description: string }[] = [
  { command: 'newagent', description: 'Connect an agent: pick its limits, get a one-time setup code' },
  { command: 'agents', description: "Your agents' keys: limits, spend, active rentals; revoke" },
  { command: 'rentals', description: 'Recent rentals; terminate one' },
  { command: 'balance', description: 'Compute credits and recent movements' },
  { command: 'topup', description: 'A card payment link for credits, e.g. /topup 20' },
  { command: 'ownerkey', description: 'Issue an OWNER API key for your own scripts (shown once)' },
  { command: 'ownerkeys', description: 'Your OWNER API keys; revoke one and what it let in' },
  { command: 'notify', description: 'Choose what this chat is told about (rentals, top-ups, low credits)' },
  { command: 'cancel', description: 'Stop the question in progress' },
  { command: 'help', description: 'What this bot does' },
];

function helpText(): string {
  return COMMANDS.map((c) => `/${c.command} — ${html(c.description)}`).join('\n');
}

/** /start (without a payload), /help and /cancel. */
export function startFeature(): Composer<BotContext> {
  const composer = new Composer<BotContext>();

  composer.command('start', async (ctx) => {
    const owner = ownerOf(ctx);
    await ctx.conversations.clear(ctx.chat.id);
    await ctx.reply(
      [
        `<b>Welcome${ctx.from?.first_name ? `, ${html(ctx.from.first_name)}` : ''}.</b> This chat is your owner account on the GPU rental service.`,
        '',
        'Your AI agents rent GPU machines by the hour from your compute credits, inside hard limits you set here: ' +
          'a cap per rental, a total budget and how many rentals may run at once. You never hand an agent your own credentials — ' +
          'it gets its own key, which you can revoke at any time.',
        '',
        `Credits: <b>${formatUsd(owner.balanceMinor)}</b>. Top up with /topup, then connect an agent with /newagent.`,
        "I will tell you here when credits arrive, when an agent's rental starts, fails or ends, and when credits run low.",
        '',
        helpText(),
      ].join('\n'),
      { parse_mode: 'HTML', link_preview_options: { is_disabled: true } },
    );
  });

  composer.command('help', async (ctx) => {
    await ctx.reply(`I manage your GPU rental owner account and your agents' keys.\n\n${helpText()}`, {
      parse_mode: 'HTML',
    });
  });

  composer.command('cancel', async (ctx) => {
    const open = await ctx.conversations.get(ctx.chat.id);
    await ctx.conversations.clear(ctx.chat.id);
    await ctx.reply(open ? 'Cancelled. Nothing was created.' : 'There was nothing to cancel.');
  });

  return composer;
}
