import { randomUUID } from 'node:crypto';
import { webhooksContract } from '../contracts/webhooks.contract.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';
import { memoryWebhooksSeed } from '../fakes/store/webhooks.js';

webhooksContract('memory', async () => {
  const store = memoryStore();
  const seed = memoryWebhooksSeed(store.tables);
  return {
    store,
    keys: {
      async key(accountId) {
        const id = randomUUID();
        seed.key({ id, accountId });
        return id;
      },
      async revoke(keyId, at) {
        seed.revoke(keyId, at);
      },
    },
  };
});
