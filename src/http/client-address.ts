import { isIPv4, isIPv6 } from 'node:net';
import type { Request } from 'express';

/**
 * The client's address as the configured `trust proxy` (TRUST_PROXY) makes it trustworthy: the
 * socket's peer unless a trusted proxy forwarded it.
 */
export function clientAddress(req: Request): string {
  return req.ip ?? req.socket.remoteAddress ?? 'unknown';
}

/**
 * The bucket a client address is counted in for per-address limits: an IPv4 address itself (also
 * when written IPv4-mapped, `::ffff:a.b.c.d`), and an IPv6 address's /64, since one subscriber
 * holds a whole /64 and could otherwise take a fresh address for every request.
 */
export function addressBucket(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped && isIPv4(mapped[1])) return mapped[1];
  if (isIPv4(address)) return address;
  if (!isIPv6(address)) return address;
  return `${expandIPv6(address).slice(0, 4).join(':')}::/64`;
}

/** The eight 16-bit groups of an IPv6 address, without leading zeros. */
function expandIPv6(address: string): string[] {
  const plain = address.split('%')[0];
  const [head, tail] = plain.split('::');
  const parts = (s: string | undefined) => (s ? s.split(':') : []);
  let h = parts(head);
  let t = parts(tail);
  // An embedded IPv4 tail (`::1.2.3.4`) takes two groups.
  const expand = (groups: string[]) =>
    groups.flatMap((g) => {
      if (!g.includes('.')) return [g];
      const [a, b, c, d] = g.split('.').map(Number);
      return [((a << 8) | b).toString(16), ((c << 8) | d).toString(16)];
    });
  h = expand(h);
  t = expand(t);
  const zeros = tail === undefined ? [] : Array(8 - h.length - t.length).fill('0');
  return [...h, ...zeros, ...t].map((g) => parseInt(g, 16).toString(16));
}
