import mysql from 'mysql2';

/**
 * The SQL of every request mysql2 sends (one per round trip; SqlTransaction joins a batch's
 * statements with `;\n`) while `fn` runs, on any connection of this process. `fn` sees the list
 * as it grows, to wait on what has been sent.
 */
export async function sentRequests<T>(
  fn: (sent: readonly string[]) => Promise<T>,
): Promise<{ result: T; sent: string[] }> {
  const original = mysql.Connection.prototype.query;
  const sent: string[] = [];
  mysql.Connection.prototype.query = function (this: mysql.Connection, ...args: unknown[]) {
    sent.push(typeof args[0] === 'string' ? args[0] : (args[0] as { sql: string }).sql);
    return (original as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof original;
  try {
    return { result: await fn(sent), sent };
  } finally {
    mysql.Connection.prototype.query = original;
  }
}
