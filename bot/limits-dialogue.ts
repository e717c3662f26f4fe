import { Composer, InlineKeyboard } from 'grammy';
import {
  APPROVAL_LIMITS,
  IDLE_TERMINATE_MINUTES,
  idleTerminateMinutesProblem,
  MAX_RENTAL_SECONDS,
  maxRentalSecondsProblem,
  type KeyAmounts,
  type KeyLimits,
} from '../src/modules/keys/key-limits.js';
import { describeRentalLength, parseRentalLength } from '../src/modules/keys/rental-length.js';
import {
  ConversationStore,
  type Conversation,
  type ConversationKind,
  type LimitStep,
} from '../src/modules/telegram/conversation-store.js';
import { ownerOf, type BotContext } from './context.js';
import { html, parseCount } from './format.js';
import { DOLLARS_HINT, formatUsd, formatUsdShort, parseUsd } from '../src/vocabulary/money.js';

/** The questions of the dialogue, in order: three amounts, the longest rental, then how long idle. */
type DialogueStep = Exclude<LimitStep, 'confirm'>;
export type AmountStep = Exclude<DialogueStep, 'rentalLength' | 'idleMinutes'>;

const STEPS: DialogueStep[] = ['perRental', 'budget', 'concurrent', 'rentalLength', 'idleMinutes'];
export const AMOUNT_STEPS: AmountStep[] = ['perRental', 'budget', 'concurrent'];

/** The longest rental's question and its preset buttons (seconds); "No limit" is a button of its own. */
const RENTAL_LENGTH = {
  question:
    'How long may one rental run at most? Pick a length, type one such as 8h, 90m or 2d ' +
    `(${describeRentalLength(MAX_RENTAL_SECONDS.minimum)} to ${describeRentalLength(MAX_RENTAL_SECONDS.maximum)}), or choose No limit.`,
  presets: [3600, 4 * 3600, 8 * 3600, 24 * 3600, 3 * 86_400],
  label: 'Longest rental',
};

/** Minutes as the owner reads them: "45 min", "1 h", "1 h 30 min"; "no limit" for null. */
export function describeIdleMinutes(minutes: number | null): string {
  if (minutes === null) return 'no limit';
  const hours = Math.floor(minutes / 60);
  const rest = minutes % 60;
  if (hours === 0) return `${rest} min`;
  return rest === 0 ? `${hours} h` : `${hours} h ${rest} min`;
}

/** The idle question and its preset buttons (minutes); "No limit" is a button of its own. */
const IDLE_MINUTES = {
  question:
    "How long may a rental's GPUs sit idle (under 5 % busy) before it is warned and then stopped? " +
    'Pick a time, type minutes such as 45 or a length such as 90m or 2h ' +
    `(${describeIdleMinutes(IDLE_TERMINATE_MINUTES.minimum)} to ${describeIdleMinutes(IDLE_TERMINATE_MINUTES.maximum)}), or choose No limit to never stop idle rentals.`,
  presets: [15, 30, 60, 120],
  label: 'Stop when idle',
};

export const QUESTIONS: Record<
  AmountStep,
  { question: string; presets: number[]; isCount: boolean; label: string; noun: string }
> = {
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

export const FIELD: Record<AmountStep, keyof KeyAmounts> = {
  perRental: 'maxPerRentalMinor',
  budget: 'budgetLimitMinor',
  concurrent: 'maxConcurrentDeployments',
};

/** A value for one step checked against the minimums; the error is a sentence for the owner. */
export function checkLimit(
  step: AmountStep,
  value: number | null,
): { ok: true; value: number } | { ok: false; error: string } {
  const field = FIELD[step];
  if (value === null) {
    return {
      ok: false,
      error: QUESTIONS[step].isCount
        ? 'Please send a whole number, for example 2.'
        : `Please send an amount in US dollars: ${DOLLARS_HINT}.`,
    };
  }
  // The bounds the API holds approvals to, so the bot never accepts what the service would refuse.
  const min = APPROVAL_LIMITS.minimums[field];
  const max = APPROVAL_LIMITS.maximums[field];
  const show = (n: number) => (QUESTIONS[step].isCount ? String(n) : formatUsd(n));
  if (value < min)
    return { ok: false, error: `The ${QUESTIONS[step].noun} must be at least ${show(min)}; you sent ${show(value)}.` };
  if (value > max)
    return { ok: false, error: `The ${QUESTIONS[step].noun} can be at most ${show(max)}; you sent ${show(value)}.` };
  return { ok: true, value };
}

/**
 * The longest rental as typed or pressed (seconds; null: no limit; undefined: not a length),
 * checked against the bounds the API holds every key to; the error is a sentence for the owner.
 */
export function checkRentalLength(
  value: number | null | undefined,
): { ok: true; value: number | null } | { ok: false; error: string } {
  if (value === undefined)
    return { ok: false, error: 'Please send a length such as 8h, 90m or 2d, or "none" for no limit.' };
  if (maxRentalSecondsProblem(value)) {
    const range = `${describeRentalLength(MAX_RENTAL_SECONDS.minimum)} to ${describeRentalLength(MAX_RENTAL_SECONDS.maximum)}`;
    return { ok: false, error: `The longest rental must be from ${range}; you sent ${describeRentalLength(value)}.` };
  }
  return { ok: true, value };
}

/**
 * Idle minutes as typed: a bare whole number is minutes (the question asks for minutes), anything
 * else a length with its unit; null for "none"; undefined when the text is neither.
 */
export function parseIdleMinutes(input: string): number | null | undefined {
  const s = input.trim();
  if (/^\d{1,6}$/.test(s)) return Number(s);
  const seconds = parseRentalLength(s);
  return typeof seconds === 'number' ? seconds / 60 : seconds;
}

/**
 * Idle minutes as typed or pressed (null: never stop idle rentals; undefined: not a time), checked
 * against the bounds the API holds every key to; the error is a sentence for the owner.
 */
export function checkIdleMinutes(
  value: number | null | undefined,
): { ok: true; value: number | null } | { ok: false; error: string } {
  if (value === undefined)
    return { ok: false, error: 'Please send minutes such as 45, a length such as 2h, or "none" for no limit.' };
  if (value !== null && !Number.isInteger(value))
    return { ok: false, error: 'The idle time must be whole minutes, for example 45 or 1h30m.' };
  if (idleTerminateMinutesProblem(value)) {
    const range = `${describeIdleMinutes(IDLE_TERMINATE_MINUTES.minimum)} to ${describeIdleMinutes(IDLE_TERMINATE_MINUTES.maximum)}`;
    return { ok: false, error: `The idle time must be from ${range}; you sent ${describeIdleMinutes(value)}.` };
  }
  return { ok: true, value };
}

/** Parses what the owner typed for a step. */
export function parseStep(step: AmountStep, text: string): number | null {
  return QUESTIONS[step].isCount ? parseCount(text) : parseUsd(text);
}

export type CompleteHandler = (ctx: BotContext, conversation: Conversation, limits: KeyLimits) => Promise<void>;

export interface DialogueOptions {
  /** Runs when every limit is known; the handler clears or advances the conversation. */
  onComplete: Record<ConversationKind, CompleteHandler>;
}

/** Starts asking for the limits in this chat, replacing any dialogue in progress. */
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

/** A preset length's button: "8 h", "3 days". */
function lengthButton(seconds: number): string {
  return seconds <= 86_400 ? `${seconds / 3600} h` : `${seconds / 86_400} days`;
}

async function ask(ctx: BotContext, conversation: Conversation, step: DialogueStep): Promise<void> {
  const nonce = conversation.data.nonce;
  const kb = new InlineKeyboard();
  let question: string;
  if (step === 'rentalLength') {
    for (const v of RENTAL_LENGTH.presets) kb.text(lengthButton(v), `lim:${nonce}:${step}:${v}`);
    kb.row().text('No limit', `lim:${nonce}:${step}:none`);
    question = RENTAL_LENGTH.question;
  } else if (step === 'idleMinutes') {
    for (const v of IDLE_MINUTES.presets) kb.text(describeIdleMinutes(v), `lim:${nonce}:${step}:${v}`);
    kb.row().text('No limit', `lim:${nonce}:${step}:none`);
    question = IDLE_MINUTES.question;
  } else {
    const q = QUESTIONS[step];
    for (const v of q.presets) kb.text(q.isCount ? String(v) : formatUsdShort(v), `lim:${nonce}:${step}:${v}`);
    kb.row();
    question = q.question;
  }
  kb.text('Cancel', `lim:${nonce}:cancel`);
  const n = STEPS.indexOf(step) + 1;
  await ctx.reply(`<b>Step ${n} of ${STEPS.length}.</b> ${html(question)}`, { parse_mode: 'HTML', reply_markup: kb });
}

type Checked = { ok: true; value: number | null; shown: string } | { ok: false; error: string };

/** An answer to `step`, pressed (the button's value) or typed, checked; with how it reads back to the owner. */
function checkAnswer(step: DialogueStep, input: { pressed: string } | { typed: string }): Checked {
  if (step === 'rentalLength') {
    const value =
      'pressed' in input ? (input.pressed === 'none' ? null : Number(input.pressed)) : parseRentalLength(input.typed);
    const checked = checkRentalLength(value);
    return checked.ok ? { ...checked, shown: describeRentalLength(checked.value) } : checked;
  }
  if (step === 'idleMinutes') {
    const value =
      'pressed' in input ? (input.pressed === 'none' ? null : Number(input.pressed)) : parseIdleMinutes(input.typed);
    const checked = checkIdleMinutes(value);
    return checked.ok ? { ...checked, shown: describeIdleMinutes(checked.value) } : checked;
  }
  const value =
    'pressed' in input ? (/^\d+$/.test(input.pressed) ? Number(input.pressed) : null) : parseStep(step, input.typed);
  const checked = checkLimit(step, value);
  return checked.ok
    ? { ...checked, shown: QUESTIONS[step].isCount ? String(checked.value) : formatUsd(checked.value) }
    : checked;
}

/**
 * Records one answer, then asks the next question or completes. False when the answer lost a
 * race with another answer to the same question (double press, two webhook processes).
 */
async function answer(
  ctx: BotContext,
  conversation: Conversation,
  step: DialogueStep,
  value: number | null,
  options: DialogueOptions,
): Promise<boolean> {
  if (step === 'rentalLength') conversation.data.maxRentalSeconds = value;
  else if (step === 'idleMinutes') conversation.data.idleTerminateMinutes = value;
  else conversation.data[FIELD[step]] = value!;
  const next = STEPS[STEPS.indexOf(step) + 1];
  if (next) {
    conversation.step = next;
    if (!(await ctx.conversations.advance(conversation, step))) return false;
    await ask(ctx, conversation, next);
    return true;
  }
  if (!(await ctx.conversations.take(conversation, step))) return false;
  await options.onComplete[conversation.kind](ctx, conversation, limitsOf(conversation));
  return true;
}

/** The limits a dialogue gathered; a dialogue begun before the longest rental or the idle time was asked has none. */
export function limitsOf(conversation: Conversation): KeyLimits {
  return {
    maxPerRentalMinor: conversation.data.maxPerRentalMinor!,
    budgetLimitMinor: conversation.data.budgetLimitMinor!,
    maxConcurrentDeployments: conversation.data.maxConcurrentDeployments!,
    maxRentalSeconds: conversation.data.maxRentalSeconds ?? null,
    idleTerminateMinutes: conversation.data.idleTerminateMinutes ?? null,
  };
}

/** Buttons and typed answers of the limits dialogue. */
export function limitsDialogue(options: DialogueOptions): Composer<BotContext> {
  const composer = new Composer<BotContext>();

  composer.callbackQuery(
    /^lim:([A-Za-z0-9_-]{1,16}):(perRental|budget|concurrent|rentalLength|idleMinutes|cancel)(?::(\d{1,9}|none))?$/,
    async (ctx) => {
      const [, nonce, step, raw] = ctx.match;
      const conversation = await ctx.conversations.get(ctx.chat!.id);
      if (!conversation || conversation.data.nonce !== nonce) {
        await ctx.answerCallbackQuery({
          text: 'This question is no longer open. Start again with /newagent or the approval link.',
          show_alert: true,
        });
        return;
      }
      if (step === 'cancel') {
        await ctx.conversations.clear(ctx.chat!.id);
        await ctx.answerCallbackQuery({ text: 'Cancelled.' });
        await ctx.editMessageText('Cancelled. Nothing was created.');
        return;
      }
      const s = step as DialogueStep;
      if (conversation.step !== s || raw === undefined) {
        await ctx.answerCallbackQuery({ text: 'That question was already answered.' });
        return;
      }
      const checked = checkAnswer(s, { pressed: raw });
      if (!checked.ok) {
        await ctx.answerCallbackQuery({ text: checked.error, show_alert: true });
        return;
      }
      if (!(await answer(ctx, conversation, s, checked.value, options))) {
        await ctx.answerCallbackQuery({ text: 'That question was already answered.' });
        return;
      }
      await ctx.answerCallbackQuery();
      const label =
        s === 'rentalLength' ? RENTAL_LENGTH.label : s === 'idleMinutes' ? IDLE_MINUTES.label : QUESTIONS[s].label;
      await ctx.editMessageText(`${label}: ${checked.shown}`);
    },
  );

  // Typed answers: any plain text while a limit question is open.
  composer.on('message:text', async (ctx, next) => {
    if (ctx.message.text.startsWith('/')) return next();
    const conversation = await ctx.conversations.get(ctx.chat.id);
    if (!conversation) return next();
    if (conversation.step === 'confirm') {
      await ctx.reply('Please use the Approve or Cancel button above, or send /cancel.');
      return;
    }
    const s = conversation.step as DialogueStep;
    const checked = checkAnswer(s, { typed: ctx.message.text });
    if (!checked.ok) {
      await ctx.reply(`${checked.error} Or /cancel to stop.`);
      return;
    }
    if (!(await answer(ctx, conversation, s, checked.value, options)))
      await ctx.reply('That question was already answered.');
  });

  return composer;
}
