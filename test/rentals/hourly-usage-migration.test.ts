import assert from 'node:assert/strict';
import { HourlyUsage1763800017000 } from '../../migrations/1763800017000-HourlyUsage.js';
import { databaseBefore, type DatabaseBefore } from '../helpers/migrated-before.js';
import { seedMeteredRentals } from '../helpers/metered-seed.js';

describe('migration: usage posted by the hour', function () {
  this.timeout(120_000);
  let db: DatabaseBefore;

  before(async () => {
    db = await databaseBefore(HourlyUsage1763800017000, 'hourly');
  });
  after(() => db.close());

  it('keeps the per-sweep usage entries written before it and counts their usage as posted', async () => {
    const startedAt = new Date('2025-01-01T10:00:00.000Z');
    const seed = await seedMeteredRentals(db.ds, {
      accounts: 1,
      perAccount: 2,
      creditsMinor: 10_000,
      priceMinor: 3600,
      startedAt,
    });
    const [accountId, keyId] = [seed.accountIds[0], seed.keyIds[0]];
    // Two sweeps' entries per rental, as the sweep wrote them before: 15 cents each.
    const until = new Date(startedAt.getTime() + 30_000);
    let balance = 10_000;
    for (const id of seed.deploymentIds) {
      for (const ms of [15_000, 30_000]) {
        balance -= 15;
        await db.runner.query(
          `INSERT INTO ledger_entries (account_id, key_id, kind, amount_minor, balance_after_minor, external_ref, description, created_at) VALUES (?, ?, 'USAGE', -15, ?, ?, ?, ?)`,
          [accountId, keyId, balance, `usage:${id}:${startedAt.getTime() + ms}`, `Usage of deployment ${id}`, until],
        );
      }
      await db.runner.query(`UPDATE deployments SET usage_minor = 30, metered_until = ? WHERE id = ?`, [until, id]);
    }
    await db.runner.query(`UPDATE accounts SET balance_minor = ? WHERE id = ?`, [balance, accountId]);
    const before: unknown[] = await db.runner.query(`SELECT * FROM ledger_entries ORDER BY id`);

    await new HourlyUsage1763800017000().up(db.runner);

    assert.deepEqual(await db.runner.query(`SELECT * FROM ledger_entries ORDER BY id`), before, 'no entry rewritten');
    const deps: { usage_minor: string; posted_usage_minor: string; metered_until: Date; posted_until: Date }[] =
      await db.runner.query(
        `SELECT usage_minor, posted_usage_minor, metered_until, posted_until FROM deployments WHERE id IN (?)`,
        [seed.deploymentIds],
      );
    for (const d of deps) {
      assert.equal(Number(d.posted_usage_minor), Number(d.usage_minor));
      assert.equal(d.posted_until.getTime(), d.metered_until.getTime());
    }
    const acc: { balance_minor: string; unposted_usage_minor: string }[] = await db.runner.query(
      `SELECT balance_minor, unposted_usage_minor FROM accounts WHERE id = ?`,
      [accountId],
    );
    assert.deepEqual([Number(acc[0].balance_minor), Number(acc[0].unposted_usage_minor)], [10_000 - 60, 0]);
  });
});
