import { Composer, InlineKeyboard } from 'grammy';
import { APPROVAL_LIMITS } from '../src/modules/keys/key-limits.js';
import { ConversationStore, type Conversation, type ConversationKind, type LimitStep } from '../src/modules/telegram/conversation-store.js';
import { ownerOf, type BotContext } from './context.js';
import { html, parseCount } from './format.js';
import { formatUsd, formatUsdShort, parseUsd } from '../src/modules/billing/money.js';


export interface ChosenLimits {
  maxPerRentalMinor: number;
  budgetLimitMinor: number;
  maxConcurrentDeployments: number;
}

type AmountStep = Exclude<LimitStep, 'confirm'>;

const STEPS: AmountStep[] = ['perRental', 'budget', 'concurrent'];

const QUESTIONS: Record<AmountStep, { question: string; presets: number[]; isCount: boolean; label: string; noun: string }> = {
  perRental: {
    question: `What may one rental cost at most? Pick a cap or type another amount in US dollars (at least ${formatUsdShort(APPROVAL_LIMITS.minimums.maxPerRentalMinor)}).`,
    presets: [500, 1000, 2500, 5000, 10000],
    isCount: false,
    label: 'Per-rental cap',
    noun: 'per-rental cap',
  },
  budget: {
    question: `How much may the agent spend in total over the key's life? Pick or type an amount in US dollars (at least ${formatUsdShort(APPROVAL_LIMITS.minimums.budgetLimitMinor)}).`,
    presets: [5000, 10000, 25000, 50000, 100000],
    isCount: false,
    label: 'Total cap',
    noun: 'total cap',
  },
  concurrent: {
    question: 'How many rentals may run at the same time? Pick or type a whole number (at least 1).',
    presets: [1, 2, 3, 5],
    isCount: true,
    label: 'Concurrent rentals',
    noun: 'number of concurrent rentals',
  },
};

const FIELD: Record<AmountStep, keyof ChosenLimits> = {
  perRental: 'maxPerRentalMinor',
  budget: 'budgetLimitMinor',
  concurrent: 'maxConcurrentDeployments',
};

/** A value for one step checked against the minimums; the error is a sentence for the owner. */
export function checkLimit(step: AmountStep, value: number | null): { ok: true; value: number } | { ok: false; error: string } {
  const field = FIELD[step];
  if (value === null) {
    return {
      ok: false,
      error: QUESTIONS[step].isCount ? 'Please send a whole number, for example 2.' : 'Please send an amount in US dollars, for example 25 or 12.50.',
    };
  }
  // The bounds the API holds approvals to, so the bot never accepts what the service would refuse.
  const min = APPROVAL_LIMITS.minimums[field];
  const max = APPROVAL_LIMITS.maximums[field];
  const show = (n: number) => (QUESTIONS[step].isCount ? String(n) : formatUsd(n));
  if (value < min) return { ok: false, error: `The ${QUESTIONS[step].noun} must be at least ${show(min)}; you sent ${show(value)}.` };
  if (value > max) return { ok: false, error: `The ${QUESTIONS[step].noun} can be at most ${show(max)}; you sent ${show(value)}.` };
  return { ok: true, value };
}

/** Parses what the owner typed for a step. */
export function parseStep(step: AmountStep, text: string): number | null {
  return QUESTIONS[step].isCount ? parseCount(text) : parseUsd(text);
}

export function describeLimits(l: ChosenLimits): string {
  const rentals = l.maxConcurrentDeployments === 1 ? '1 rental at a time' : `${l.maxConcurrentDeployments} rentals at a time`;
  return `${formatUsd(l.maxPerRentalMinor)} per rental, ${formatUsd(l.budgetLimitMinor)} in total, ${rentals}`;
}

/**
 * Parses `/newagent 5 50 1 [name]`-style arguments. Null when no arguments were given (start the
 * dialogue), otherwise the limits or every problem found, in one reply.
 */
export function parseLimitArgs(args: string): { limits: ChosenLimits; name?: string } | { errors: string[] } | null {
  const parts = args.trim().split(/\s+/).filter(Boolean);
  if (parts.length === 0) return null;
  if (parts.length < 3) {
    return { errors: ['Send all three limits in one line: per-rental USD, total USD and concurrent rentals, for example /newagent 5 50 1'] };
  }
  const errors: string[] = [];
  const values: Partial<ChosenLimits> = {};
  STEPS.forEach((step, i) => {
    const parsed = parseStep(step, parts[i]);
    const checked = checkLimit(step, parsed);
    if (checked.ok) values[FIELD[step]] = checked.value;
    else if (parsed === null) {
      const want = QUESTIONS[step].isCount ? 'a whole number' : 'an amount in US dollars';
      errors.push(`${QUESTIONS[step].label}: "${parts[i].slice(0, 20)}" is not ${want}.`);
    } else errors.push(checked.error);
  });
  if (errors.length) return { errors };
  const name = parts.slice(3).join(' ').slice(0, 100) || undefined;
  return { limits: values as ChosenLimits, name };
}

export type CompleteHandler = (ctx: BotContext, conversation: Conversation, limits: ChosenLimits) => Promise<void>;

export interface DialogueOptions {
  /** Runs when all three limits are known; the handler clears or advances the conversation. */
  onComplete: Record<ConversationKind, CompleteHandler>;
}

/** Starts asking for the three limits in this chat, replacing any dialogue in progress. */
export async function startLimitsDialogue(
  ctx: BotContext,
  kind: ConversationKind,
  extra: { approvalCode?: string; name?: string; expiresAt: Date },
): Promise<void> {
  const conversation: Conversation = {
    chatId: ctx.chat!.id,
    accountId: ownerOf(ctx).id,
    kind,
    step: 'perRental',
    data: { nonce: ConversationStore.nonce(), approvalCode: extra.approvalCode, name: extra.name },
    expiresAt: extra.expiresAt,
  };
  await ctx.conversations.save(conversation);
  await ask(ctx, conversation, 'perRental');
}

async function ask(ctx: BotContext, conversation: Conversation, step: AmountStep): Promise<void> {
  const q = QUESTIONS[step];
  const kb = new InlineKeyboard();
  for (const v of q.presets) kb.text(q.isCount ? String(v) : formatUsdShort(v), `lim:${conversation.data.nonce}:${step}:${v}`);
  kb.row().text('Cancel', `lim:${conversation.data.nonce}:cancel`);
  const n = STEPS.indexOf(step) + 1;
  await ctx.reply(`<b>Step ${n} of 3.</b> ${html(q.question)}`, { parse_mode: 'HTML', reply_markup: kb });
}

/**
 * Records one answer, then asks the next question or completes. False when the answer lost a
 * race with another answer to the same question (double press, two webhook processes).
 */
async function answer(ctx: BotContext, conversation: Conversation, step: AmountStep, value: number, options: DialogueOptions): Promise<boolean> {
  conversation.data[FIELD[step]] = value;
  const next = STEPS[STEPS.indexOf(step) + 1];
  if (next) {
    conversation.step = next;
    if (!(await ctx.conversations.advance(conversation, step))) return false;
    await ask(ctx, conversation, next);
    return true;
  }
  if (!(await ctx.conversations.take(conversation, step))) return false;
  const limits: ChosenLimits = {
    maxPerRentalMinor: conversation.data.maxPerRentalMinor!,
    budgetLimitMinor: conversation.data.budgetLimitMinor!,
    maxConcurrentDeployments: conversation.data.maxConcurrentDeployments!,
  };
  await options.onComplete[conversation.kind](ctx, conversation, limits);
  return true;
}

/** Buttons and typed answers of the limits dialogue. */
export function limitsDialogue(options: DialogueOptions): Composer<BotContext> {
  const composer = new Composer<BotContext>();

  composer.callbackQuery(/^lim:([A-Za-z0-9_-]{1,16}):(perRental|budget|concurrent|cancel)(?::(\d{1,9}))?$/, async (ctx) => {
    const [, nonce, step, raw] = ctx.match;
    const conversation = await ctx.conversations.get(ctx.chat!.id);
    if (!conversation || conversation.data.nonce !== nonce) {
      await ctx.answerCallbackQuery({ text: 'This question is no longer open. Start again with /newagent or the approval link.', show_alert: true });
      return;
    }
    if (step === 'cancel') {
      await ctx.conversations.clear(ctx.chat!.id);
      await ctx.answerCallbackQuery({ text: 'Cancelled.' });
      await ctx.editMessageText('Cancelled. Nothing was created.');
      return;
    }
    const s = step as AmountStep;
    if (conversation.step !== s || raw === undefined) {
      await ctx.answerCallbackQuery({ text: 'That question was already answered.' });
      return;
    }
    const checked = checkLimit(s, Number(raw));
    if (!checked.ok) {
      await ctx.answerCallbackQuery({ text: checked.error, show_alert: true });
      return;
    }
    const shown = QUESTIONS[s].isCount ? String(checked.value) : formatUsd(checked.value);
    if (!(await answer(ctx, conversation, s, checked.value, options))) {
      await ctx.answerCallbackQuery({ text: 'That question was already answered.' });
      return;
    }
    await ctx.answerCallbackQuery();
    await ctx.editMessageText(`${QUESTIONS[s].label}: ${shown}`);
  });

  // Typed answers: any plain text while a limit question is open.
  composer.on('message:text', async (ctx, next) => {
    if (ctx.message.text.startsWith('/')) return next();
    const conversation = await ctx.conversations.get(ctx.chat.id);
    if (!conversation) return next();
    if (conversation.step === 'confirm') {
      await ctx.reply('Please use the Approve or Cancel button above, or send /cancel.');
      return;
    }
    const s = conversation.step as AmountStep;
    const checked = checkLimit(s, parseStep(s, ctx.message.text));
    if (!checked.ok) {
      await ctx.reply(`${checked.error} Or /cancel to stop.`);
      return;
    }
    if (!(await answer(ctx, conversation, s, checked.value, options))) await ctx.reply('That question was already answered.');
  });

  return composer;
}
