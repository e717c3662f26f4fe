import { eventsContract } from '../contracts/events.contract.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

eventsContract('memory', async () => memoryStore());
