import { createStore } from '../../src/repositories.js';
import { inventoryContract } from '../contracts/inventory.contract.js';
import { testDataSource } from '../helpers/db.js';

inventoryContract('MariaDB', async () => createStore(await testDataSource()));
