import { ConfigError, int, opt, optUrl, type Env } from '../config-values.js';

/** The Telegram owner bot (the `bot` role), on when `botToken` is set. */
export interface TelegramConfig {
  botToken?: string;
  /** Base URL of the Bot API server; Telegram's when unset. */
  apiRoot?: string;
  /** The bot's username, for the "Approve in Telegram" deep links of approval pages. */
  botUsername?: string;
  /** Webhook mode instead of long polling: the secret token Telegram sends with each update. */
  webhookSecret?: string;
  /** How often the bot role scans for owner notifications to send. */
  notifySeconds: number;
}

/** TELEGRAM_BOT_TOKEN, TELEGRAM_API_ROOT, TELEGRAM_BOT_USERNAME, TELEGRAM_WEBHOOK_SECRET and TELEGRAM_NOTIFY_SECONDS. */
export function readTelegram(env: Env): TelegramConfig {
  return {
    botToken: opt(env, 'TELEGRAM_BOT_TOKEN', { secret: true }),
    apiRoot: optUrl(env, 'TELEGRAM_API_ROOT', ['http:', 'https:']),
    botUsername: opt(env, 'TELEGRAM_BOT_USERNAME'),
    webhookSecret: webhookToken(env),
    notifySeconds: int(env, 'TELEGRAM_NOTIFY_SECONDS', 10, 1, 3600),
  };
}

/** Telegram accepts 1-256 characters of A-Za-z0-9_- as a webhook secret token. */
function webhookToken(env: Env): string | undefined {
  const v = opt(env, 'TELEGRAM_WEBHOOK_SECRET', { secret: true });
  if (v !== undefined && !/^[A-Za-z0-9_-]{1,256}$/.test(v)) {
    throw new ConfigError('TELEGRAM_WEBHOOK_SECRET must be 1-256 characters of A-Z, a-z, 0-9, _ and -');
  }
  return v;
}
