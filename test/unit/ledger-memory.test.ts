import { ledgerContract } from '../contracts/ledger.contract.js';
import { memoryEvents } from '../fakes/store/ledger.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

ledgerContract('memory', async () => {
  const store = memoryStore();
  return {
    store,
    async eventsOf(accountId) {
      return memoryEvents(store.tables)
        .filter((e) => e.accountId === accountId)
        .map((e) => ({ type: e.type, accountId: e.accountId, keyId: e.keyId, data: e.data }));
    },
    // Each test's rows are its own; the memory store checks no ledger.
    async reset() {},
  };
});
