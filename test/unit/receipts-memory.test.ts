import { receiptsContract } from '../contracts/receipts.contract.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

receiptsContract('memory', async () => memoryStore());
