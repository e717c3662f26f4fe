/**
 * Rows given by the caller as a derived table, for set-based `UPDATE t JOIN (...) v ON ...`
 * statements: `SELECT ? AS a, ? AS b UNION ALL SELECT ?, ? ...`. Plain SQL that MySQL 8 and
 * MariaDB 10.11 both accept (a `VALUES` table constructor is spelt differently on each). Values
 * are bound as parameters; column names come from the caller's code, never from input.
 */
export function derivedTable(
  columns: readonly string[],
  rows: readonly (readonly unknown[])[],
): { sql: string; params: unknown[] } {
  if (rows.length === 0) throw new Error('a derived table needs at least one row');
  for (const c of columns) if (!/^[a-z_][a-z0-9_]*$/.test(c)) throw new Error(`bad derived column name ${c}`);
  const first = `SELECT ${columns.map((c) => `? AS ${c}`).join(', ')}`;
  const rest = `SELECT ${columns.map(() => '?').join(', ')}`;
  const params: unknown[] = [];
  for (const r of rows) {
    if (r.length !== columns.length) throw new Error('derived table row of the wrong width');
    params.push(...r);
  }
  return { sql: [first, ...rows.slice(1).map(() => rest)].join(' UNION ALL '), params };
}
