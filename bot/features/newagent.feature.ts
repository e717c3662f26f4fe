import { Composer } from 'grammy';
import type { Conversation } from '../../src/modules/telegram/conversation-store.js';
import { ownerOf, type BotContext } from '../context.js';
import { html, minutesLeft, utc } from '../format.js';
import { startLimitsDialogue } from '../limits-dialogue.js';
import { describeLimits, parseLimitArgs } from '../limit-args.js';
import type { KeyLimits } from '../../src/modules/keys/key-limits.js';

/** How long an unanswered /newagent dialogue stays open. */
const DIALOGUE_TTL_MS = 30 * 60_000;

/** /newagent: the limits (one line or a dialogue), then a one-time setup code. */
export function newAgentFeature(): Composer<BotContext> {
  const composer = new Composer<BotContext>();

  composer.command('newagent', async (ctx) => {
    const parsed = parseLimitArgs(ctx.match);
    if (parsed === null) {
      await ctx.reply(
        "Let's connect an agent. I'll ask for the limits its key will carry; the service enforces them on every rental. " +
          '(Next time you can send them in one line: /newagent 5 50 1 8h idle 30m — per-rental USD, total USD, concurrent rentals, ' +
          'and optionally the longest rental and how long idle GPUs may run before the rental is stopped.)',
      );
      await startLimitsDialogue(ctx, 'newagent', {
        expiresAt: new Date(ctx.services.clock.now().getTime() + DIALOGUE_TTL_MS),
      });
      return;
    }
    if ('errors' in parsed) {
      await ctx.reply(`${parsed.errors.join('\n')}\n\nNothing was created. Example: /newagent 5 50 1`);
      return;
    }
    await ctx.conversations.clear(ctx.chat.id);
    await sendSetupCode(ctx, parsed.limits, parsed.name);
  });

  return composer;
}

/** Dialogue completion for /newagent. */
export async function completeNewAgent(ctx: BotContext, conversation: Conversation, limits: KeyLimits): Promise<void> {
  await sendSetupCode(ctx, limits, conversation.data.name);
}

async function sendSetupCode(ctx: BotContext, limits: KeyLimits, name?: string): Promise<void> {
  const owner = ownerOf(ctx);
  const { setupCode, expiresAt } = await ctx.services.agents.mintSetupCode(
    { accountId: owner.id, keyId: null },
    { ...limits, ...(name ? { name } : {}) },
  );
  const base = ctx.services.config.http.publicBaseUrl;
  const call =
    `curl -s -X POST ${base}/api/v1/agent-setups/exchange \\\n` +
    `  -H 'Content-Type: application/json' \\\n` +
    `  -d '{"setupCode":"${setupCode}"}'`;
  await ctx.reply(
    [
      '<b>Setup code for your agent</b> (shown only this once):',
      '',
      `<code>${html(setupCode)}</code>`,
      '',
      `Limits: ${html(describeLimits(limits))}.`,
      `Valid for one exchange until ${utc(expiresAt)} (${minutesLeft(expiresAt, ctx.services.clock.now())} minutes).`,
      '',
      'Give it to your agent; it makes this call once and keeps the API key it gets back:',
      `<pre>${html(call)}</pre>`,
      '',
      'The key never has the billing scope. If the answer is lost, revoke the key in /agents and make a new code.',
    ].join('\n'),
    { parse_mode: 'HTML' },
  );
}
