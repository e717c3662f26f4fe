import { createStore } from '../../src/repositories.js';
import { oauthRecordsContract } from '../contracts/oauth-records.contract.js';
import { testDataSource } from '../helpers/db.js';

oauthRecordsContract('MariaDB', async () => createStore(await testDataSource()));
