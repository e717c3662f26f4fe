import { providerDriftContract } from '../contracts/provider-drift.contract.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

providerDriftContract('memory', async () => memoryStore());
