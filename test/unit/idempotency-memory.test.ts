import { idempotencyContract } from '../contracts/idempotency.contract.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

idempotencyContract('memory', async () => memoryStore());
