import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { hydrate, insertEntity } from '../../src/db/entity-rows.js';
import { inOpenTransaction, inPipelinedTransaction, sqlQuery, type SqlTransaction } from '../../src/db/sql.js';
import { Order } from '../../src/modules/rentals/store/order.entity.js';
import { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import { createTestContext } from '../helpers/context.js';
import { testDataSource } from '../helpers/db.js';
import { signup } from '../helpers/factories.js';
import { sentRequests } from '../helpers/sql-requests.js';

describe('SqlTransaction (plain mysql2 transactions of the hot paths)', () => {
  let ds: DataSource;
  const table = `sql_tx_${randomUUID().slice(0, 8)}`;

  before(async () => {
    ds = await testDataSource();
    await ds.query(`CREATE TABLE ${table} (id INT PRIMARY KEY, v VARCHAR(100) NOT NULL) ENGINE=InnoDB`);
  });
  after(() => ds.query(`DROP TABLE ${table}`));
  beforeEach(() => ds.query(`DELETE FROM ${table}`));

  const rows = async () =>
    ((await ds.query(`SELECT id, v FROM ${table} ORDER BY id`)) as { id: number; v: string }[]).map(
      (r) => `${r.id}:${r.v}`,
    );

  it('sends statements issued together as one request, runs them in order and answers each', async () => {
    const { result, sent } = await sentRequests(() =>
      inPipelinedTransaction(ds, async (tx) => {
        const [a, b, read] = await Promise.all([
          tx.query(`INSERT INTO ${table} (id, v) VALUES (?, ?)`, [1, 'one']),
          tx.query(`UPDATE ${table} SET v = ? WHERE id = ?`, ['uno', 1]),
          tx.query(`SELECT v FROM ${table} WHERE id = ?`, [1]),
        ]);
        return { a, b, read };
      }),
    );
    assert.equal(result.a.affectedRows, 1);
    assert.equal(result.b.changedRows, 1);
    assert.deepEqual(
      result.read.map((r: { v: string }) => r.v),
      ['uno'],
    );
    // START TRANSACTION travels with the first three; COMMIT is the second request.
    assert.equal(sent.length, 2);
    assert.deepEqual(await rows(), ['1:uno']);
  });

  it('rolls everything back when the function throws, and is closed afterwards', async () => {
    let seen: SqlTransaction | undefined;
    await assert.rejects(
      inPipelinedTransaction(ds, async (tx) => {
        seen = tx;
        assert.ok(inOpenTransaction(tx));
        await tx.query(`INSERT INTO ${table} (id, v) VALUES (?, ?)`, [2, 'two']);
        throw new Error('changed my mind');
      }),
      /changed my mind/,
    );
    assert.equal(seen!.active, false);
    assert.deepEqual(await rows(), []);
    // A statement issued after the end would run in autocommit, outside the transaction: refused.
    await assert.rejects(seen!.query(`INSERT INTO ${table} (id, v) VALUES (?, ?)`, [2, 'late']), /has ended/);
    assert.deepEqual(await rows(), []);
  });

  it('rejects every statement of a batch when one fails, and rolls back the ones before it', async () => {
    const outcomes: string[] = [];
    await assert.rejects(
      inPipelinedTransaction(ds, async (tx) => {
        const settle = (p: Promise<unknown>) =>
          p.then(
            () => outcomes.push('ok'),
            (e: { code?: string }) => outcomes.push(e.code ?? 'error'),
          );
        await Promise.all([
          settle(tx.query(`INSERT INTO ${table} (id, v) VALUES (?, ?)`, [3, 'three'])),
          settle(tx.query(`INSERT INTO ${table} (id, v) VALUES (?, ?)`, [3, 'again'])),
          settle(tx.query(`INSERT INTO ${table} (id, v) VALUES (?, ?)`, [4, 'four'])),
        ]);
        throw new Error('a statement failed');
      }),
      /a statement failed/,
    );
    assert.deepEqual(outcomes, ['ER_DUP_ENTRY', 'ER_DUP_ENTRY', 'ER_DUP_ENTRY']);
    assert.deepEqual(await rows(), []);
  });

  it('escapes values as parameters: a value holding SQL stays a value', async () => {
    const evil = `x'); DROP TABLE ${table}; --`;
    await inPipelinedTransaction(ds, (tx) => tx.query(`INSERT INTO ${table} (id, v) VALUES (?, ?)`, [5, evil]));
    assert.deepEqual(await rows(), [`5:${evil}`]);
  });

  it('runs a deadlock victim again, and commits once', async () => {
    await ds.query(`INSERT INTO ${table} (id, v) VALUES (10, 'a'), (11, 'b')`);
    let runs = 0;
    // Two transactions lock the two rows in opposite orders; InnoDB rolls one back, which runs again.
    // Neither asks for its second row before both hold their first, so the deadlock always happens.
    let arrived = 0;
    let bothLocked!: () => void;
    const barrier = new Promise<void>((r) => (bothLocked = r));
    const cross = (first: number, second: number, v: string) => {
      let attempt = 0;
      return inPipelinedTransaction(ds, async (tx) => {
        runs++;
        attempt++;
        await tx.query(`SELECT id FROM ${table} WHERE id = ? FOR UPDATE`, [first]);
        // Only first attempts meet; the victim's retry just waits for the winner's locks.
        if (attempt === 1) {
          if (++arrived === 2) bothLocked();
          await barrier;
        }
        await tx.query(`UPDATE ${table} SET v = CONCAT(v, ?) WHERE id = ?`, [v, second]);
      });
    };
    await Promise.all([cross(10, 11, 'x'), cross(11, 10, 'y')]);
    assert.equal(runs, 3, 'one deadlock victim, run once more');
    assert.deepEqual(await rows(), ['10:ay', '11:bx']);
  });

  it('runs again a transaction the server rolled back under it, whatever error its next statement got', async () => {
    let runs = 0;
    await inPipelinedTransaction(ds, async (tx) => {
      runs++;
      await tx.query(`INSERT INTO ${table} (id, v) VALUES (?, ?)`, [20, 'kept']);
      if (runs === 1) {
        // What a cluster's brute-force abort leaves: the transaction gone, the next statement on its own.
        await tx.query('ROLLBACK');
        await tx.query(`SELECT * FROM ${table}_missing`);
      }
    });
    assert.equal(runs, 2);
    assert.deepEqual(await rows(), ['20:kept']);
  });

  it('does not run again a transaction whose own statement failed', async () => {
    let runs = 0;
    await assert.rejects(
      inPipelinedTransaction(ds, async (tx) => {
        runs++;
        await tx.query(`INSERT INTO ${table} (id, v) VALUES (?, ?)`, [21, 'gone']);
        await tx.query(`SELECT * FROM ${table}_missing`);
      }),
      (err: { code?: string }) => err.code === 'ER_NO_SUCH_TABLE',
    );
    assert.equal(runs, 1);
    assert.deepEqual(await rows(), []);
  });

  it('writes and reads entity rows as TypeORM does', async () => {
    const ctx = await createTestContext();
    try {
      const { accountId, keyId } = await signup(ctx);
      const key = await ctx.services.ds.getRepository(ApiKey).findOneByOrFail({ id: keyId });
      const now = new Date(Math.floor(Date.now() / 1000) * 1000 + 123);
      const order: Order = {
        id: randomUUID(),
        accountId,
        keyId,
        funding: 'CREDITS',
        billingModel: 'ACCOUNT_BALANCE',
        status: 'FAILED',
        requestKind: 'INTENT',
        offerId: null,
        candidateOfferIds: ['a', 'b'],
        gpuModel: 'H100',
        gpuSlug: 'h100',
        gpuMatch: { key: 'h100', slugs: ['h100-sxm', 'h100-pcie'], known: true, compact: 'h100' },
        gpuCount: 2,
        maxHourlyPriceMinor: 900,
        matchNote: '"H100" names the family H100.',
        budgetMinor: null,
        hourlyPriceMinor: 450,
        durationSeconds: null,
        totalMinor: 0,
        currency: 'USD',
        failureCode: null,
        failureReason: null,
        reversalStatus: null,
        machineImage: 'docker.io/pytorch/pytorch:latest',
        machineEnvNames: ['HF_TOKEN'],
        machinePorts: [8888],
        machineDiskGb: 40,
        machineSecretsEnc: Buffer.from([1, 2, 3]),
        machineSecretsKid: 'k1',
        startupScriptSha256: 'a'.repeat(64),
        terminateAfterSeconds: 3600,
        waitForCapacityUntil: now,
        createdAt: now,
        updatedAt: now,
      };
      await inPipelinedTransaction(ds, (tx) => insertEntity(tx, Order, order));
      try {
        assert.deepEqual({ ...(await ds.getRepository(Order).findOneByOrFail({ id: order.id })) }, order);
        const [row] = await sqlQuery<Record<string, unknown>[]>(ds, `SELECT * FROM orders WHERE id = ?`, [order.id]);
        assert.deepEqual({ ...hydrate(ds, Order, row) }, order);
        const [keyRow] = await sqlQuery<Record<string, unknown>[]>(ds, `SELECT * FROM api_keys WHERE id = ?`, [key.id]);
        assert.deepEqual({ ...hydrate(ds, ApiKey, keyRow) }, { ...key });
      } finally {
        await ds.query(`DELETE FROM orders WHERE id = ?`, [order.id]);
      }
    } finally {
      await ctx.close();
    }
  });
});
