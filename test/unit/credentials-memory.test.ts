import { credentialsContract } from '../contracts/credentials.contract.js';
import { memoryCredentialsSeed } from '../fakes/store/credentials.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

credentialsContract('memory', async () => {
  const store = memoryStore();
  return { store, seed: memoryCredentialsSeed(store.tables) };
});
