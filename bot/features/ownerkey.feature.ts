import { Composer } from 'grammy';
import { ownerOf, type BotContext } from '../context.js';
import { html } from '../format.js';

/** /ownerkey: a new OWNER API key for the owner's own scripts; the token is shown once. */
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
        `Use it as <code>Authorization: Bearer …</code> against ${html(ctx.services.config.publicBaseUrl)}/api/v1.`,
      ].join('\n'),
      { parse_mode: 'HTML', link_preview_options: { is_disabled: true } },
    );
  });

  return composer;
}
