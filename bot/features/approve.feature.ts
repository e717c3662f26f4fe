import { Composer, InlineKeyboard } from 'grammy';
import { AppError } from '../../src/errors/app-error.js';
import { APPROVAL_CODE_TAG } from '../../src/modules/keys/tokens.js';
import type { Conversation } from '../../src/modules/telegram/conversation-store.js';
import { ownerOf, type BotContext } from '../context.js';
import { html, minutesLeft, utc } from '../format.js';
import { limitsOf, startLimitsDialogue } from '../limits-dialogue.js';
import { describeLimits } from '../limit-args.js';
import type { KeyLimits } from '../../src/modules/keys/key-limits.js';

const APPROVE_PAYLOAD = new RegExp(`^approve_(${APPROVAL_CODE_TAG}_[A-Za-z0-9_-]{43})$`);
const DIALOGUE_TTL_MS = 30 * 60_000;

/**
 * The deep link of an approval page, `/start approve_<approvalCode>`: shows the pending agent
 * authorization, asks for the limits, and approves on the owner's final confirmation.
 */
export function approveFeature(): Composer<BotContext> {
  const composer = new Composer<BotContext>();

  composer.command('start', async (ctx, next) => {
    if (!ctx.match.startsWith('approve_')) return next();
    const m = APPROVE_PAYLOAD.exec(ctx.match);
    if (!m) {
      await ctx.reply('This approval link is not valid. Ask your agent for a fresh approval link.');
      return;
    }
    const code = m[1];
    const session = await ctx.services.agents.describeAuthorization(code);
    if (!session) {
      await ctx.reply('No request matches this approval link. Ask your agent for a fresh approval link.');
      return;
    }
    const now = ctx.services.clock.now();
    const expiresAt = new Date(session.expiresAt);
    if (session.status !== 'PENDING' || expiresAt.getTime() <= now.getTime()) {
      await ctx.reply(notPendingText(session.status, expiresAt, now));
      return;
    }
    await ctx.reply(
      [
        session.requestedName
          ? `<b>An agent that calls itself “${html(session.requestedName)}” asks to connect to your account.</b>`
          : '<b>An agent asks to connect to your account.</b>',
        '',
        'If you approve, it gets its own API key (scopes read, rent and manage — never billing) that can rent GPU machines from your credits, ' +
          'within the limits you set now. It never sees your own credentials, and you can revoke its key in /agents.',
        '',
        `This request expires at ${utc(expiresAt)} (${minutesLeft(expiresAt, now)} minutes). Only approve a request you started yourself.`,
      ].join('\n'),
      { parse_mode: 'HTML' },
    );
    const cap = Math.min(expiresAt.getTime(), now.getTime() + DIALOGUE_TTL_MS);
    await startLimitsDialogue(ctx, 'approve', { approvalCode: code, expiresAt: new Date(cap) });
  });

  composer.callbackQuery(/^apr:([A-Za-z0-9_-]{1,16})$/, async (ctx) => {
    const conversation = await ctx.conversations.get(ctx.chat!.id);
    if (
      !conversation ||
      conversation.kind !== 'approve' ||
      conversation.step !== 'confirm' ||
      conversation.data.nonce !== ctx.match[1]
    ) {
      await ctx.answerCallbackQuery({
        text: 'This approval is no longer open. Open the approval link again.',
        show_alert: true,
      });
      return;
    }
    const limits = limitsOf(conversation);
    // Claimed before approving, so a double press approves (or reports) once.
    if (!(await ctx.conversations.take(conversation, 'confirm'))) {
      await ctx.answerCallbackQuery({ text: 'This approval is already being handled.' });
      return;
    }
    await ctx.answerCallbackQuery();
    try {
      await ctx.services.agents.approveAuthorization(
        { accountId: ownerOf(ctx).id, keyId: null },
        conversation.data.approvalCode!,
        limits,
      );
    } catch (err) {
      // 404 and 409 both mean the session is gone, used or expired: say so rather than fail.
      if (!(err instanceof AppError) || (err.status !== 404 && err.status !== 409)) throw err;
      await ctx.editMessageText(
        'This request can no longer be approved: it has expired or was already approved. Ask your agent to start a new one.',
      );
      return;
    }
    await ctx.editMessageText(
      `Approved. Your agent's next poll of the exchange call gets its key, limited to ${describeLimits(limits)}. You'll find it in /agents.`,
    );
  });

  return composer;
}

/** Dialogue completion for approvals: one last look before anything is granted. */
export async function completeApproval(ctx: BotContext, conversation: Conversation, limits: KeyLimits): Promise<void> {
  conversation.step = 'confirm';
  await ctx.conversations.save(conversation);
  const kb = new InlineKeyboard()
    .text('Approve', `apr:${conversation.data.nonce}`)
    .text('Cancel', `lim:${conversation.data.nonce}:cancel`);
  await ctx.reply(`Approve this agent with ${html(describeLimits(limits))}?`, { parse_mode: 'HTML', reply_markup: kb });
}

function notPendingText(status: string, expiresAt: Date, now: Date): string {
  if (status === 'APPROVED' || status === 'EXCHANGED') return 'This request was already approved. Nothing more to do.';
  if (status === 'EXPIRED' || expiresAt.getTime() <= now.getTime())
    return 'This request has expired. Ask your agent to start a new one.';
  return 'This request can no longer be approved. Ask your agent to start a new one.';
}
