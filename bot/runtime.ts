import { createHash, timingSafeEqual } from 'node:crypto';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { webhookCallback, type Bot } from 'grammy';
import { createBotJobs, type Services } from '../src/container.js';
import { errorEnvelope } from '../src/errors/envelope.js';
import { startJobWorker } from '../src/jobs/agenda.js';
import type { NotificationsService } from '../src/modules/notifications/notifications.service.js';
import { ALLOWED_UPDATES, COMMANDS } from './bot.js';
import type { BotContext } from './context.js';
import { telegramSender } from './notifier.js';

/** Where Telegram posts updates in webhook mode (api role). */
export const WEBHOOK_PATH = '/telegram/webhook';

/**
 * Webhook mode: the api role takes updates on WEBHOOK_PATH, accepting only requests that carry
 * the configured secret in X-Telegram-Bot-Api-Secret-Token (anything else gets 401). Conversation
 * state is in MySQL, so any number of api processes may take updates.
 */
export function mountTelegramWebhook(app: Express, bot: Bot<BotContext>, secretToken: string): void {
  const expected = createHash('sha256').update(secretToken).digest();
  app.post(
    WEBHOOK_PATH,
    // The secret is checked before the body is read: an unauthenticated caller costs no parsing.
    (req: Request, res: Response, next: NextFunction) => {
      const given = req.headers['x-telegram-bot-api-secret-token'];
      const ok = typeof given === 'string' && timingSafeEqual(createHash('sha256').update(given).digest(), expected);
      if (ok) return next();
      res
        .status(401)
        .json(
          errorEnvelope(
            req.requestId ?? 'unknown',
            'UNAUTHENTICATED',
            'Missing or wrong X-Telegram-Bot-Api-Secret-Token.',
          ),
        );
    },
    express.json({ limit: '1mb' }),
    webhookCallback(bot, 'express', { secretToken, onTimeout: 'return', timeoutMilliseconds: 9_000 }),
  );
}

export interface BotRole {
  mode: 'polling' | 'webhook';
  notifications: NotificationsService;
  stop(): Promise<void>;
}

/** How long stopping waits for a notification being sent; after it, the job's lock expires for the next bot process. */
const DRAIN_TIMEOUT_MS = 10_000;

/**
 * The bot role: registers the command menu, then either long-polls (default) or points Telegram
 * at the api role's webhook route, and runs the owner-notification jobs (collect every
 * `notifyIntervalMs`, default TELEGRAM_NOTIFY_SECONDS; deliver as they are enqueued).
 */
export async function startBotRole(
  services: Services,
  bot: Bot<BotContext>,
  opts: { notifyIntervalMs?: number } = {},
): Promise<BotRole> {
  const { config, logger } = services;
  const log = logger.child({ component: 'telegram-bot' });
  await bot.init();
  try {
    await bot.api.setMyCommands(COMMANDS);
  } catch (err) {
    log.warn({ err }, 'could not set the bot command menu');
  }
  const secret = config.telegram.webhookSecret;
  let polling: Promise<void> | undefined;
  if (secret) {
    await bot.api.setWebhook(`${config.http.publicBaseUrl}${WEBHOOK_PATH}`, {
      secret_token: secret,
      allowed_updates: [...ALLOWED_UPDATES],
    });
    log.info({ username: bot.botInfo.username }, 'Telegram bot on, webhook mode');
  } else {
    polling = bot
      .start({
        allowed_updates: [...ALLOWED_UPDATES],
        onStart: (me) => log.info({ username: me.username }, 'Telegram bot on, long polling'),
      })
      .catch((err) => log.error({ err }, 'Telegram long polling stopped'));
  }
  const botJobs = createBotJobs(services, telegramSender(bot.api), { collectEveryMs: opts.notifyIntervalMs });
  const jobs = await startJobWorker(botJobs);
  return {
    mode: secret ? 'webhook' : 'polling',
    notifications: botJobs.notifications,
    async stop() {
      await jobs.stop({ timeoutMs: DRAIN_TIMEOUT_MS });
      if (polling) {
        await bot.stop();
        await polling;
      }
    },
  };
}
