import { accountsContract } from '../contracts/accounts.contract.js';
import { setKeyCounters } from '../fakes/store/accounts.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

accountsContract('memory', async () => {
  const store = memoryStore();
  return {
    store,
    async setMoney(accountId, balanceMinor, unpostedUsageMinor) {
      if (!store.tables.table('accounts').update(accountId, { balanceMinor, unpostedUsageMinor }))
        throw new Error(`no account ${accountId}`);
    },
    async setKeyCounters(keyId, counters) {
      setKeyCounters(store.tables, keyId, counters);
    },
    // Each test's rows are its own; the memory store checks no ledger.
    async reset() {},
  };
});
