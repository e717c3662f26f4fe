import type { Server } from 'node:http';
import { systemClock } from './clock.js';
import { ConfigError, configErrorLine, loadConfig, parseRoles, type Config, type Role } from './config.js';
import { createApp } from './app.js';
import { createServices, type Services } from './container.js';
import { createDatabaseIfMissing, createDataSource, describeTarget, migrate, parseDatabaseUrl } from './db/data-source.js';
import { createLogger, type Logger } from './logger.js';
import { createProviderRegistry } from './providers/provider-registry.js';
import { startWorker, type Worker } from './worker.js';
import { LABEL_PREFIX } from './modules/rentals/lifecycle/rental-lifecycle.js';
import { createBot } from '../bot/bot.js';
import { mountTelegramWebhook, startBotRole, type BotRole } from '../bot/runtime.js';

const START_MARIADB = 'start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd';

function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: string })?.code;
  return ['ECONNREFUSED', 'ENOTFOUND', 'ETIMEDOUT', 'EHOSTUNREACH', 'ER_ACCESS_DENIED_ERROR', 'PROTOCOL_CONNECTION_LOST'].includes(code ?? '');
}

async function run(config: Config, roles: Role[], logger: Logger): Promise<() => Promise<void>> {
  const target = parseDatabaseUrl(config.databaseUrl);
  try {
    await createDatabaseIfMissing(config.databaseUrl);
  } catch (err) {
    if (isConnectionError(err)) {
      process.stderr.write(
        `Cannot reach MySQL at ${describeTarget(target)} (${(err as { code?: string }).code}). ` +
          `Set DATABASE_URL, or start MariaDB on this machine with: ${START_MARIADB}\n`,
      );
      process.exit(1);
    }
    throw err;
  }
  const ds = createDataSource(config.databaseUrl);
  await ds.initialize();
  await migrate(ds);
  if (config.secretsKeyGenerated) logger.warn('SECRETS_KEY is not set: using the fixed development key, which protects nothing (production refuses it)');

  const providers = await createProviderRegistry(config.providers, {
    logger: logger.child({ component: 'provider' }),
    clock: systemClock,
    dataSource: ds,
    production: config.nodeEnv === 'production',
    labelPrefix: LABEL_PREFIX,
  });
  const services: Services = createServices({ config, ds, clock: systemClock, logger, providers });

  let server: Server | undefined;
  let worker: Worker | undefined;
  let botRole: BotRole | undefined;
  const token = config.telegramBotToken;
  const webhookSecret = config.telegramWebhookSecret;
  // The bot role polls or registers the webhook; in webhook mode every api process takes updates.
  const bot =
    token && (roles.includes('bot') || (roles.includes('api') && webhookSecret))
      ? createBot({ services, token, apiRoot: config.telegramApiRoot })
      : undefined;
  if (roles.includes('worker')) worker = await startWorker(services);
  if (roles.includes('api')) {
    let migrated = false;
    const app = createApp(services, {
      mount: bot && webhookSecret ? (a) => mountTelegramWebhook(a, bot, webhookSecret) : undefined,
      health: async () => {
        await ds.query('SELECT 1');
        if (!migrated) migrated = !(await ds.showMigrations());
        return migrated;
      },
    });
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(config.port, () => resolve(s));
    });
    logger.info({ port: config.port, url: config.publicBaseUrl, roles }, `GPU rental service listening on ${config.publicBaseUrl} (docs at /docs)`);
  }
  if (roles.includes('bot') && !config.telegramBotToken) {
    logger.info('bot role: TELEGRAM_BOT_TOKEN is not set, so the Telegram bot is off');
  }
  if (roles.includes('bot') && bot) botRole = await startBotRole(services, bot);

  return async () => {
    // Side by side: jobs stop being claimed at once instead of after the last HTTP request ends.
    await Promise.all([
      botRole?.stop(),
      server && new Promise<void>((r) => server!.close(() => r())),
      worker?.stop(),
    ]);
    await providers.close();
    await ds.destroy();
  };
}

async function main(): Promise<void> {
  let config: Config;
  let roles: Role[];
  try {
    config = loadConfig();
    roles = parseRoles(process.argv.slice(2));
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${configErrorLine(err)}\n`);
      process.exit(1);
    }
    throw err;
  }
  const logger = createLogger(config.logLevel);
  // Signals are taken from the start: one that arrives while the roles are still starting stops
  // them as soon as they are up, instead of killing the process halfway through.
  let stop: (() => Promise<void>) | undefined;
  let stopping: string | undefined;
  const shutdown = () => {
    logger.info({ signal: stopping }, 'shutting down');
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    stop!().then(
      () => process.exit(0),
      (err) => {
        logger.error({ err }, 'error during shutdown');
        process.exit(1);
      },
    );
  };
  const onSignal = (signal: string) => {
    if (stopping) return;
    stopping = signal;
    if (stop) shutdown();
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  stop = await run(config, roles, logger);
  if (stopping) shutdown();
}

main().catch((err) => {
  process.stderr.write(`Failed to start: ${(err as Error).message}\n`);
  process.exit(1);
});
