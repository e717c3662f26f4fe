import { Composer, InlineKeyboard } from 'grammy';
import { ownerOf, type BotContext } from '../context.js';
import { html } from '../format.js';
import { describeIdleMinutes } from '../limits-dialogue.js';
import { UUID_PATTERN } from '../../src/ids.js';
import { confirmRevocation, keepKey, MAX_LISTED_KEYS } from '../key-revocation.js';
import { formatUsd } from '../../src/vocabulary/money.js';
import { describeRentalLength } from '../../src/modules/keys/rental-length.js';

/** /agents: the account's agent keys with limits, spend and active rentals; revoke with a confirmation. */
export function agentsFeature(): Composer<BotContext> {
  const composer = new Composer<BotContext>();

  composer.command('agents', async (ctx) => {
    const keys = (await ctx.services.agentKeys.listAgentKeys(ownerOf(ctx).id)).filter((k) => !k.revokedAt);
    if (keys.length === 0) {
      await ctx.reply('You have no active agent keys. Connect an agent with /newagent.');
      return;
    }
    const shown = keys.slice(0, MAX_LISTED_KEYS);
    const lines = shown.map(
      (k, i) =>
        `${i + 1}. <b>${html(k.name)}</b> <code>${html(k.prefix)}</code>${k.origin === 'oauth' ? ' (connected by URL: remote MCP)' : ''}\n` +
        `   limits: ${formatUsd(k.maxPerRentalMinor)} per rental, ${formatUsd(k.budgetLimitMinor)} total, ${k.maxConcurrentDeployments} at a time` +
        `${k.maxRentalSeconds === null ? '' : `, rentals up to ${describeRentalLength(k.maxRentalSeconds)}`}` +
        `${k.idleTerminateMinutes === null ? '' : `, stops after ${describeIdleMinutes(k.idleTerminateMinutes)} idle`}\n` +
        `   spent ${formatUsd(k.netSpentMinor)} (${formatUsd(k.remainingBudgetMinor)} left), ${k.activeDeployments} active rental${k.activeDeployments === 1 ? '' : 's'}`,
    );
    if (keys.length > shown.length) lines.push(`…and ${keys.length - shown.length} more.`);
    const kb = new InlineKeyboard();
    shown.forEach((k, i) => kb.text(`Revoke ${i + 1}. ${k.name}`.slice(0, 60), `rv:${k.id}`).row());
    await ctx.reply(`<b>Agent keys</b>\n\n${lines.join('\n\n')}`, { parse_mode: 'HTML', reply_markup: kb });
  });

  composer.callbackQuery(new RegExp(`^rv:(${UUID_PATTERN})$`), async (ctx) => {
    const keyId = ctx.match[1];
    const key = (await ctx.services.agentKeys.listAgentKeys(ownerOf(ctx).id)).find((k) => k.id === keyId);
    if (!key || key.revokedAt) {
      await ctx.answerCallbackQuery({
        text: key ? 'That key is already revoked.' : 'That key is not on your account.',
        show_alert: true,
      });
      return;
    }
    await ctx.answerCallbackQuery();
    const kb = new InlineKeyboard().text('Yes, revoke it', `rvy:${keyId}`).text('Keep it', 'rvn');
    await ctx.reply(
      `Revoke <b>${html(key.name)}</b> <code>${html(key.prefix)}</code>? The agent using it is refused from its next call on. ` +
        'Its running rentals keep running until they end or you terminate them in /rentals.',
      { parse_mode: 'HTML', reply_markup: kb },
    );
  });

  composer.callbackQuery(new RegExp(`^rvy:(${UUID_PATTERN})$`), (ctx) =>
    confirmRevocation(
      ctx,
      () => ctx.services.agentKeys.revokeAgentKey(ownerOf(ctx).id, ctx.match[1]),
      () => 'Revoked. That key no longer works; its agent needs a new setup code (/newagent) to come back.',
    ),
  );

  composer.callbackQuery('rvn', keepKey);

  return composer;
}
