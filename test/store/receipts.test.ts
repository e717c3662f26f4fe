import { createStore } from '../../src/repositories.js';
import { receiptsContract } from '../contracts/receipts.contract.js';
import { scratchDatabase } from '../jobs/scratch-database.js';

/*
 * On a database of its own: retiring takes every key active under another SECRETS_KEY id, which in
 * the run's shared database would be the other files' keys.
 */
describe('receipts repository on a database of its own', function () {
  this.timeout(60_000);
  let db: Awaited<ReturnType<typeof scratchDatabase>> | undefined;
  after(async () => db?.drop());

  receiptsContract('MariaDB', async () => {
    db = await scratchDatabase(4);
    return createStore(db.ds);
  });
});
