import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { BOOLEAN_SPELLINGS, ConfigError, given, int, list, opt, optInt, str, url, type Env } from '../config-values.js';

/**
 * Which proxies in front of the service may tell the client's address in X-Forwarded-For: false
 * (none: the socket's peer is the client), a number of proxy hops, or their addresses and ranges
 * (`loopback`, `10.0.0.0/8`, ...), as Express's `trust proxy` takes them.
 */
export type TrustProxy = false | number | string[];

/** The public HTTP listener of the `api` role. */
export interface HttpConfig {
  /** PORT. */
  port: number;
  /** Address the HTTP server binds: 127.0.0.1 in development, 0.0.0.0 in production, unless HOST is set. */
  host: string;
  /** Base of every URL the service hands out, without a trailing slash (PUBLIC_BASE_URL). */
  publicBaseUrl: string;
  /** TRUST_PROXY: see {@link TrustProxy}. */
  trustProxy: TrustProxy;
}

/** The separate /metrics, /readyz and /healthz listener, and /metrics on the api port. */
export interface MetricsConfig {
  /** Port of the separate listener (METRICS_PORT); none when unset. */
  port?: number;
  /** Address the metrics listener binds (METRICS_HOST, loopback by default). */
  host: string;
  /** Bearer token that opens /metrics on the api port (METRICS_TOKEN); without it /metrics is not there. */
  token?: string;
}

/** The client releases this service points to and may serve. */
export interface ReleasesConfig {
  /** Where `latest.json` of the client releases lives; served by this service when under PUBLIC_BASE_URL. */
  url: string;
  /** Folder `npm run release` writes the artifacts to, served under `url`. */
  dir: string;
}

const PROXY_RANGES = ['loopback', 'linklocal', 'uniquelocal'];

/** An IP address or CIDR range, as Express's `trust proxy` takes them, or one of its named ranges. */
function proxyAddress(item: string): boolean {
  if (PROXY_RANGES.includes(item)) return true;
  const [address, bits, extra] = item.split('/');
  const family = isIP(address);
  const maxBits = family === 6 ? 128 : 32;
  const bitsOk = bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= maxBits);
  return family !== 0 && extra === undefined && bitsOk;
}

/**
 * TRUST_PROXY: unset or false trusts no forwarded header. Trusting every hop (`true`) would let
 * any client pick its own address for the per-address limits, so it is refused in favour of a hop
 * count or the proxies' own addresses.
 */
function trustProxy(env: Env): TrustProxy {
  const raw = given(env.TRUST_PROXY);
  if (raw === undefined) return false;
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops > 10)
      throw new ConfigError(`TRUST_PROXY must be a hop count from 0 to 10, or the proxies' addresses, got "${raw}"`);
    return hops === 0 ? false : hops;
  }
  const word = raw.toLowerCase();
  if ((BOOLEAN_SPELLINGS.false as readonly string[]).includes(word)) return false;
  if ((BOOLEAN_SPELLINGS.true as readonly string[]).includes(word)) {
    throw new ConfigError(
      `TRUST_PROXY=${raw} would trust an X-Forwarded-For sent by any client; give the number of proxies in front of the service (e.g. 1) or their addresses (e.g. loopback or 10.0.0.0/8)`,
    );
  }
  return list(env, 'TRUST_PROXY', {
    item: proxyAddress,
    help: `the proxies' IP addresses, CIDR ranges or ${PROXY_RANGES.join(', ')} (or a hop count from 0 to 10)`,
  })!;
}

/** PORT, HOST, PUBLIC_BASE_URL and TRUST_PROXY. */
export function readHttp(env: Env, nodeEnv: string): HttpConfig {
  const port = int(env, 'PORT', 8080, 0, 65535);
  return {
    port,
    // The development payment page is free and the local provider hands out shells on this host:
    // a first start on a cloud machine must not offer them to the internet.
    host: str(env, 'HOST', nodeEnv === 'production' ? '0.0.0.0' : '127.0.0.1'),
    publicBaseUrl: url(env, 'PUBLIC_BASE_URL', `http://localhost:${port}`, ['http:', 'https:']).replace(/\/+$/, ''),
    trustProxy: trustProxy(env),
  };
}

/** METRICS_PORT, METRICS_HOST and METRICS_TOKEN: metrics stay off the public port unless a long enough token guards them. */
export function readMetrics(env: Env, httpPort: number): MetricsConfig {
  const port = optInt(env, 'METRICS_PORT', 1, 65535);
  if (port !== undefined && port === httpPort)
    throw new ConfigError(`METRICS_PORT must differ from PORT (${httpPort})`);
  const token = opt(env, 'METRICS_TOKEN', { secret: true, minLength: 24, hint: 'e.g. `openssl rand -base64 24`' });
  return { port, host: str(env, 'METRICS_HOST', '127.0.0.1'), token };
}

/** RELEASES_URL and RELEASES_DIR. */
export function readReleases(env: Env, publicBaseUrl: string): ReleasesConfig {
  return {
    url: url(env, 'RELEASES_URL', `${publicBaseUrl}/releases`, ['http:', 'https:']).replace(/\/+$/, ''),
    dir: resolve(str(env, 'RELEASES_DIR', 'releases')),
  };
}
