import { createStore } from '../../src/repositories.js';
import { idempotencyContract } from '../contracts/idempotency.contract.js';
import { testDataSource } from '../helpers/db.js';

idempotencyContract('MariaDB', async () => createStore(await testDataSource()));
