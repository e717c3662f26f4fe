import { Bot, BotError, GrammyError, HttpError, type Middleware } from 'grammy';
import type { UserFromGetMe } from 'grammy/types';
import type { Services } from '../src/container.js';
import { AppError } from '../src/errors/app-error.js';
import { ConversationStore } from '../src/modules/telegram/conversation-store.js';
import type { BotContext } from './context.js';
import { agentsFeature } from './features/agents.feature.js';
import { approveFeature, completeApproval } from './features/approve.feature.js';
import { balanceFeature, topupLinkFeature } from './features/balance.feature.js';
import { completeNewAgent, newAgentFeature } from './features/newagent.feature.js';
import { notifyFeature } from './features/notify.feature.js';
import { ownerKeyFeature } from './features/ownerkey.feature.js';
import { privateChatsFeature } from './features/private-chats.feature.js';
import { rentalsFeature } from './features/rentals.feature.js';
import { COMMANDS, startFeature } from './features/start.feature.js';
import { unhandledFeature } from './features/unhandled.feature.js';
import { limitsDialogue } from './limits-dialogue.js';

export { COMMANDS };

/** The update kinds the bot acts on; anything else is not even fetched. */
export const ALLOWED_UPDATES = ['message', 'edited_message', 'callback_query', 'my_chat_member'] as const;

export interface BotDeps {
  services: Services;
  token: string;
  /** Bot API base URL (a local fake in tests); Telegram's when unset. */
  apiRoot?: string;
  /** Skips the getMe call at start when the bot's identity is already known. */
  botInfo?: UserFromGetMe;
}

/**
 * The Telegram owner bot: one Composer per feature behind an error boundary, the private-chat
 * gate first and the `unhandled` feature last. Every piece of state lives in MySQL, so the same
 * bot can run as a long-polling process or behind the api role's webhook route.
 */
export function createBot(deps: BotDeps): Bot<BotContext> {
  const { services } = deps;
  const log = services.logger.child({ component: 'telegram-bot' });
  const bot = new Bot<BotContext>(deps.token, {
    botInfo: deps.botInfo,
    client: { ...(deps.apiRoot ? { apiRoot: deps.apiRoot } : {}) },
  });
  const conversations = new ConversationStore(services.store, services.clock);

  bot.use(async (ctx, next) => {
    ctx.services = services;
    ctx.conversations = conversations;
    await next();
  });

  bot.errorBoundary(
    async (err) => {
      await onFeatureError(err, log);
    },
    privateChatsFeature(),
    ownerMiddleware(),
    approveFeature(),
    topupLinkFeature(),
    startFeature(),
    newAgentFeature(),
    agentsFeature(),
    balanceFeature(),
    rentalsFeature(),
    ownerKeyFeature(),
    notifyFeature(),
    limitsDialogue({ onComplete: { newagent: completeNewAgent, approve: completeApproval } }),
    unhandledFeature(),
  );

  // Errors outside the boundary (the setup middleware) must not stop long polling either.
  bot.catch((err) => {
    log.error({ err: err.error, updateId: err.ctx.update.update_id }, 'telegram update failed');
  });
  return bot;
}

/** Finds or creates the owner account of the person in a private chat, for messages and button presses. */
function ownerMiddleware(): Middleware<BotContext> {
  return async (ctx, next) => {
    if (!ctx.message && !ctx.callbackQuery) return; // edits, member updates: nothing to do
    if (!ctx.from || ctx.from.is_bot || ctx.chat?.type !== 'private') return;
    ctx.owner = await ctx.services.accounts.findOrCreateTelegramOwner(ctx.from.id, ctx.chat.id);
    await next();
  };
}

async function onFeatureError(err: BotError<BotContext>, log: Services['logger']): Promise<void> {
  const ctx = err.ctx;
  const e = err.error;
  // AGENTS_DISABLED is a 503 but a standing answer, not a fault: say it plainly, do not suggest a retry.
  const expected = e instanceof AppError && (e.status < 500 || e.code === 'AGENTS_DISABLED');
  if (expected) log.warn({ code: (e as AppError).code, updateId: ctx.update.update_id }, 'telegram update refused');
  else if (e instanceof GrammyError || e instanceof HttpError)
    log.error({ err: e, updateId: ctx.update.update_id }, 'Bot API call failed');
  else log.error({ err: e, updateId: ctx.update.update_id }, 'telegram update failed');
  const text = expected ? (e as AppError).message : 'Something went wrong on our side. Please try again in a moment.';
  try {
    if (ctx.callbackQuery) await ctx.answerCallbackQuery({ text: text.slice(0, 190), show_alert: true });
    else if (ctx.chat?.type === 'private') await ctx.reply(text);
  } catch {
    // The reply itself failed (Telegram unreachable, chat blocked); the log line above is all we can do.
  }
}
