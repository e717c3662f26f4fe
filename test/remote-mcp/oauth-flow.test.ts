import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { CookieBrowser, MemoryOAuthClient } from '../helpers/mcp-oauth.js';

/** The app on a real loopback port whose address is also its PUBLIC_BASE_URL. */
async function site(): Promise<{ ctx: TestContext; base: string; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const ctx = await createTestContext({ env: { PUBLIC_BASE_URL: base } });
  server.on('request', ctx.app);
  return { ctx, base, server };
}

describe('Remote MCP with OAuth (the official v2 client)', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let base: string;
  let server: Server;
  let ownerToken: string;

  before(async () => {
    ({ ctx, base, server } = await site());
    ({ token: ownerToken } = await ctx.services.accounts.createOwner({
      name: 'mcp owner',
      scopes: ['read', 'rent', 'manage', 'billing'],
      isAdmin: false,
      maxPerRentalMinor: 100_000,
      budgetLimitMinor: 1_000_000,
      maxConcurrentDeployments: 10,
    }));
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await ctx.close();
  });

  it('a client with no token gets 401 with resource_metadata', async () => {
    const res = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    assert.equal(res.status, 401);
    const challenge = res.headers.get('www-authenticate') ?? '';
    assert.match(
      challenge,
      /resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource\/mcp"/,
    );
    const prm = (await (await fetch(`${base}/.well-known/oauth-protected-resource/mcp`)).json()) as Record<
      string,
      unknown
    >;
    assert.equal(prm.resource, `${base}/mcp`);
    assert.deepEqual(prm.authorization_servers, [`${base}/oauth`]);
    const as = (await (await fetch(`${base}/.well-known/oauth-authorization-server/oauth`)).json()) as Record<
      string,
      unknown
    >;
    assert.equal(as.issuer, `${base}/oauth`);
    assert.deepEqual(as.code_challenge_methods_supported, ['S256']);
    assert.equal(as.authorization_endpoint, `${base}/oauth/authorize`);
  });

  it('registers, runs PKCE, the owner approves with a key, and the client lists the tools', async () => {
    const oauth = new MemoryOAuthClient('http://127.0.0.1:9/callback', 'test agent app');
    const url = new URL(`${base}/mcp`);
    const client = new Client({ name: 'oauth-test', version: '1.0.0' });
    await assert.rejects(
      client.connect(new StreamableHTTPClientTransport(url, { authProvider: oauth })),
      UnauthorizedError,
    );
    assert.ok(oauth.authorizationUrl, 'the client was sent to authorize');
    assert.equal(oauth.authorizationUrl.searchParams.get('code_challenge_method'), 'S256');
    assert.equal(oauth.authorizationUrl.searchParams.get('resource'), `${base}/mcp`);
    const browser = new CookieBrowser(base);
    const page = await browser.open(oauth.authorizationUrl.href);
    assert.equal(page.status, 200, page.html);
    assert.match(page.html, /test agent app/);
    const code = /gpa_[A-Za-z0-9_-]{43}/.exec(page.html)![0];
    const approved = await fetch(`${base}/api/v1/agent-authorizations/approve`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ownerToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        approvalCode: code,
        maxPerRentalMinor: 2000,
        budgetLimitMinor: 10_000,
        maxConcurrentDeployments: 1,
      }),
    });
    assert.equal(approved.status, 200, await approved.text());
    const back = await browser.open(page.url);
    assert.match(back.url, /^http:\/\/127\.0\.0\.1:9\/callback\?code=/, JSON.stringify(back));
    const transport = new StreamableHTTPClientTransport(url, { authProvider: oauth });
    await transport.finishAuth(new URL(back.url).searchParams);
    assert.ok(oauth.saved?.access_token);
    assert.ok(oauth.saved?.refresh_token);
    const connected = new Client({ name: 'oauth-test', version: '1.0.0' });
    await connected.connect(new StreamableHTTPClientTransport(url, { authProvider: oauth }));
    const tools = await connected.listTools();
    assert.ok(tools.tools.some((t) => t.name === 'create_rental'));
    const account = await connected.callTool({ name: 'get_account', arguments: {} });
    assert.ok(!account.isError, JSON.stringify(account));
    await connected.close();
  });
});
