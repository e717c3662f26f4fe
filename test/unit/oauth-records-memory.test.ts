import { oauthRecordsContract } from '../contracts/oauth-records.contract.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

oauthRecordsContract('memory', async () => memoryStore());
