import { closeTestDatabase, testDataSource } from './db.js';
import { assertLedgerConsistent } from './ledger.js';

/** Mocha root hooks: one database per run, and the money invariant after every test. */
export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    await testDataSource();
  },
  async afterEach() {
    await assertLedgerConsistent(await testDataSource());
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    await closeTestDatabase();
  },
};
