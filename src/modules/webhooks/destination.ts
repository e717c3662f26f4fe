import { lookup as dnsLookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

/*
 * Where a webhook may be sent, and the one way it is sent. The host is resolved once per request
 * and the connection goes to that vetted address (a name that resolves elsewhere a moment later,
 * DNS rebinding, changes nothing); TLS still checks the certificate against the name. Redirects
 * are answers like any other (not 2xx: the delivery failed), and the answer's body is read only
 * up to a cap and thrown away.
 */

/** Cloud metadata services, refused by name as well as by range. */
const METADATA = new Set(['169.254.169.254', 'fd00:ec2::254']);

/** Whether `address` (an IP literal) may be called: public unicast, or anything when private destinations are allowed. */
export function addressAllowed(address: string, allowPrivate: boolean): boolean {
  if (!ipaddr.isValid(address)) return false;
  const ip = ipaddr.process(address);
  if (allowPrivate) return true;
  if (METADATA.has(ip.toNormalizedString()) || METADATA.has(ip.toString())) return false;
  // An allowlist: loopback, private, link-local, CGNAT, multicast, unspecified and every reserved range fail it.
  return ip.range() === 'unicast';
}

/** Why a URL may not be an endpoint, or null when it may (the address is checked again at each delivery). */
export function urlProblem(raw: string, allowPrivate: boolean): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'url is not an absolute URL';
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) return 'url must be https';
  if (url.username || url.password) return 'url must not carry a user name or password';
  if (url.hash) return 'url must not have a #fragment';
  return null;
}

/**
 * Resolves the URL's host and answers the first address that may be called; throws naming the
 * host when there is none (every address refused, or the name does not resolve).
 */
export async function vettedAddress(url: URL, allowPrivate: boolean): Promise<{ address: string; family: 4 | 6 }> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const found = ipaddr.isValid(host) ? [{ address: host, family: ipaddr.parse(host).kind() === 'ipv6' ? 6 : 4 }] : await resolveAll(host);
  const ok = found.find((a) => addressAllowed(a.address, allowPrivate));
  if (!ok) throw new DestinationRefused(`${host} resolves only to addresses webhooks may not be sent to (loopback, private, link-local or reserved)`);
  return { address: ok.address, family: ok.family === 6 ? 6 : 4 };
}

async function resolveAll(host: string): Promise<{ address: string; family: number }[]> {
  try {
    return await dnsLookup(host, { all: true, verbatim: true });
  } catch {
    throw new DestinationRefused(`${host} does not resolve`);
  }
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

/** POSTs `body` to `url` at its vetted address; answers the status code, throws on refusal, network failure or timeout. */
export async function postPinned(url: URL, body: string, headers: Record<string, string>, allowPrivate: boolean, limits: PostLimits = POST_LIMITS): Promise<number> {
  const { address, family } = await vettedAddress(url, allowPrivate);
  const lookup: LookupFunction = (_host, options, callback) => {
    if (options.all) (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address, family }]);
    else callback(null, address, family);
  };
  const client = url.protocol === 'https:' ? https : http;
  return new Promise<number>((resolve, reject) => {
    const req = client.request(
      url,
      {
        method: 'POST',
        lookup,
        agent: false,
        headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
      },
      (res) => {
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > limits.maxBodyBytes) {
            // Enough to know it answered; the rest is not ours to hold.
            res.destroy();
            finish(null, res.statusCode ?? 0);
          }
        });
        res.on('end', () => finish(null, res.statusCode ?? 0));
        res.on('error', (err) => finish(err));
      },
    );
    let done = false;
    const total = setTimeout(() => req.destroy(new Error(`no complete answer within ${limits.totalMs} ms`)), limits.totalMs);
    const connect = setTimeout(() => req.destroy(new Error(`could not connect within ${limits.connectMs} ms`)), limits.connectMs);
    req.on('socket', (socket) => {
      socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', () => clearTimeout(connect));
    });
    function finish(err: Error | null, status?: number): void {
      if (done) return;
      done = true;
      clearTimeout(total);
      clearTimeout(connect);
      if (err) reject(err);
      else resolve(status!);
    }
    req.on('error', (err) => finish(err));
    req.end(body);
  });
}
