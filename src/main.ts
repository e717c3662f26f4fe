import { createServer, type Server } from 'node:http';
import type { Express } from 'express';
import { systemClock } from './clock.js';
import {
  assertSafeToRun,
  ConfigError,
  configErrorLine,
  loadConfig,
  parseRoles,
  type Config,
  type Role,
} from './config.js';
import { offSurfaces } from './operator-surfaces.js';
import { createApp } from './app.js';
import { createServices, type Services } from './container.js';
import { isConnectionError } from './db/connection-errors.js';
import {
  createDatabaseIfMissing,
  createDataSource,
  describeTarget,
  migrate,
  parseDatabaseUrl,
} from './db/data-source.js';
import { entities } from './entities.js';
import { createLogger, type Logger } from './logger.js';
import { createProviderRegistry } from './providers/provider-registry.js';
import { startWorker, type Worker } from './worker.js';
import { startMetricsListener } from './metrics-listener.js';
import { readinessProbe } from './readiness.js';
import { runOwnerCommand } from './cli/owner-command.js';
import { LABEL_PREFIX } from './modules/rentals/lifecycle/rental-lifecycle.js';
import type { BotRole } from '../bot/runtime.js';

const START_MARIADB = 'start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd';

/** Binds the api role's port, or stops the process with one line saying what to change. */
async function listen(app: Express, port: number, host: string): Promise<Server> {
  const server = createServer(app);
  return new Promise<Server>((resolve) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      const why: Record<string, string> = {
        EADDRINUSE: `port ${port} is in use; set PORT`,
        EACCES: `port ${port} needs privileges this process lacks; set PORT`,
        EADDRNOTAVAIL: `HOST ${host} is not an address of this machine; set HOST`,
        ENOTFOUND: `HOST ${host} is not an address of this machine; set HOST`,
      };
      process.stderr.write(
        `${why[err.code ?? ''] ?? `cannot listen on ${host}:${port} (${err.code ?? err.message}); set HOST or PORT`}\n`,
      );
      process.exit(1);
    });
    server.listen(port, host, () => resolve(server));
  });
}

/** The address to show in a first command: a wildcard bind is reached through loopback. */
function localUrl(host: string, port: number): string {
  const h = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return `http://${h}:${port}`;
}

async function run(config: Config, roles: Role[], logger: Logger): Promise<() => Promise<void>> {
  const target = parseDatabaseUrl(config.db.url);
  let created: boolean;
  try {
    created = await createDatabaseIfMissing(config.db.url);
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
  const ds = createDataSource(config.db.url, 10, entities);
  await ds.initialize();
  logger.info(`database ${target.database} ${created ? 'created' : 'found'} at ${describeTarget(target)}`);
  const applied = await migrate(ds);
  logger.info(
    { migrations: applied },
    applied.length ? `migrations applied: ${applied.join(', ')}` : 'migrations: none pending',
  );
  if (config.secrets.generated)
    logger.warn(
      'SECRETS_KEY is not set: using the fixed development key, which protects nothing (production refuses it)',
    );

  const providers = await createProviderRegistry(config.providers, {
    logger: logger.child({ component: 'provider' }),
    clock: systemClock,
    dataSource: ds,
    production: config.nodeEnv === 'production',
    labelPrefix: LABEL_PREFIX,
  });
  const services: Services = createServices({ config, ds, clock: systemClock, logger, providers });
  logger.info(`providers loaded: ${config.providers.map((p) => p.id).join(', ')}`);

  let server: Server | undefined;
  let worker: Worker | undefined;
  let botRole: BotRole | undefined;
  const token = config.telegram.botToken;
  const webhookSecret = config.telegram.webhookSecret;
  // The bot role polls or registers the webhook; in webhook mode every api process takes updates.
  // The bot and grammY are loaded only by a process that runs them, not by every api and worker.
  const botModules =
    token && (roles.includes('bot') || (roles.includes('api') && webhookSecret))
      ? await Promise.all([import('../bot/bot.js'), import('../bot/runtime.js')])
      : undefined;
  const bot =
    token && botModules ? botModules[0].createBot({ services, token, apiRoot: config.telegram.apiRoot }) : undefined;
  const readiness = readinessProbe(services, roles);
  const metricsServer = await startMetricsListener(services, roles, readiness);
  if (roles.includes('api')) {
    const app = createApp(services, {
      mount:
        bot && botModules && webhookSecret
          ? (a) => botModules[1].mountTelegramWebhook(a, bot, webhookSecret)
          : undefined,
      readiness,
    });
    // Bound before any job starts, so a taken port stops the process before it claims work.
    server = await listen(app, config.http.port, config.http.host);
    const local = localUrl(config.http.host, config.http.port);
    logger.info(
      { host: config.http.host, port: config.http.port, url: config.http.publicBaseUrl, roles },
      `GPU rental service listening on ${config.http.host}:${config.http.port} (public URL ${config.http.publicBaseUrl}, docs at /docs); try: curl ${local}/api/v1/gpus`,
    );
  }
  for (const line of offSurfaces(config, roles)) logger.info(line);
  if (roles.includes('worker')) worker = await startWorker(services);
  else logger.info('no worker role here: inventory is refreshed by worker processes');
  if (roles.includes('bot') && !config.telegram.botToken) {
    logger.info('bot role: TELEGRAM_BOT_TOKEN is not set, so the Telegram bot is off');
  }
  if (roles.includes('bot') && bot && botModules) botRole = await botModules[1].startBotRole(services, bot);

  return async () => {
    // Open event streams and waiting reads end now, so closing the server does not wait out their minutes.
    await services.eventHub.stop();
    // Side by side: jobs stop being claimed at once instead of after the last HTTP request ends.
    await Promise.all([
      botRole?.stop(),
      server && new Promise<void>((r) => server!.close(() => r())),
      metricsServer && new Promise<void>((r) => metricsServer.close(() => r())),
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
    if (process.argv[2] !== 'owner') assertSafeToRun(config);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${configErrorLine(err)}\n`);
      process.exit(1);
    }
    throw err;
  }
  if (process.argv[2] === 'owner') {
    const io = { out: (t: string) => void process.stdout.write(t), err: (t: string) => void process.stderr.write(t) };
    // An owner command is done when it returns: a timer a library leaves behind (Agenda keeps one per
    // job the canary's worker ran, for up to a minute) must not hold the process after its report.
    process.exit(await runOwnerCommand(process.argv.slice(3), config, io));
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
