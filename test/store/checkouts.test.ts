import { createStore } from '../../src/repositories.js';
import { checkoutsContract } from '../contracts/checkouts.contract.js';
import { testDataSource } from '../helpers/db.js';

checkoutsContract('MariaDB', async () => createStore(await testDataSource()));
