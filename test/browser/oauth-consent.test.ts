import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import type { Browser, Page } from 'playwright-core';
import { startBrowserSite } from '../helpers/browser.js';
import type { TestContext } from '../helpers/context.js';
import { testDataSource } from '../helpers/db.js';
import { MemoryOAuthClient } from '../helpers/mcp-oauth.js';

/** An MCP client's OAuth side that also sends a `state`, so the redirect back can be matched to it. */
class StatefulOAuthClient extends MemoryOAuthClient {
  sentState = '';
  state() {
    this.sentState = randomBytes(16).toString('base64url');
    return this.sentState;
  }
}

/**
 * The client's redirect URI: a loopback server standing in for the app the browser returns to.
 * `received` settles with the query of the first request to the callback path (a browser also
 * asks for /favicon.ico, which is not the redirect).
 */
async function startRedirectTarget(): Promise<{
  uri: string;
  received: Promise<URLSearchParams>;
  close(): Promise<void>;
}> {
  let settle!: (query: URLSearchParams) => void;
  const received = new Promise<URLSearchParams>((resolve) => (settle = resolve));
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname === '/callback') settle(url.searchParams);
    res.writeHead(url.pathname === '/callback' ? 200 : 404, { 'content-type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><title>Back in the app</title><h1>Back in the app</h1>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    uri: `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`,
    received,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const APPROVAL_CODE = /gpa_[A-Za-z0-9_-]{43}/;

describe('The OAuth consent page in a browser', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let closeSite: (() => Promise<void>) | undefined;
  let base: string;
  let browser: Browser;
  let ownerToken: string;
  const cleanups: (() => Promise<void>)[] = [];

  before(async () => {
    ({ ctx, base, browser, close: closeSite } = await startBrowserSite());
    ({ token: ownerToken } = await ctx.services.accounts.createOwner({
      name: 'consent owner',
      scopes: ['read', 'rent', 'manage', 'billing'],
      isAdmin: false,
      maxPerRentalMinor: 100_000,
      budgetLimitMinor: 1_000_000,
      maxConcurrentDeployments: 10,
    }));
  });

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  after(async () => {
    await closeSite?.();
  });

  /**
   * A fresh client that connects to /mcp, is refused for want of a token and records where it
   * would send the owner: its authorization URL, with its own redirect target.
   */
  async function refusedClient(name: string) {
    const target = await startRedirectTarget();
    cleanups.push(() => target.close());
    const oauth = new StatefulOAuthClient(target.uri, name);
    const mcpUrl = new URL(`${base}/mcp`);
    const client = new Client({ name: 'consent-test', version: '1.0.0' });
    await assert.rejects(
      client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: oauth })),
      UnauthorizedError,
    );
    assert.ok(oauth.authorizationUrl, 'the client was sent to authorize');
    assert.equal(oauth.authorizationUrl.searchParams.get('state'), oauth.sentState);
    return { target, oauth, mcpUrl, authorizationUrl: oauth.authorizationUrl.href };
  }

  /** Opens the consent page at `authorizationUrl` and checks it is one, with the page's own headers. */
  async function openConsent(authorizationUrl: string): Promise<{ page: Page; approvalCode: string }> {
    const page = await browser.newPage();
    cleanups.push(() => page.close());
    const res = await page.goto(authorizationUrl);
    assert.ok(res, 'the navigation had a response');
    assert.match(res.url(), new RegExp(`^${base}/oauth/consent/[^/?]+$`));
    assert.equal(res.status(), 200);
    const headers = await res.allHeaders();
    assert.match(headers['content-security-policy'] ?? '', /frame-ancestors 'none'/);
    assert.equal(headers['cache-control'], 'no-store');
    const approvalCode = APPROVAL_CODE.exec(await page.locator('main').innerText())?.[0];
    assert.ok(approvalCode, 'the page shows the approval code');
    return { page, approvalCode };
  }

  const approveByApi = (approvalCode: string) =>
    fetch(`${base}/api/v1/agent-authorizations/approve`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ownerToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        approvalCode,
        maxPerRentalMinor: 2000,
        budgetLimitMinor: 10_000,
        maxConcurrentDeployments: 1,
      }),
    });

  it('the owner sets the limits and approves with an owner key; the client then acts as a key of those limits', async () => {
    const { target, oauth, mcpUrl, authorizationUrl } = await refusedClient('browser agent app');
    const { page } = await openConsent(authorizationUrl);
    const text = await page.locator('main').innerText();
    assert.match(text, /browser agent app \(the name it gives itself\)/);
    assert.match(text, /unverified/);
    await page.getByLabel('Per rental (USD)').fill('12.50');
    await page.getByLabel('In total (USD)').fill('80');
    await page.getByLabel('Machines at once').fill('2');
    await page.getByLabel('Your owner key').fill(ownerToken);
    await page.getByRole('button', { name: 'Approve' }).click();
    const query = await target.received;
    assert.ok(query.get('code'), `a code came back: ${query.toString()}`);
    assert.equal(query.get('iss'), `${base}/oauth`);
    assert.equal(query.get('state'), oauth.sentState);
    await page.waitForURL((url) => url.href.startsWith(target.uri));

    await new StreamableHTTPClientTransport(mcpUrl, { authProvider: oauth }).finishAuth(new URLSearchParams(query));
    assert.ok(oauth.saved?.access_token);
    const client = new Client({ name: 'consent-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: oauth }));
    cleanups.push(() => client.close());
    const tools = await client.listTools();
    assert.ok(tools.tools.some((t) => t.name === 'create_rental'));
    const account = await client.callTool({ name: 'get_account', arguments: {} });
    assert.ok(!account.isError, JSON.stringify(account));
    const key = (account.structuredContent as { account: { key: Record<string, unknown> } }).account.key;
    assert.deepEqual(
      [key.kind, key.maxPerRentalMinor, key.budgetLimitMinor, key.maxConcurrentDeployments],
      ['AGENT', 1250, 8000, 2],
    );

    const listed = await fetch(`${base}/api/v1/agent-keys`, { headers: { authorization: `Bearer ${ownerToken}` } });
    assert.equal(listed.status, 200);
    const keys = ((await listed.json()) as { data: { id: string; prefix: string; scopes: string[] }[] }).data;
    const mine = keys.find((k) => k.prefix === key.prefix);
    assert.ok(mine, `the owner's listing holds the client's key: ${JSON.stringify(keys)}`);
    assert.deepEqual([...mine.scopes].sort(), ['manage', 'read', 'rent']);
    // The listing does not say where a key came from; the stored row does.
    const [row] = (await (await testDataSource()).query('SELECT origin FROM api_keys WHERE id = ?', [mine.id])) as {
      origin: string;
    }[];
    assert.equal(row?.origin, 'oauth');
  });

  it('Refuse sends the browser back with access_denied, and the session can no longer be approved', async () => {
    const { target, oauth, authorizationUrl } = await refusedClient('refused agent app');
    const { page, approvalCode } = await openConsent(authorizationUrl);
    await page.getByRole('button', { name: 'Refuse' }).click();
    const query = await target.received;
    assert.equal(query.get('error'), 'access_denied', query.toString());
    assert.equal(query.get('state'), oauth.sentState);
    assert.equal(query.get('code'), null);
    await page.waitForURL((url) => url.href.startsWith(target.uri));
    const res = await approveByApi(approvalCode);
    assert.equal(res.status, 409, await res.text());
  });

  it('an open consent page reaches the redirect by itself once the owner approved elsewhere', async () => {
    const { target, oauth, authorizationUrl } = await refusedClient('elsewhere agent app');
    const { page, approvalCode } = await openConsent(authorizationUrl);
    const res = await approveByApi(approvalCode);
    assert.equal(res.status, 200, await res.text());
    const query = await target.received;
    assert.ok(query.get('code'), query.toString());
    assert.equal(query.get('iss'), `${base}/oauth`);
    assert.equal(query.get('state'), oauth.sentState);
    await page.waitForURL((url) => url.href.startsWith(target.uri));
  });
});
