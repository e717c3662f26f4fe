import assert from 'node:assert/strict';
import mysql from 'mysql2/promise';
import type { DataSource } from 'typeorm';
import { createDatabaseIfMissing, createDataSource, dropDatabase, parseDatabaseUrl } from '../../src/db/data-source.js';
import { withMigrationLock } from '../../src/db/migration-lock.js';
import { sqlQuery } from '../../src/db/sql.js';
import { childDatabaseUrl } from '../helpers/db.js';
import { transactionKinds } from '../helpers/transaction-kinds.js';
import { waitFor } from '../helpers/wait.js';

describe('the retry helper on one server', function () {
  this.timeout(30_000);
  const url = childDatabaseUrl('retry');
  let ds: DataSource;
  let other: mysql.Connection;

  before(async () => {
    await createDatabaseIfMissing(url);
    ds = createDataSource(url, 4, []);
    await ds.initialize();
    await ds.query('CREATE TABLE probe (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB');
    await ds.query('CREATE TABLE weight (id INT AUTO_INCREMENT PRIMARY KEY) ENGINE=InnoDB');
    await ds.query('CREATE TABLE effect (id INT AUTO_INCREMENT PRIMARY KEY, kind VARCHAR(64) NOT NULL) ENGINE=InnoDB');
    const t = parseDatabaseUrl(url);
    other = await mysql.createConnection({ host: t.host, port: t.port, user: t.user, database: t.database });
  });
  after(async () => {
    await other.end();
    await ds.destroy();
    await dropDatabase(url);
  });
  beforeEach(async () => {
    await ds.query('DELETE FROM probe');
    await ds.query('INSERT INTO probe (id, v) VALUES (1, 0), (2, 0)');
  });

  for (const kind of transactionKinds) {
    it(`${kind.name}: a deadlock victim is run again, its writes land once and what follows the commit runs once`, async () => {
      let attempts = 0;
      let afterCommit = 0;
      await kind.run(ds, async (q) => {
        attempts++;
        await q('SELECT v FROM probe WHERE id = 1 FOR UPDATE');
        if (attempts === 1) {
          // The other transaction holds row 2, has written more (so InnoDB picks ours as the
          // victim) and then waits for row 1, which ours holds: a deadlock.
          await other.query('START TRANSACTION');
          await other.query('INSERT INTO weight () VALUES (),(),(),(),(),(),(),(),(),()');
          await other.query('UPDATE probe SET v = v + 10 WHERE id = 2');
          const ours = q('UPDATE probe SET v = v + 1 WHERE id = 2');
          const theirs = other.query('UPDATE probe SET v = v + 10 WHERE id = 1');
          const outcome = await ours.then(
            () => 'ran',
            (err: { code?: string }) => err.code,
          );
          await theirs;
          await other.query('COMMIT');
          assert.equal(outcome, 'ER_LOCK_DEADLOCK');
          throw Object.assign(new Error('deadlock'), { code: outcome });
        }
        await q('UPDATE probe SET v = v + 1 WHERE id = 2');
        await q('INSERT INTO effect (kind) VALUES (?)', [kind.name]);
      });
      afterCommit++;
      assert.equal(attempts, 2);
      assert.equal(afterCommit, 1);
      const rows = (await ds.query('SELECT id, v FROM probe ORDER BY id')) as { id: number; v: number }[];
      assert.deepEqual(
        rows.map((r) => [r.id, r.v]),
        [
          [1, 10],
          [2, 11],
        ],
      );
      const effects = (await ds.query('SELECT COUNT(*) AS n FROM effect WHERE kind = ?', [kind.name])) as {
        n: number;
      }[];
      assert.equal(Number(effects[0].n), 1);
    });
  }

  it('sqlQuery: a single statement in autocommit mode that loses a deadlock is run again, and lands once', async () => {
    const deadlocks = async () =>
      Number(((await ds.query("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")) as { Value: string }[])[0].Value);
    const before = await deadlocks();
    // The other transaction holds row 2 and has written more, so InnoDB picks the statement as the victim.
    await other.query('START TRANSACTION');
    await other.query('INSERT INTO weight () VALUES (),(),(),(),(),(),(),(),(),()');
    await other.query('UPDATE probe SET v = v + 10 WHERE id = 2');
    // Locks row 1, then waits for row 2.
    const ours = sqlQuery(ds, 'UPDATE probe SET v = v + 1 WHERE id IN (1, 2)');
    // Only this statement's lock wait counts: the other worker's tests may hold lock waits of their own.
    // Bounded by time, not by turns, so a loaded machine only makes it slower.
    await waitFor(
      async () => {
        const waiting = (await ds.query(
          "SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND trx_query = 'UPDATE probe SET v = v + 1 WHERE id IN (1, 2)'",
        )) as { n: number }[];
        return Number(waiting[0].n) > 0;
      },
      { intervalMs: 5, what: 'the statement to wait for row 2' },
    ).catch(async (err: unknown) => {
      await other.query('ROLLBACK');
      throw err;
    });
    // Waits for row 1, which the statement holds: a deadlock, which the statement loses.
    await other.query('UPDATE probe SET v = v + 10 WHERE id = 1');
    await other.query('COMMIT');
    await ours;
    assert.ok((await deadlocks()) > before, 'a deadlock was detected');
    const rows = (await ds.query('SELECT id, v FROM probe ORDER BY id')) as { id: number; v: number }[];
    assert.deepEqual(
      rows.map((r) => [r.id, r.v]),
      [
        [1, 11],
        [2, 11],
      ],
    );
  });

  it("the migration lock lets one holder in at a time and frees a dead holder's lock when its lease runs out", async () => {
    const order: string[] = [];
    let releaseFirst!: () => void;
    const firstHolds = new Promise<void>((r) => (releaseFirst = r));
    let firstIn!: () => void;
    const firstEntered = new Promise<void>((r) => (firstIn = r));
    const first = withMigrationLock(ds, 10, async () => {
      order.push('first in');
      firstIn();
      await firstHolds;
      order.push('first out');
    });
    await firstEntered;
    // The second holder's tries at the lock that were refused, counted on the one method the lock uses.
    let refused = 0;
    const counted = {
      query: (sql: string, params?: unknown[]) => {
        const answer = ds.query(sql, params);
        if (!sql.startsWith('INSERT INTO migration_lock')) return answer;
        return answer.catch((err: unknown) => {
          refused++;
          throw err;
        });
      },
    } as unknown as DataSource;
    const second = withMigrationLock(counted, 10, async () => void order.push('second in'));
    // The second waits while the first holds the lock: it has not entered after several of its tries.
    await waitFor(() => refused >= 3, { what: "the second holder's third refused try" });
    assert.deepEqual(order, ['first in']);
    releaseFirst();
    await Promise.all([first, second]);
    assert.deepEqual(order, ['first in', 'first out', 'second in']);

    // A holder that died leaves its row; a lease of 1 s lets the next one take it over.
    await ds.query(
      "INSERT INTO migration_lock (name, holder, expires_at) VALUES ('migrations', 'dead0000-0000-0000-0000-000000000000', NOW(6) + INTERVAL 1 SECOND)",
    );
    const started = Date.now();
    await withMigrationLock(ds, 10, async () => void order.push('after the dead one'), 1);
    assert.ok(Date.now() - started >= 500, 'it waited for the lease to run out');
    assert.equal(order.at(-1), 'after the dead one');
    const left = (await ds.query('SELECT COUNT(*) AS n FROM migration_lock')) as { n: number }[];
    assert.equal(Number(left[0].n), 0);
  });
});
