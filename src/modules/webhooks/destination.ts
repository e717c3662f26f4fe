import { lookup as dnsLookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

/*
 * Where a webhook may be sent, and the one way it is sent. The host is resolved once per request
 * and the connection goes to that vetted address (a name that resolves elsewhere a moment later,
 * DNS rebinding, changes nothing); TLS still checks the certificate against the name. Redirects
 * are answers like any other (not 2xx: the delivery failed), and the answer's body is read only
 * up to a cap and thrown away.
 */

/** What a rule of {@link DESTINATION_RANGES} does with an address in its range. */
type RangeRule = 'refuse' | 'judge-embedded-ipv4';

interface DestinationRange {
  cidr: string;
  what: string;
  rule: RangeRule;
}

/**
 * Every address range a webhook may not be sent to, IPv4 and IPv6, first match wins. The IANA
 * special-purpose registries' ranges that are not globally reachable, multicast, and (last) all
 * IPv6 outside global unicast 2000::/3. Two IPv6 forms carry an IPv4 address that is judged by
 * this same table: IPv4-mapped `::ffff:a.b.c.d` and the NAT64 well-known prefix
 * `64:ff9b::a.b.c.d` (on an IPv6-only host behind DNS64 that is how IPv4 receivers resolve).
 * Every other form that embeds an IPv4 address is refused outright, whatever it embeds:
 * IPv4-compatible `::a.b.c.d`, NAT64 local-use, 6to4 and Teredo. The cloud metadata addresses
 * (169.254.169.254, fd00:ec2::254) fall in link-local and unique-local.
 */
export const DESTINATION_RANGES: readonly DestinationRange[] = [
  { cidr: '::ffff:0:0/96', what: 'IPv4-mapped', rule: 'judge-embedded-ipv4' },
  { cidr: '64:ff9b::/96', what: 'NAT64 well-known prefix', rule: 'judge-embedded-ipv4' },
  { cidr: '0.0.0.0/8', what: 'this network', rule: 'refuse' },
  { cidr: '10.0.0.0/8', what: 'private', rule: 'refuse' },
  { cidr: '100.64.0.0/10', what: 'shared address space (CGNAT)', rule: 'refuse' },
  { cidr: '127.0.0.0/8', what: 'loopback', rule: 'refuse' },
  { cidr: '169.254.0.0/16', what: 'link-local', rule: 'refuse' },
  { cidr: '172.16.0.0/12', what: 'private', rule: 'refuse' },
  { cidr: '192.0.0.0/24', what: 'IETF protocol assignments', rule: 'refuse' },
  { cidr: '192.0.2.0/24', what: 'documentation (TEST-NET-1)', rule: 'refuse' },
  { cidr: '192.88.99.0/24', what: '6to4 relay anycast', rule: 'refuse' },
  { cidr: '192.168.0.0/16', what: 'private', rule: 'refuse' },
  { cidr: '198.18.0.0/15', what: 'benchmarking', rule: 'refuse' },
  { cidr: '198.51.100.0/24', what: 'documentation (TEST-NET-2)', rule: 'refuse' },
  { cidr: '203.0.113.0/24', what: 'documentation (TEST-NET-3)', rule: 'refuse' },
  { cidr: '224.0.0.0/4', what: 'multicast', rule: 'refuse' },
  { cidr: '255.255.255.255/32', what: 'limited broadcast', rule: 'refuse' },
  { cidr: '240.0.0.0/4', what: 'reserved', rule: 'refuse' },
  { cidr: '::/128', what: 'unspecified', rule: 'refuse' },
  { cidr: '::1/128', what: 'loopback', rule: 'refuse' },
  { cidr: '::/96', what: 'IPv4-compatible (deprecated)', rule: 'refuse' },
  { cidr: '64:ff9b:1::/48', what: 'NAT64 local-use', rule: 'refuse' },
  { cidr: '100::/64', what: 'discard-only', rule: 'refuse' },
  { cidr: '100:0:0:1::/64', what: 'dummy prefix', rule: 'refuse' },
  // Teredo (2001::/32), benchmarking (2001:2::/48) and ORCHID among them; the few globally
  // reachable assignments inside are anycast services no receiver runs on.
  { cidr: '2001::/23', what: 'IETF protocol assignments', rule: 'refuse' },
  { cidr: '2001:db8::/32', what: 'documentation', rule: 'refuse' },
  { cidr: '2002::/16', what: '6to4', rule: 'refuse' },
  { cidr: '3fff::/20', what: 'documentation', rule: 'refuse' },
  { cidr: '5f00::/16', what: 'SRv6 SIDs', rule: 'refuse' },
  { cidr: 'fc00::/7', what: 'unique local', rule: 'refuse' },
  { cidr: 'fe80::/10', what: 'link-local', rule: 'refuse' },
  { cidr: 'fec0::/10', what: 'site-local (deprecated)', rule: 'refuse' },
  { cidr: 'ff00::/8', what: 'multicast', rule: 'refuse' },
  { cidr: '::/3', what: 'outside global unicast', rule: 'refuse' },
  { cidr: '4000::/2', what: 'outside global unicast', rule: 'refuse' },
  { cidr: '8000::/1', what: 'outside global unicast', rule: 'refuse' },
];

const PARSED_RANGES = DESTINATION_RANGES.map((r) => ({ ...r, range: ipaddr.parseCIDR(r.cidr) }));

/**
 * An IP literal as ipaddr.js reads it, or null when it is not one. Node's own parser decides what
 * is an address; a dotted IPv4 tail of an IPv6 literal (`::1.2.3.4`, `64:ff9b::8.8.8.8`), which
 * this ipaddr.js does not read, is rewritten as two hex groups first. A zone (`%eth0`) is never a
 * destination.
 */
function parseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  const kind = isIP(address);
  if (kind === 4) return ipaddr.IPv4.parse(address);
  if (kind !== 6 || address.includes('%')) return null;
  const tail = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(address);
  const hex = tail
    ? `${tail[1]}${((+tail[2] << 8) | +tail[3]).toString(16)}:${((+tail[4] << 8) | +tail[5]).toString(16)}`
    : address;
  return ipaddr.IPv6.isValid(hex) ? ipaddr.IPv6.parse(hex) : null;
}

function inRange(ip: ipaddr.IPv4 | ipaddr.IPv6, [base, bits]: [ipaddr.IPv4 | ipaddr.IPv6, number]): boolean {
  if (ip instanceof ipaddr.IPv4) return base instanceof ipaddr.IPv4 && ip.match(base, bits);
  return base instanceof ipaddr.IPv6 && ip.match(base, bits);
}

/** The range of {@link DESTINATION_RANGES} that refuses `address` (an IP literal), or null when it may be called. */
export function refusedRange(address: string): string | null {
  const ip = parseAddress(address);
  if (!ip) return 'not an IP address';
  for (const r of PARSED_RANGES) {
    if (!inRange(ip, r.range)) continue;
    if (r.rule === 'refuse') return `${r.cidr} (${r.what})`;
    const bytes = ip.toByteArray().slice(12);
    const embedded = refusedRange(bytes.join('.'));
    return embedded === null ? null : `${r.cidr} (${r.what}) of ${embedded}`;
  }
  return null;
}

/** Whether `address` (an IP literal) may be called: globally reachable unicast, or any address when private destinations are allowed. */
export function addressAllowed(address: string, allowPrivate: boolean): boolean {
  if (parseAddress(address) === null) return false;
  return allowPrivate || refusedRange(address) === null;
}

/** The longest URL an endpoint may have, as parsed (the column's width). */
export const URL_MAX_CHARS = 2048;

/**
 * Why a URL may not be an endpoint, or null when it may (the address is checked again at each
 * delivery). The URL is stored and listed as parsed (`href`), so one whose parse would change
 * its host, or that carries control characters a parser drops, is refused rather than rewritten.
 */
export function urlProblem(raw: string, allowPrivate: boolean): string | null {
  if (/[\x00-\x1f\x7f]/.test(raw)) return 'url must not contain control characters (CR, LF, NUL, tab and the like)';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'url is not an absolute URL';
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) return 'url must be https';
  if (url.username || url.password) return 'url must not carry a user name or password';
  if (url.hash || raw.includes('#')) return 'url must not have a #fragment';
  const written = writtenHost(raw);
  if (written === null || written.toLowerCase() !== url.hostname) {
    return `url's host reads as ${url.hostname} once parsed: send the URL with that host`;
  }
  if (url.href.length > URL_MAX_CHARS) return `url is longer than ${URL_MAX_CHARS} characters once parsed`;
  return null;
}

/** The host as written between `//` and the port or path, or null when the URL does not spell one out. */
function writtenHost(raw: string): string | null {
  const authority = /^\s*[a-z][a-z0-9+.-]*:\/\/([^/?#\\]*)/i.exec(raw)?.[1];
  if (authority === undefined) return null;
  const hostPort = authority.slice(authority.lastIndexOf('@') + 1);
  if (hostPort.startsWith('[')) return hostPort.slice(0, hostPort.indexOf(']') + 1);
  const colon = hostPort.lastIndexOf(':');
  return colon === -1 ? hostPort : hostPort.slice(0, colon);
}

/** Looks a host name up: every address it has, as the operating system's resolver answers. */
export type Resolver = (host: string) => Promise<{ address: string; family: number }[]>;

export const systemResolver: Resolver = (host) => dnsLookup(host, { all: true, verbatim: true });

/**
 * The one refusal of a destination, at creation and at a try alike: the same words whether the
 * name does not resolve or resolves only to refused addresses, so they tell nothing of what the
 * service's resolver sees.
 */
export const noAllowedAddress = (host: string): string =>
  `${host} has no address webhooks may be sent to: it must resolve to a public address (not loopback, private, link-local, reserved or special-purpose)`;

/**
 * Resolves the URL's host and answers the first address that may be called (an IPv4-mapped one
 * as the IPv4 address it maps); throws {@link DestinationRefused} when there is none.
 */
export async function vettedAddress(
  url: URL,
  allowPrivate: boolean,
  resolve: Resolver = systemResolver,
): Promise<{ address: string; family: 4 | 6 }> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let found: { address: string; family: number }[];
  if (isIP(host)) found = [{ address: host, family: isIP(host) }];
  else {
    try {
      found = await resolve(host);
    } catch {
      found = [];
    }
  }
  const ok = found.find((a) => addressAllowed(a.address, allowPrivate));
  if (!ok) throw new DestinationRefused(noAllowedAddress(host));
  const ip = parseAddress(ok.address)!;
  if (ip instanceof ipaddr.IPv4) return { address: ok.address, family: 4 };
  return ip.isIPv4MappedAddress()
    ? { address: ip.toIPv4Address().toString(), family: 4 }
    : { address: ok.address, family: 6 };
}

/** The destination may not be called (a rule, not a network failure). */
export class DestinationRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DestinationRefused';
  }
}

export interface PostLimits {
  /** Until the connection (and TLS) is up. */
  connectMs: number;
  /** Until the whole answer is read. */
  totalMs: number;
  /** Bytes of the answer's body read before the rest is dropped. */
  maxBodyBytes: number;
}

export const POST_LIMITS: PostLimits = { connectMs: 5000, totalMs: 10_000, maxBodyBytes: 64 * 1024 };

/** How a request to a vetted address is made: its method, body and headers, and the trust store TLS checks against. */
export interface PinnedRequest {
  method: 'GET' | 'POST';
  /** Sent as JSON when given. */
  body?: string;
  headers: Record<string, string>;
  /** Certificates TLS trusts instead of the system's (a test's own authority); the name is still checked. */
  ca?: string | Buffer;
}

/** What a pinned request answered: its status, headers and the body up to the cap (`truncated` when it went on). */
export interface PinnedAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  truncated: boolean;
}

/** POSTs `body` to `url` at its vetted address; answers the status code, throws on refusal, network failure or timeout. */
export async function postPinned(
  url: URL,
  body: string,
  headers: Record<string, string>,
  allowPrivate: boolean,
  limits: PostLimits = POST_LIMITS,
  resolve: Resolver = systemResolver,
): Promise<number> {
  return (await requestPinned(url, { method: 'POST', body, headers }, allowPrivate, limits, resolve)).status;
}

/**
 * One request to `url` at its vetted address, within the limits: a webhook's POST, a client
 * metadata document's GET. Redirects are not followed. Throws {@link DestinationRefused} on a
 * refused destination, and on a network failure or a timeout.
 */
export async function requestPinned(
  url: URL,
  request: PinnedRequest,
  allowPrivate: boolean,
  limits: PostLimits = POST_LIMITS,
  resolve: Resolver = systemResolver,
): Promise<PinnedAnswer> {
  const { address, family } = await vettedAddress(url, allowPrivate, resolve);
  const lookup: LookupFunction = (_host, options, callback) => {
    if (options.all)
      (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address, family }]);
    else callback(null, address, family);
  };
  const client = url.protocol === 'https:' ? https : http;
  const { body } = request;
  const headers: Record<string, string> = { ...request.headers };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(Buffer.byteLength(body));
  }
  return new Promise<PinnedAnswer>((resolve, reject) => {
    const req = client.request(
      url,
      { method: request.method, lookup, agent: false, headers, ...(request.ca ? { ca: request.ca } : {}) },
      (res) => {
        const chunks: Buffer[] = [];
        let read = 0;
        const answer = (truncated: boolean): PinnedAnswer => ({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).subarray(0, limits.maxBodyBytes),
          truncated,
        });
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read <= limits.maxBodyBytes + chunk.length) chunks.push(chunk);
          if (read > limits.maxBodyBytes) {
            // Enough to know what it answered; the rest is not ours to hold.
            res.destroy();
            finish(null, answer(true));
          }
        });
        res.on('end', () => finish(null, answer(false)));
        res.on('error', (err) => finish(err));
      },
    );
    let done = false;
    const total = setTimeout(
      () => req.destroy(new Error(`no complete answer within ${limits.totalMs} ms`)),
      limits.totalMs,
    );
    const connect = setTimeout(
      () => req.destroy(new Error(`could not connect within ${limits.connectMs} ms`)),
      limits.connectMs,
    );
    req.on('socket', (socket) => {
      socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', () => clearTimeout(connect));
    });
    function finish(err: Error | null, result?: PinnedAnswer): void {
      if (done) return;
      done = true;
      clearTimeout(total);
      clearTimeout(connect);
      if (err) reject(err);
      else resolve(result!);
    }
    req.on('error', (err) => finish(err));
    req.end(body);
  });
}
