import { Composer, InlineKeyboard } from 'grammy';
import { ownerOf, type BotContext } from '../context.js';
import { html } from '../format.js';
import { UUID_PATTERN } from '../../src/ids.js';
import { confirmRevocation, keepKey, MAX_LISTED_KEYS } from '../key-revocation.js';

/**
 * /ownerkey: a new OWNER API key for the owner's own scripts; the token is shown once.
 * /ownerkeys: the active OWNER keys; revoking one (confirmed) revokes what it let in with it.
 */
export function ownerKeyFeature(): Composer<BotContext> {
  const composer = new Composer<BotContext>();

  composer.command('ownerkey', async (ctx) => {
    const { key, token } = await ctx.services.accounts.issueOwnerKey(ownerOf(ctx).id);
    await ctx.reply(
      [
        '<b>Your new OWNER API key</b> (shown only this once — store it now, e.g. in a password manager):',
        '',
        `<code>${html(token)}</code>`,
        '',
        `Key id <code>${html(key.id)}</code>, prefix <code>${html(key.prefix)}</code>.`,
        '⚠️ This key acts as you: it can top up, issue and revoke agent keys, approve agents and terminate rentals. ' +
          'Never give it to an agent — agents get their own limited keys through /newagent. ' +
          'Delete this message once you have stored the key.',
        '',
        `Use it as <code>Authorization: Bearer …</code> against ${html(ctx.services.config.http.publicBaseUrl)}/api/v1.`,
      ].join('\n'),
      { parse_mode: 'HTML', link_preview_options: { is_disabled: true } },
    );
  });

  composer.command('ownerkeys', async (ctx) => {
    const keys = (await ctx.services.agentKeys.listOwnerKeys(ownerOf(ctx).id)).filter((k) => !k.revokedAt);
    if (keys.length === 0) {
      await ctx.reply('You have no active OWNER API keys. Issue one with /ownerkey.');
      return;
    }
    const shown = keys.slice(0, MAX_LISTED_KEYS);
    const lines = shown.map(
      (k, i) =>
        `${i + 1}. <b>${html(k.name)}</b> <code>${html(k.prefix)}</code>, created ${html(k.createdAt.slice(0, 10))}`,
    );
    if (keys.length > shown.length) lines.push(`…and ${keys.length - shown.length} more.`);
    const kb = new InlineKeyboard();
    shown.forEach((k, i) => kb.text(`Revoke ${i + 1}. ${k.prefix}`, `ork:${k.id}`).row());
    await ctx.reply(`<b>OWNER API keys</b>\n\n${lines.join('\n')}`, { parse_mode: 'HTML', reply_markup: kb });
  });

  composer.callbackQuery(new RegExp(`^ork:(${UUID_PATTERN})$`), async (ctx) => {
    const key = (await ctx.services.agentKeys.listOwnerKeys(ownerOf(ctx).id)).find((k) => k.id === ctx.match[1]);
    if (!key || key.revokedAt) {
      await ctx.answerCallbackQuery({
        text: key ? 'That key is already revoked.' : 'That key is not on your account.',
        show_alert: true,
      });
      return;
    }
    await ctx.answerCallbackQuery();
    const kb = new InlineKeyboard().text('Yes, revoke it', `orky:${key.id}`).text('Keep it', 'orkn');
    await ctx.reply(
      `Revoke the OWNER key <code>${html(key.prefix)}</code>? It is refused from its next call on, and so is every agent key it issued ` +
        'or approved through the API, and every approval it gave that the agent has not used yet. ' +
        'Running rentals keep running until they end or you terminate them in /rentals.',
      { parse_mode: 'HTML', reply_markup: kb },
    );
  });

  composer.callbackQuery(new RegExp(`^orky:(${UUID_PATTERN})$`), (ctx) =>
    confirmRevocation(
      ctx,
      () => ctx.services.agentKeys.revokeOwnerKey(ownerOf(ctx).id, ctx.match[1]),
      ({ revokedAgentKeyIds: { length: agents } }) =>
        `Revoked. That OWNER key no longer works${agents ? `, nor do the ${agents} agent key${agents === 1 ? '' : 's'} it let in` : ''}.`,
    ),
  );

  composer.callbackQuery('orkn', keepKey);

  return composer;
}
