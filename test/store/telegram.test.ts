import { createStore } from '../../src/repositories.js';
import { telegramContract } from '../contracts/telegram.contract.js';
import { testDataSource } from '../helpers/db.js';

telegramContract('MariaDB', async () => createStore(await testDataSource()));
