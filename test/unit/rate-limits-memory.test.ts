import { rateLimitsContract } from '../contracts/rate-limits.contract.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

rateLimitsContract('memory', async () => memoryStore());
