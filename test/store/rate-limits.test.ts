import { createStore } from '../../src/repositories.js';
import { rateLimitsContract } from '../contracts/rate-limits.contract.js';
import { testDataSource } from '../helpers/db.js';

rateLimitsContract('MariaDB', async () => createStore(await testDataSource()));
