import ipaddr from 'ipaddr.js';
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
  const plain = address.split('%')[0];
  if (!ipaddr.isValid(plain)) return address;
  const parsed = ipaddr.process(plain);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  return `${(parsed as ipaddr.IPv6).parts
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`;
}
