/**
 * Driver error codes that mean "the database cannot be reached", as opposed to a query the
 * database refused. Start-up turns them into one line; the HTTP layer into 503 UNAVAILABLE.
 */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'ER_ACCESS_DENIED_ERROR',
  'ER_CON_COUNT_ERROR',
  'ER_SERVER_SHUTDOWN',
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'POOL_CLOSED',
]);

/** True when `err` (or the driver error TypeORM wrapped, or its cause) is a connection failure. */
export function isConnectionError(err: unknown): boolean {
  for (
    let e = err as { code?: unknown; driverError?: unknown; cause?: unknown } | undefined, depth = 0;
    e && depth < 4;
    depth++
  ) {
    if (typeof e.code === 'string' && CONNECTION_CODES.has(e.code)) return true;
    e = (e.driverError ?? e.cause) as typeof e;
  }
  return false;
}
