import type { Connection, PoolConnection } from 'mysql2';

/**
 * A statement's text with its values escaped into it, exactly as mysql2's `format` writes it,
 * without scanning the text for placeholders on every call: the hot paths send the same few
 * statements again and again (admission's order and deployment inserts have over thirty
 * placeholders each), so each text is split at its placeholders once, by `format` itself, and
 * later calls only escape the values. Values of another kind than a string, number, bigint,
 * boolean, null or Date (lists, objects, buffers) go through `format` as a whole, as does a text
 * with `??` (an identifier placeholder) or a call with another number of values than the text's
 * split was made for.
 */
export function statementText(
  conn: Pick<Connection | PoolConnection, 'format' | 'escape'>,
  sql: string,
  values: readonly unknown[],
): string {
  let chunks = splits.get(sql);
  if (chunks === undefined) {
    chunks = splitAtPlaceholders(conn, sql, values.length);
    // Texts are written in the code, so they are few; the bound only keeps a mistake from growing without end.
    if (splits.size < MAX_SPLITS) splits.set(sql, chunks);
  }
  if (chunks === null || chunks.length !== values.length + 1) return conn.format(sql, values as unknown[]);
  let text = chunks[0];
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    let escaped: string;
    if (typeof v === 'number' || typeof v === 'bigint') escaped = `${v}`;
    else if (typeof v === 'string' || typeof v === 'boolean') escaped = conn.escape(v);
    else if (v === null || v === undefined) escaped = 'NULL';
    else if (v instanceof Date) escaped = dateText(conn, v);
    else return conn.format(sql, values as unknown[]);
    text += escaped + chunks[i + 1];
  }
  return text;
}

const MAX_SPLITS = 1000;
const splits = new Map<string, string[] | null>();

/** A value `format` writes as its own text, so the text between two of them is what surrounds a placeholder. */
const marker = (i: number) => ({ toSqlString: () => `\u0000${i}\u0000` });

/**
 * The text around each of the first `count` placeholders `format` fills (it knows which `?` are
 * inside quotes or comments), or null when the text cannot be split that way.
 */
function splitAtPlaceholders(conn: Pick<Connection, 'format'>, sql: string, count: number): string[] | null {
  if (sql.includes('??') || sql.includes('\u0000')) return null;
  const parts = conn
    .format(
      sql,
      Array.from({ length: count }, (_, i) => marker(i)),
    )
    .split(/\u0000(\d+)\u0000/);
  const chunks: string[] = [parts[0]];
  for (let i = 1; i < parts.length; i += 2) {
    if (Number(parts[i]) !== chunks.length - 1) return null;
    chunks.push(parts[i + 1]);
  }
  return chunks;
}

// Admission writes one moment into several columns and statements: its text is made once.
let lastDate: { ms: number; conn: object; text: string } | undefined;

function dateText(conn: Pick<Connection, 'escape'>, d: Date): string {
  const ms = d.getTime();
  if (lastDate !== undefined && lastDate.ms === ms && lastDate.conn === conn) return lastDate.text;
  const text = conn.escape(d);
  lastDate = { ms, conn, text };
  return text;
}
