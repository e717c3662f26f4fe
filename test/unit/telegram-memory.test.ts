import { telegramContract } from '../contracts/telegram.contract.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

telegramContract('memory', async () => memoryStore());
