import assert from 'node:assert/strict';
import { createServer, request, type Server } from 'node:http';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { CookieBrowser, MemoryOAuthClient } from '../helpers/mcp-oauth.js';
import { loopbackCertificate } from '../helpers/tls.js';

const REDIRECT = 'http://127.0.0.1:9/callback';
const LIMITS = { maxPerRentalMinor: 2000, budgetLimitMinor: 10_000, maxConcurrentDeployments: 1 };

/** The authorization server's OAuth side (remote MCP), each rule against the official v2 client. */
describe('Remote MCP authorization (OAuth 2.1, the official v2 client)', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let base: string;
  let server: Server;
  let ownerToken: string;
  let metadataServer: TlsServer;
  let metadataUrl: string;

  before(async () => {
    const tls = loopbackCertificate();
    // A hosted app's Client ID Metadata Document, on https as the draft requires.
    metadataServer = createTlsServer({ cert: tls.cert, key: tls.key }, (req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          client_id: metadataUrl,
          client_name: 'Documented App',
          client_uri: metadataUrl.replace(/\/client\.json$/, '/'),
          redirect_uris: [REDIRECT],
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method: 'none',
        }),
      );
    });
    await new Promise<void>((resolve) => metadataServer.listen(0, '127.0.0.1', resolve));
    metadataUrl = `https://127.0.0.1:${(metadataServer.address() as AddressInfo).port}/client.json`;
    server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    ctx = await createTestContext({ env: { PUBLIC_BASE_URL: base }, clientMetadataCa: tls.cert });
    server.on('request', ctx.app);
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
    metadataServer.closeAllConnections();
    await new Promise<void>((resolve) => metadataServer.close(() => resolve()));
    await ctx.close();
  });

  const mcpUrl = () => new URL(`${base}/mcp`);

  /** A client's first connection: refused, registered, and holding the URL to send its human to. */
  async function startAuthorization(oauth: MemoryOAuthClient): Promise<URL> {
    const client = new Client({ name: 'oauth-test', version: '1.0.0' });
    await assert.rejects(
      client.connect(new StreamableHTTPClientTransport(mcpUrl(), { authProvider: oauth })),
      UnauthorizedError,
    );
    assert.ok(oauth.authorizationUrl, 'the client was sent to authorize');
    return oauth.authorizationUrl;
  }

  const approve = (approvalCode: string) =>
    fetch(`${base}/api/v1/agent-authorizations/approve`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ownerToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ approvalCode, ...LIMITS }),
    });

  /** The whole flow up to a connected client: consent page, the owner's approval by the API, the code, the tokens. */
  async function authorized(
    oauth: MemoryOAuthClient,
  ): Promise<{ client: Client; page: { url: string; html: string } }> {
    const browser = new CookieBrowser(base);
    const page = await browser.open((await startAuthorization(oauth)).href);
    assert.equal(page.status, 200, page.html);
    const res = await approve(/gpa_[A-Za-z0-9_-]{43}/.exec(page.html)![0]);
    assert.equal(res.status, 200, await res.text());
    const back = await browser.open(page.url);
    assert.ok(back.url.startsWith(`${REDIRECT}?`), JSON.stringify(back));
    await new StreamableHTTPClientTransport(mcpUrl(), { authProvider: oauth }).finishAuth(
      new URL(back.url).searchParams,
    );
    const client = new Client({ name: 'oauth-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(mcpUrl(), { authProvider: oauth }));
    return { client, page };
  }

  const rawMcp = (token?: string) =>
    fetch(`${base}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(token ? { authorization: `Bearer ${token}` } : {}),
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });

  const agentKeys = async () =>
    (
      (await (
        await fetch(`${base}/api/v1/agent-keys`, { headers: { authorization: `Bearer ${ownerToken}` } })
      ).json()) as {
        data: { id: string; name: string; origin?: string; scopes: string[]; revokedAt: string | null }[];
      }
    ).data;

  it('answers an unauthorized client 401 with resource_metadata, and publishes both metadata documents', async () => {
    const res = await rawMcp();
    assert.equal(res.status, 401);
    assert.match(
      res.headers.get('www-authenticate') ?? '',
      /^Bearer .*resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource\/mcp"/,
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
    assert.equal(as.registration_endpoint, `${base}/oauth/register`);
    assert.equal(as.revocation_endpoint, `${base}/oauth/revoke`);
    assert.equal(as.client_id_metadata_document_supported, true);
    assert.equal(as.authorization_response_iss_parameter_supported, true);
    // A Host that is not PUBLIC_BASE_URL's is refused before anything else (DNS rebinding).
    const rebound = await new Promise<number>((resolve, reject) => {
      const req = request(`${base}/mcp`, { method: 'POST', headers: { host: 'evil.example' } }, (r) => {
        r.resume();
        resolve(r.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end('{}');
    });
    assert.equal(rebound, 403);
  });

  it('a client registered by dynamic registration but not approved stays refused; approved, it lists the tools as an AGENT key', async () => {
    const waiting = new MemoryOAuthClient(REDIRECT, 'never approved');
    await startAuthorization(waiting);
    assert.ok(waiting.info?.client_id && !waiting.info.client_id.startsWith('https://'), 'registered dynamically');
    assert.equal((await rawMcp()).status, 401);

    const { client } = await authorized(new MemoryOAuthClient(REDIRECT, 'test agent app'));
    const tools = await client.listTools();
    assert.equal(tools.tools.length, 11);
    const account = (await client.callTool({ name: 'get_account', arguments: {} })) as {
      structuredContent: { account: { key: Record<string, unknown> } };
    };
    assert.equal(account.structuredContent.account.key.kind, 'AGENT');
    assert.equal(account.structuredContent.account.key.maxPerRentalMinor, LIMITS.maxPerRentalMinor);
    const key = (await agentKeys()).find((k) => k.name === 'test agent app');
    assert.ok(key, "the key is listed with the owner's agent keys");
    assert.equal(key.origin, 'oauth');
    assert.deepEqual([...key.scopes].sort(), ['manage', 'read', 'rent']);
    await client.close();
  });

  it('a client known by its metadata document needs no registration, and the page names where the document came from', async () => {
    const oauth = new MemoryOAuthClient(REDIRECT, 'Documented App', metadataUrl);
    const url = await startAuthorization(oauth);
    assert.equal(url.searchParams.get('client_id'), metadataUrl);
    const page = await new CookieBrowser(base).open(url.href);
    assert.equal(page.status, 200, page.html);
    assert.match(page.html, /Documented App/);
    assert.match(page.html, new RegExp(`fetched: the app is run from <strong>127\\.0\\.0\\.1:\\d+</strong>`));
    const { client } = await authorized(new MemoryOAuthClient(REDIRECT, 'Documented App', metadataUrl));
    assert.equal((await client.listTools()).tools.length, 11);
    await client.close();
  });

  it('refuses a token for another resource: at /authorize, and at /mcp when one was made', async () => {
    const url = await startAuthorization(new MemoryOAuthClient(REDIRECT, 'wrong resource'));
    url.searchParams.set('resource', 'https://other.example/mcp');
    const answer = await new CookieBrowser(base).open(url.href);
    const back = new URL(answer.url);
    assert.equal(back.searchParams.get('error'), 'invalid_target', answer.url);

    const probe = new MemoryOAuthClient(REDIRECT, 'audience probe');
    const { client } = await authorized(probe);
    const keyId = (await agentKeys()).find((k) => k.name === 'audience probe')!.id;
    const { provider } = ctx.services.oauth;
    const clientId = probe.info!.client_id;
    const foreign = new provider.AccessToken({
      accountId: keyId,
      clientId,
      scope: 'read',
      resourceServer: { audience: 'https://other.example/mcp', scope: 'read', accessTokenFormat: 'opaque' },
    } as never);
    const token = await foreign.save();
    const res = await rawMcp(token);
    assert.equal(res.status, 401);
    assert.match(res.headers.get('www-authenticate') ?? '', /invalid_token/);
    await client.close();
  });

  it('stops a token the moment its key is revoked, and its refresh token with it', async () => {
    const oauth = new MemoryOAuthClient(REDIRECT, 'revoked soon');
    const { client } = await authorized(oauth);
    assert.equal((await client.listTools()).tools.length, 11);
    const key = (await agentKeys()).find((k) => k.name === 'revoked soon')!;
    const del = await fetch(`${base}/api/v1/agent-keys/${key.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${ownerToken}` },
    });
    assert.ok(del.status < 300, String(del.status));
    const res = await rawMcp(oauth.saved!.access_token);
    assert.equal(res.status, 401);
    assert.match(res.headers.get('www-authenticate') ?? '', /invalid_token/);
    const refreshed = await tokenRequest({
      grant_type: 'refresh_token',
      refresh_token: oauth.saved!.refresh_token!,
      client_id: oauth.info!.client_id,
    });
    assert.equal(refreshed.status, 400);
    assert.equal(((await refreshed.json()) as { error: string }).error, 'invalid_grant');
    await client.close().catch(() => undefined);
  });

  const tokenRequest = (form: Record<string, string>) =>
    fetch(`${base}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(form),
    });

  it('rotates refresh tokens (a used one is refused) and revokes tokens (RFC 7009)', async () => {
    const oauth = new MemoryOAuthClient(REDIRECT, 'rotating');
    const { client } = await authorized(oauth);
    const first = oauth.saved!.refresh_token!;
    const rotated = await tokenRequest({
      grant_type: 'refresh_token',
      refresh_token: first,
      client_id: oauth.info!.client_id,
    });
    assert.equal(rotated.status, 200);
    const fresh = (await rotated.json()) as { access_token: string; refresh_token: string; expires_in: number };
    assert.notEqual(fresh.refresh_token, first);
    assert.ok(fresh.expires_in <= 15 * 60);
    assert.equal((await rawMcp(fresh.access_token)).status, 200);
    const reused = await tokenRequest({
      grant_type: 'refresh_token',
      refresh_token: first,
      client_id: oauth.info!.client_id,
    });
    assert.equal(reused.status, 400);
    const revoked = await fetch(`${base}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: fresh.access_token, client_id: oauth.info!.client_id }),
    });
    assert.equal(revoked.status, 200);
    assert.equal((await rawMcp(fresh.access_token)).status, 401);
    await client.close().catch(() => undefined);
  });

  it('requires PKCE and an exact redirect URI', async () => {
    const url = await startAuthorization(new MemoryOAuthClient(REDIRECT, 'strict'));
    const noPkce = new URL(url);
    noPkce.searchParams.delete('code_challenge');
    noPkce.searchParams.delete('code_challenge_method');
    const refused = new URL((await new CookieBrowser(base).open(noPkce.href)).url);
    assert.equal(refused.searchParams.get('error'), 'invalid_request');
    const otherRedirect = new URL(url);
    otherRedirect.searchParams.set('redirect_uri', `${REDIRECT}/elsewhere`);
    const page = await new CookieBrowser(base).open(otherRedirect.href);
    assert.equal(page.status, 400, 'an unregistered redirect URI is never redirected to');
    assert.match(page.html, /redirect_uri/);
  });

  it('sends the client access_denied when the owner lets the request expire', async () => {
    const oauth = new MemoryOAuthClient(REDIRECT, 'too slow');
    const url = await startAuthorization(oauth);
    const browser = new CookieBrowser(base);
    const page = await browser.open(url.href);
    assert.equal(page.status, 200);
    ctx.clock.advance(10 * 60_000 + 1000);
    const back = new URL((await browser.open(page.url)).url);
    assert.equal(back.searchParams.get('error'), 'access_denied');
    assert.match(back.searchParams.get('error_description') ?? '', /within 10 minutes/);
    assert.equal(back.searchParams.get('state'), url.searchParams.get('state'));
    const code = /gpa_[A-Za-z0-9_-]{43}/.exec(page.html)![0];
    assert.equal((await approve(code)).status, 409, 'an expired request can no longer be approved');
  });
});
