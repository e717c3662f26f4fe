import assert from 'node:assert/strict';
import type { Pool, PoolConnection } from 'mysql2';
import type { DataSource } from 'typeorm';
import type { MysqlDriver } from 'typeorm/driver/mysql/MysqlDriver.js';
import { statementText } from '../../src/db/statement-text.js';
import { testDataSource } from '../helpers/db.js';

describe('statementText (a statement written once, its values escaped each time)', () => {
  let ds: DataSource;
  let conn: PoolConnection;

  before(async () => {
    ds = await testDataSource();
    const pool = (ds.driver as MysqlDriver).pool as Pool;
    conn = await new Promise<PoolConnection>((resolve, reject) =>
      pool.getConnection((err, c) => (err ? reject(err) : resolve(c))),
    );
  });
  after(() => conn.release());

  const moment = new Date(Date.UTC(2025, 0, 2, 3, 4, 5, 678));
  const cases: [string, unknown[]][] = [
    ['INSERT INTO t (a, b, c, d, e, f) VALUES (?, ?, ?, ?, ?, ?)', ["it's", 'back\\slash\n', 42, -1.5, null, moment]],
    ['INSERT INTO t (a, b, c) VALUES (?, ?, ?)', [undefined, true, false]],
    ['SELECT ? AS big', [12345678901234567890n]],
    ["SELECT '?' AS literal, ? AS v /* ? */ -- ?\n, ? AS w", ['x', 'y']],
    ['SELECT `col?` FROM t WHERE a = ? AND b = "?"', ['é ✓ \u0000 \x1a']],
    ['SELECT * FROM t WHERE id IN (?) AND k = ?', [['a', 'b'], 'k']],
    ['SELECT * FROM t WHERE j = ?', [{ toSqlString: () => 'NOW()' }]],
    ['SELECT * FROM t WHERE b = ?', [Buffer.from('bytes')]],
    ['SELECT ?? FROM t WHERE a = ?', ['col', 1]],
    ['SELECT ? AS one, ? AS two', [1]],
    ['SELECT ? AS one', [1, 2]],
    ['SELECT 1', []],
    ['UPDATE t SET a = ?, b = ? WHERE c = ?', [new Date(Number.NaN), new Date(0), 'c']],
  ];

  it('writes exactly what mysql2 format writes, the first time and every time after', () => {
    for (const [sql, values] of cases) {
      const expected = conn.format(sql, values as unknown[]);
      assert.equal(statementText(conn, sql, values), expected, sql);
      assert.equal(statementText(conn, sql, values), expected, `${sql} (again)`);
    }
  });

  it('escapes each call its own values, whatever the values of the call before', () => {
    const sql = 'INSERT INTO t (a, b, c) VALUES (?, ?, ?)';
    const first = statementText(conn, sql, ['a', moment, 1]);
    const later = new Date(moment.getTime() + 1);
    const second = statementText(conn, sql, ["b'); DROP TABLE t; --", later, 2]);
    assert.equal(first, conn.format(sql, ['a', moment, 1]));
    assert.equal(second, conn.format(sql, ["b'); DROP TABLE t; --", later, 2]));
    assert.notEqual(first, second);
    // A Date changed in place is read again, not taken from the text written for its old time.
    const mutable = new Date(moment.getTime());
    statementText(conn, sql, ['a', mutable, 1]);
    mutable.setUTCFullYear(2030);
    assert.match(statementText(conn, sql, ['a', mutable, 1]), /'2030-01-02 03:04:05\.678'/);
  });
});
