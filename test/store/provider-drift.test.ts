import { createStore } from '../../src/repositories.js';
import { providerDriftContract } from '../contracts/provider-drift.contract.js';
import { testDataSource } from '../helpers/db.js';

providerDriftContract('MariaDB', async () => createStore(await testDataSource()));
