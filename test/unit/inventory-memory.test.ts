import { inventoryContract } from '../contracts/inventory.contract.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

inventoryContract('memory', async () => memoryStore());
