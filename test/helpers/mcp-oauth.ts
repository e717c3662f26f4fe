import type { OAuthClientMetadata, OAuthClientProvider, OAuthDiscoveryState } from '@modelcontextprotocol/client';

type Stored = Parameters<NonNullable<OAuthClientProvider['saveClientInformation']>>[0];
type Tokens = Parameters<OAuthClientProvider['saveTokens']>[0];

/**
 * An MCP client's OAuth side, kept in memory: what a hosted app stores per connection. It
 * records the authorization URL the client would open in a browser instead of opening one.
 */
export class MemoryOAuthClient implements OAuthClientProvider {
  info?: Stored;
  saved?: Tokens;
  verifier = '';
  authorizationUrl?: URL;
  discovery?: OAuthDiscoveryState;

  constructor(
    readonly redirectUrl: string,
    private readonly name: string,
    readonly clientMetadataUrl?: string,
  ) {}

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.name,
      client_uri: 'https://app.example/',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }

  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: Stored) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: Tokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
  saveDiscoveryState(state: OAuthDiscoveryState) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery;
  }
}

/**
 * A browser's navigation by GET, redirects followed by hand with the cookies each answer set
 * (one jar per browser): where it stops, the page it shows, or the redirect that left our origin.
 */
export class CookieBrowser {
  /** Cookies by name and path, as a browser keeps them. */
  private readonly jar = new Map<string, { name: string; path: string; value: string }>();

  constructor(private readonly origin: string) {}

  async open(url: string, init: RequestInit = {}): Promise<{ url: string; status: number; html: string }> {
    let next = url;
    let request: RequestInit = init;
    for (let hop = 0; hop < 10; hop++) {
      const res = await fetch(next, {
        ...request,
        redirect: 'manual',
        headers: { ...(request.headers as Record<string, string>), cookie: this.cookieHeader(new URL(next).pathname) },
      });
      for (const line of res.headers.getSetCookie()) {
        const [pair, ...attrs] = line.split(';');
        const eq = pair.indexOf('=');
        const name = pair.slice(0, eq).trim();
        const value = pair.slice(eq + 1);
        const path =
          attrs
            .map((a) => a.trim())
            .find((a) => /^path=/i.test(a))
            ?.slice(5) ?? '/';
        const key = `${name};${path}`;
        if (/max-age=0|expires=thu, 01 jan 1970/i.test(line) || value === '') this.jar.delete(key);
        else this.jar.set(key, { name, path, value });
      }
      const location = res.headers.get('location');
      if (res.status >= 300 && res.status < 400 && location) {
        const target = new URL(location, next).href;
        if (!target.startsWith(this.origin)) return { url: target, status: res.status, html: '' };
        next = target;
        request = {};
        continue;
      }
      return { url: next, status: res.status, html: await res.text() };
    }
    throw new Error(`more than 10 redirects from ${url}`);
  }

  private cookieHeader(path: string): string {
    return [...this.jar.values()]
      .filter((c) => path === c.path || path.startsWith(c.path.endsWith('/') ? c.path : `${c.path}/`))
      .map((c) => `${c.name}=${c.value}`)
      .join('; ');
  }
}
