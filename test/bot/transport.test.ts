import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import supertest from 'supertest';
import { createBot } from '../../bot/bot.js';
import { mountTelegramWebhook, startBotRole, WEBHOOK_PATH } from '../../bot/runtime.js';
import { createApp } from '../../src/app.js';
import { FakeTelegramServer } from '../fakes/telegram-api.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { testDatabaseUrl } from '../helpers/db.js';
import { freePort, spawnService } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';
import { BOT_TOKEN, SETUP_CODE_RE, telegramId } from './harness.js';

const sentTo =
  (fake: FakeTelegramServer, chatId: number, mark = 0) =>
  (c: { method: string; params: Record<string, unknown>; seq: number }) =>
    c.method === 'sendMessage' && Number(c.params.chat_id) === chatId && c.seq > mark;

describe('Telegram bot transports', function () {
  this.timeout(30_000);

  describe('long polling (bot.start)', () => {
    let ctx: TestContext;
    let fake: FakeTelegramServer;
    before(async () => {
      ctx = await createTestContext({ env: { TELEGRAM_BOT_TOKEN: BOT_TOKEN } });
      fake = await FakeTelegramServer.start({ token: BOT_TOKEN, maxLongPollMs: 500 });
    });
    after(async () => {
      await fake.close();
      await ctx.close();
    });

    it('takes updates by getUpdates, confirms them, and picks up what arrived while it was down', async () => {
      const owner = fake.user(telegramId());
      const bot = createBot({ services: ctx.services, token: BOT_TOKEN, apiRoot: fake.url });
      const role = await startBotRole(ctx.services, bot, { notifyIntervalMs: 60_000 });
      assert.equal(role.mode, 'polling');
      assert.ok(
        fake.commands.some((c) => (c as { command?: string }).command === 'newagent'),
        'the command menu is registered',
      );

      await fake.inject(owner.message('/start'));
      const welcome = await fake.waitForCall(sentTo(fake, owner.from.id));
      assert.match(welcome.params.text, /Welcome/);
      await role.stop();
      assert.equal(fake.pendingUpdates, 0, 'stopping confirms the handled update');

      // Sent while no bot runs: Telegram keeps it; the next process answers it.
      const mark = fake.mark();
      await fake.inject(owner.message('/newagent 5 50 1'));
      const next = await startBotRole(
        ctx.services,
        createBot({ services: ctx.services, token: BOT_TOKEN, apiRoot: fake.url }),
        { notifyIntervalMs: 60_000 },
      );
      const reply = await fake.waitForCall(sentTo(fake, owner.from.id, mark));
      assert.match(reply.params.text, SETUP_CODE_RE);
      await next.stop();
      assert.equal(fake.pendingUpdates, 0);
    });
  });

  describe('webhook mode', () => {
    const SECRET = 'webhook_Secret-123';
    let ctx: TestContext;
    let fake: FakeTelegramServer;
    let server: Server;
    let role: Awaited<ReturnType<typeof startBotRole>>;
    before(async () => {
      const port = await freePort();
      ctx = await createTestContext({
        env: {
          TELEGRAM_BOT_TOKEN: BOT_TOKEN,
          TELEGRAM_WEBHOOK_SECRET: SECRET,
          PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
        },
      });
      fake = await FakeTelegramServer.start({ token: BOT_TOKEN });
      const bot = createBot({ services: ctx.services, token: BOT_TOKEN, apiRoot: fake.url });
      const app = createApp(ctx.services, { mount: (a) => mountTelegramWebhook(a, bot, SECRET) });
      server = await new Promise<Server>((resolve) => {
        const s = app.listen(port, '127.0.0.1', () => resolve(s));
      });
      assert.equal((server.address() as AddressInfo).port, port);
      role = await startBotRole(ctx.services, bot, { notifyIntervalMs: 60_000 });
    });
    after(async () => {
      await role.stop();
      await new Promise<void>((r) => server.close(() => r()));
      await fake.close();
      await ctx.close();
    });

    it('registers the webhook with the secret token and answers updates Telegram posts', async () => {
      assert.equal(role.mode, 'webhook');
      assert.deepEqual(fake.webhook, { url: `${ctx.config.http.publicBaseUrl}${WEBHOOK_PATH}`, secretToken: SECRET });
      const owner = fake.user(telegramId());
      const update = await fake.inject(owner.message('/newagent 5 50 1'));
      assert.deepEqual(fake.webhookDeliveries.at(-1), { updateId: update.update_id, status: 200 });
      const reply = await fake.waitForCall(sentTo(fake, owner.from.id));
      assert.match(reply.params.text, SETUP_CODE_RE);
    });

    it('refuses posts without the right secret token and acts on nothing', async () => {
      const owner = fake.user(telegramId());
      const mark = fake.mark();
      const update = { update_id: 1, ...owner.message('/ownerkey') };
      const api = supertest(server);
      const none = await api.post(WEBHOOK_PATH).send(update);
      assert.equal(none.status, 401);
      const wrong = await api.post(WEBHOOK_PATH).set('X-Telegram-Bot-Api-Secret-Token', 'guess').send(update);
      assert.equal(wrong.status, 401);
      // Refused before the body is read: a large or malformed body gets the same 401, not a parse error.
      const junk = await api
        .post(WEBHOOK_PATH)
        .set('Content-Type', 'application/json')
        .send('{"update_id": ' + ' '.repeat(2_000_000));
      assert.equal(junk.status, 401);
      assert.equal(junk.body.error.code, 'UNAUTHENTICATED');
      // Nothing for this owner: the notifications of other tests' accounts (a top-up credited) may still be delivered meanwhile.
      assert.deepEqual(
        fake.callsSince(mark).filter((c) => Number(c.params.chat_id) === owner.from.id),
        [],
      );
      const keys = await ctx.services.ds.query(
        "SELECT COUNT(*) AS n FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE a.telegram_user_id = ? AND k.kind = 'OWNER'",
        [owner.from.id],
      );
      assert.equal(Number(keys[0].n), 0);
    });
  });

  describe('the bot role of the service process', () => {
    it('starts with TELEGRAM_BOT_TOKEN and TELEGRAM_API_ROOT, answers /start, and stops on SIGTERM', async () => {
      const fake = await FakeTelegramServer.start({ token: BOT_TOKEN, maxLongPollMs: 500 });
      const svc = spawnService(['--role', 'bot'], {
        DATABASE_URL: testDatabaseUrl,
        TELEGRAM_BOT_TOKEN: BOT_TOKEN,
        TELEGRAM_API_ROOT: fake.url,
      });
      try {
        await waitFor(async () => fake.commands.length > 0, {
          what: () => `the bot to start; stderr: ${svc.stderr()}`,
        });
        const owner = fake.user(telegramId());
        await fake.inject(owner.message('/start'));
        const reply = await fake.waitForCall(sentTo(fake, owner.from.id), 0, 10_000);
        assert.match(reply.params.text, /Welcome/);
      } finally {
        svc.child.kill('SIGTERM');
        assert.equal(await svc.exited, 0, svc.stderr());
        await fake.close();
      }
    });
  });
});
