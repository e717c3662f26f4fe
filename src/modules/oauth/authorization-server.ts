import { createPrivateKey, hkdfSync } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Configuration, JWK, KoaContextWithOIDC, default as OidcProvider } from 'oidc-provider';
import { errors, interactionPolicy, Provider } from './oidc-provider.js';
import type { Logger } from '../../logger.js';
import { AUTHORIZATION_TTL_MS, SETUP_SCOPES } from '../agents/agents.service.js';
import { OAuthAdapter, type OAuthStore } from './oauth-adapter.js';
import type { Clock } from '../../clock.js';
import type { SecretBox } from '../credentials/secret-box.js';
import { fetchClientMetadata, type MetadataFetchOptions } from './client-metadata.js';
import { MCP_PATH, OAUTH_PATH } from '../../vocabulary/remote-mcp.js';

/** The consent page an authorization request is sent to (below {@link OAUTH_PATH}). */
export const CONSENT_PATH = `${OAUTH_PATH}/consent`;

/** Access tokens live a quarter of an hour; a client refreshes, and each refresh rotates the refresh token. */
export const ACCESS_TOKEN_TTL_SECONDS = 15 * 60;
export const REFRESH_TOKEN_TTL_SECONDS = 30 * 24 * 3600;
/** How often expired records are deleted, and how many at most per statement. */
export const OAUTH_PURGE_EVERY_MS = 10 * 60_000;
const PURGE_BATCH = 1000;
/**
 * An interaction outlives the agent authorization session it opens by a minute, so a session
 * that expired unapproved can still send the client its error rather than leave it waiting.
 */
const INTERACTION_TTL_SECONDS = AUTHORIZATION_TTL_MS / 1000 + 60;

/** What the OAuth side needs of an agent key: whether it still acts (not revoked), by id. */
export interface KeyLookup {
  activeAgentKey(keyId: string): Promise<{ keyId: string; accountId: string; scopes: readonly string[] } | null>;
}

export interface AuthorizationServerDeps {
  store: OAuthStore;
  box: SecretBox;
  clock: Clock;
  keys: KeyLookup;
  log: Logger;
  publicBaseUrl: string;
  /** The secrets key: cookie signing and the signing key are derived from it. */
  secretsKey: Buffer;
  /** The api runs behind a proxy that says the request was https (TRUST_PROXY). */
  behindProxy: boolean;
  /** How client metadata documents are fetched (the webhook destination rules). */
  metadata: MetadataFetchOptions;
}

/** A verified access token: the agent key it acts as, and what it was issued for. */
export interface VerifiedToken {
  keyId: string;
  accountId: string;
  clientId: string;
  scopes: string[];
  /** Seconds since the epoch. */
  expiresAt: number;
  resource: string;
}

/** Why a bearer token is refused: its OAuth error code and description. */
export class TokenRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TokenRefused';
  }
}

const derive = (key: Buffer, purpose: string) => Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), purpose, 32));

/** An Ed25519 signing key derived from the secrets key, so every api process signs alike and nothing more is configured. */
function signingKey(secretsKey: Buffer): JWK {
  const seed = derive(secretsKey, 'gpu-rental oauth signing key');
  const der = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]);
  const jwk = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }).export({ format: 'jwk' });
  return { ...jwk, kid: 'oauth-1', use: 'sig', alg: 'EdDSA' } as JWK;
}

/**
 * The OAuth 2.1 authorization server of remote MCP, on oidc-provider (docs/oauth.md says why):
 * authorization code with PKCE S256 only, exact redirect URIs, clients by Client ID Metadata
 * Document or dynamic registration, tokens bound to the one resource (RFC 8707), opaque access
 * tokens of a quarter of an hour, rotating refresh tokens, revocation (RFC 7009). Its consent is
 * the owner's approval of an agent authorization session (consent.router.ts), and the account a
 * grant names is the AGENT key that approval issued.
 */
export class AuthorizationServer {
  readonly issuer: string;
  readonly resource: string;
  readonly provider: OidcProvider;

  constructor(private readonly deps: AuthorizationServerDeps) {
    const base = deps.publicBaseUrl.replace(/\/+$/, '');
    this.issuer = `${base}${OAUTH_PATH}`;
    this.resource = `${base}${MCP_PATH}`;
    this.provider = new Provider(this.issuer, this.configuration());
    this.provider.proxy = deps.behindProxy;
    this.provider.on('server_error', (_ctx: unknown, err: Error) => deps.log.error({ err }, 'oauth server error'));
  }

  private configuration(): Configuration {
    const { deps, resource } = this;
    const scopes = SETUP_SCOPES.join(' ');
    const policy = interactionPolicy.base();
    // Every authorization is a fresh owner approval: a browser that approved one client before
    // carries no standing login the next client could ride on.
    policy
      .get('login')!
      .checks.add(
        new interactionPolicy.Check('owner_approval', 'each authorization is approved by the account owner', (ctx) =>
          ctx.oidc.result?.login ? interactionPolicy.Check.NO_NEED_TO_PROMPT : interactionPolicy.Check.REQUEST_PROMPT,
        ),
        0,
      );
    return {
      adapter: (model: string) => new OAuthAdapter(model, deps.store, deps.box, deps.clock),
      clients: [],
      jwks: { keys: [signingKey(deps.secretsKey)] },
      cookies: { keys: [derive(deps.secretsKey, 'gpu-rental oauth cookies').toString('base64url')] },
      routes: {
        authorization: '/authorize',
        token: '/token',
        registration: '/register',
        revocation: '/revoke',
        jwks: '/jwks',
      },
      scopes: ['offline_access', ...SETUP_SCOPES],
      claims: { openid: ['sub'] },
      responseTypes: ['code'],
      pkce: { required: () => true },
      clientAuthMethods: ['none', 'client_secret_basic', 'client_secret_post'],
      clientDefaults: {
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
        id_token_signed_response_alg: 'EdDSA',
      },
      enabledJWA: { idTokenSigningAlgValues: ['EdDSA'] },
      ttl: {
        AccessToken: ACCESS_TOKEN_TTL_SECONDS,
        AuthorizationCode: 60,
        RefreshToken: REFRESH_TOKEN_TTL_SECONDS,
        Grant: REFRESH_TOKEN_TTL_SECONDS,
        Interaction: INTERACTION_TTL_SECONDS,
        Session: INTERACTION_TTL_SECONDS,
      },
      rotateRefreshToken: true,
      // Tokens outlive the consent page's browser session: an agent works long after its owner closed the tab.
      expiresWithSession: () => false,
      issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
      interactions: { url: (_ctx, interaction) => `${CONSENT_PATH}/${interaction.uid}`, policy },
      findAccount: async (_ctx, id) => {
        const key = await deps.keys.activeAgentKey(id);
        return key ? { accountId: key.keyId, claims: async () => ({ sub: key.keyId }) } : undefined;
      },
      features: {
        devInteractions: { enabled: false },
        userinfo: { enabled: false },
        introspection: { enabled: false },
        rpInitiatedLogout: { enabled: false },
        revocation: {
          enabled: true,
          // A client revokes its own tokens only (RFC 7009 §2.1); another's is left as it is.
          allowedPolicy: (_ctx, client, token) => token.clientId === client.clientId,
        },
        registration: { enabled: true },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => resource,
          useGrantedResource: () => true,
          getResourceServerInfo: (_ctx, indicator) => {
            if (indicator !== resource)
              throw new errors.InvalidTarget(`this server issues tokens for ${resource} only`);
            return {
              scope: scopes,
              audience: resource,
              accessTokenTTL: ACCESS_TOKEN_TTL_SECONDS,
              accessTokenFormat: 'opaque',
            };
          },
        },
        clientIdMetadataDocument: {
          enabled: true,
          ack: 'draft-02',
          cacheDuration: { min: 60, max: 3600 },
        },
      },
      fetch: (url: string | URL | Request, options?: RequestInit) =>
        fetchClientMetadata(url instanceof Request ? url.url : String(url), options ?? {}, deps.metadata),
      fetchResponseBodyLimits: { 'client_id metadata document': deps.metadata.limits.maxBodyBytes },
      renderError: (ctx: KoaContextWithOIDC, out) => {
        ctx.type = 'html';
        ctx.body = errorPage(out.error, out.error_description ?? '');
      },
    };
  }

  /** The Node handler for everything below {@link OAUTH_PATH} (mounted there, the path stripped). */
  handler(): (req: IncomingMessage, res: ServerResponse) => void {
    return this.provider.callback();
  }

  /**
   * Deletes the records that expired (a minute ago, so a request at the edge still finds its
   * own), a batch at a time; answers how many. A record is refused once expired anyway: this
   * only keeps the table to what can still be used.
   */
  async purgeExpired(): Promise<number> {
    const before = new Date(this.deps.clock.now().getTime() - 60_000);
    let purged = 0;
    for (;;) {
      const n = await this.deps.store.read((r) => r.oauth.purgeExpired(before, PURGE_BATCH));
      purged += n;
      if (n < PURGE_BATCH) return purged;
    }
  }

  /**
   * Verifies a bearer token for the resource: an access token of ours, unexpired, issued for
   * {@link resource} (RFC 8707), whose agent key still acts. Throws {@link TokenRefused}.
   */
  async verify(token: string): Promise<VerifiedToken> {
    const found = await this.provider.AccessToken.find(token);
    if (!found) throw new TokenRefused('The access token is unknown, expired or revoked: authorize again.');
    const audience = ([] as string[]).concat((found.aud as string | string[] | undefined) ?? []);
    if (!audience.includes(this.resource))
      throw new TokenRefused(`The access token was issued for another resource, not ${this.resource}.`);
    const key = found.accountId ? await this.deps.keys.activeAgentKey(found.accountId) : null;
    if (!key) throw new TokenRefused('The agent key this token acts as was revoked by its owner: authorize again.');
    return {
      keyId: key.keyId,
      accountId: key.accountId,
      clientId: found.clientId ?? '',
      scopes: found.scope ? found.scope.split(' ') : [],
      expiresAt: found.exp ?? 0,
      resource: this.resource,
    };
  }
}

/** The page a browser sees when the authorization server cannot send it back to its client. */
function errorPage(error: string, description: string): string {
  const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Authorization failed</title></head>
<body><h1>Authorization failed</h1><p><strong>${esc(error)}</strong></p><p>${esc(description)}</p>
<p>Nothing was authorized. Start the connection again from your app.</p></body></html>`;
}
