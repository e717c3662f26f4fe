import { checkoutsContract } from '../contracts/checkouts.contract.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

checkoutsContract('memory', async () => memoryStore());
