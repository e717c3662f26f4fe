import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import { Account } from '../../src/modules/accounts/account.entity.js';
import { createBotHarness, edits, sentMessages, telegramId, type BotHarness } from '../bot/harness.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';
import { CookieBrowser, MemoryOAuthClient } from '../helpers/mcp-oauth.js';
import { credit } from '../helpers/rentals.js';

type ToolAnswer = {
  isError?: boolean;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each tool's output is read field by field
  structuredContent?: any;
  content: { type: string; text?: string }[];
};

/**
 * The check of remote MCP end to end: an app that knows only the base URL connects with the
 * official client, registers and runs PKCE; the owner approves in the (fake) Telegram bot,
 * setting the limits; the app then rents, reads and terminates a local machine within them.
 */
describe('A hosted agent over remote MCP, approved by its owner in Telegram', function () {
  this.timeout(120_000);
  let h: BotHarness;
  let server: Server;
  let base: string;
  let worker: TestWorker;
  let ticker: NodeJS.Timeout;

  before(async () => {
    server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    h = await createBotHarness({ env: { PUBLIC_BASE_URL: base, TELEGRAM_BOT_USERNAME: 'gpu_rental_test_bot' } });
    server.on('request', h.ctx.app);
    worker = await startTestWorker(h.ctx);
    // The local machines boot on the service's clock: keep it moving while the agent waits.
    ticker = setInterval(() => h.ctx.clock.advance(250), 50);
  });
  after(async () => {
    clearInterval(ticker);
    await worker?.stop();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await h.close();
  });

  it('connects from the base URL, the owner approves with limits in Telegram, and the agent rents, reads and terminates', async () => {
    // All the app is given is the base URL: the index names the endpoint.
    const index = (await (await fetch(`${base}/`)).json()) as { data: { links: { mcp: string } } };
    const mcpUrl = new URL(index.data.links.mcp);
    assert.equal(mcpUrl.href, `${base}/mcp`);
    const oauth = new MemoryOAuthClient('http://127.0.0.1:9/callback', 'Hosted Assistant');
    const first = new Client({ name: 'hosted-app', version: '1.0.0' });
    await assert.rejects(
      first.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: oauth })),
      UnauthorizedError,
    );
    assert.ok(oauth.info?.client_id, 'registered by dynamic registration');

    const browser = new CookieBrowser(base);
    const page = await browser.open(oauth.authorizationUrl!.href);
    assert.equal(page.status, 200);
    const deepLink = /https:\/\/t\.me\/gpu_rental_test_bot\?start=approve_(gpa_[A-Za-z0-9_-]{43})/.exec(page.html);
    assert.ok(deepLink, 'the page links to the bot');

    const owner = h.owner(telegramId(), 'Ada');
    const [intro, q1] = await owner.send(`/start approve_${deepLink[1]}`);
    assert.match(intro.text, /Hosted Assistant/);
    sentMessages(await owner.pressButton(q1, '$25'));
    const [q3] = await owner.send('120');
    const q4 = sentMessages(await owner.pressButton(q3, '3'))[0];
    const q5 = sentMessages(await owner.pressButton(q4, '8 h'))[0];
    const confirm = sentMessages(await owner.pressButton(q5, '1 h'))[0];
    assert.match(edits(await owner.pressButton(confirm, 'Approve'))[0], /^Approved\./);

    // The consent page, reloading, now sends the browser back to the app with the code.
    const back = await browser.open(page.url);
    const callback = new URL(back.url);
    assert.equal(callback.origin + callback.pathname, 'http://127.0.0.1:9/callback');
    assert.equal(callback.searchParams.get('iss'), `${base}/oauth`);
    await new StreamableHTTPClientTransport(mcpUrl, { authProvider: oauth }).finishAuth(callback.searchParams);

    // The owner sees the connection with the other agents, and can revoke it there.
    assert.match(await owner.say('/agents'), /1\. Hosted Assistant [A-Za-z0-9]{8} \(connected by URL: remote MCP\)/);

    const client = new Client({ name: 'hosted-app', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: oauth }));
    const call = async (name: string, args: Record<string, unknown> = {}) =>
      (await client.callTool({ name, arguments: args }, { timeout: 60_000 })) as ToolAnswer;
    assert.equal((await client.listTools()).tools.length, 11);

    const account = await call('get_account');
    assert.ok(!account.isError, JSON.stringify(account));
    const key = account.structuredContent.account.key;
    assert.equal(key.kind, 'AGENT');
    assert.equal(key.maxPerRentalMinor, 2500);
    assert.equal(key.budgetLimitMinor, 12_000);
    assert.equal(key.maxConcurrentDeployments, 3);
    assert.ok(!key.scopes.includes('billing'));

    // No credits yet: a client that declared URL elicitation is asked to show the top-up link
    // (the human declines here); any other client gets the link in the result.
    const elicited: { mode?: string; url?: string }[] = [];
    // A client of the 2026-07-28 revision carries its capabilities on every request; a stateless
    // 2025-era connection forgets them after its handshake, so only the link reaches it.
    const asking = new Client(
      { name: 'hosted-app', version: '1.0.0' },
      { versionNegotiation: { mode: 'auto' }, capabilities: { elicitation: { url: {} } } },
    );
    asking.setRequestHandler('elicitation/create', async (req) => {
      elicited.push(req.params as { mode?: string; url?: string });
      return { action: 'decline' as const };
    });
    await asking.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: oauth }));
    const unpaid = (await asking.callTool(
      { name: 'create_rental', arguments: { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 400 } },
      { timeout: 60_000 },
    )) as ToolAnswer;
    assert.equal(unpaid.isError, true, JSON.stringify(unpaid));
    assert.equal(elicited.length, 1, 'one URL elicitation');
    assert.equal(elicited[0].mode, 'url');
    // The key cannot add credits (never `billing`): the link asks the owner's bot for a card payment link.
    assert.match(elicited[0].url ?? '', /^https:\/\/t\.me\/gpu_rental_test_bot\?start=topup_(\d+)$/);
    assert.equal(unpaid.structuredContent.topupUrl, elicited[0].url);
    const [reply, link] = await owner.send(`/start ${new URL(elicited[0].url!).searchParams.get('start')}`);
    assert.match(reply.text, /Your agent asks for \$5\.00 of compute credits/);
    assert.ok(link, 'the bot sends the card payment link');
    await asking.close();
    const plain = await call('create_rental', { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 400 });
    assert.equal(plain.isError, true);
    assert.equal(plain.structuredContent.topupUrl, elicited[0].url, JSON.stringify(plain));
    assert.ok((plain.content[0].text ?? '').includes(elicited[0].url!));

    // The owner's account (made by the bot) gets credits as a paid top-up would give them.
    const owned = await h.ctx.services.ds.getRepository(Account).findOneByOrFail({ telegramUserId: owner.id });
    await credit(h.ctx, owned.id, 10_000);

    // A budget over the per-rental cap the owner set: refused, saying what to do, nothing rented.
    const tooDear = await call('create_rental', {
      gpuModel: 'H100 SXM',
      gpuCount: 1,
      maxHourlyPriceMinor: 400,
      budgetMinor: 5000,
    });
    assert.equal(tooDear.isError, true, JSON.stringify(tooDear));
    assert.match(tooDear.content[0].text ?? '', /per-rental cap|KEY_LIMIT_EXCEEDED/);

    const created = await call('create_rental', { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 400 });
    assert.ok(!created.isError, JSON.stringify(created));
    const rentalId = created.structuredContent.rental.rentalId as string;
    let status = '';
    for (let i = 0; i < 20 && status !== 'ACTIVE'; i++) {
      const read = await call('get_rental', { rentalId, waitFor: ['ACTIVE', 'FAILED'] });
      assert.ok(!read.isError, JSON.stringify(read));
      status = read.structuredContent.rental.status;
      assert.notEqual(status, 'FAILED', JSON.stringify(read));
    }
    assert.equal(status, 'ACTIVE');

    const ended = await call('terminate_deployment', { rentalId });
    assert.ok(!ended.isError, JSON.stringify(ended));
    let final = '';
    for (let i = 0; i < 20 && final !== 'TERMINATED'; i++) {
      final = (await call('get_rental', { rentalId, waitFor: ['TERMINATED'] })).structuredContent.rental.status;
    }
    assert.equal(final, 'TERMINATED');
    const listed = await call('list_rentals');
    assert.ok(!listed.isError, JSON.stringify(listed));
    assert.equal(listed.structuredContent.rentals.length, 1);
    await client.close();
  });
});
