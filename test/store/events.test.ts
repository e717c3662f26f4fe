import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createStore } from '../../src/repositories.js';
import { eventsContract } from '../contracts/events.contract.js';
import { testDataSource } from '../helpers/db.js';

eventsContract('MariaDB', async () => createStore(await testDataSource()));

describe('events repository (MariaDB): writes that go with a change', () => {
  it('appends an event and moves a cursor only inside a transaction', async () => {
    const store = createStore(await testDataSource());
    const e = {
      type: 'credits.low' as const,
      accountId: randomUUID(),
      keyId: null,
      rentalId: null,
      data: {},
      at: new Date(),
    };
    await assert.rejects(
      store.read((r) => r.events.append(e)),
      /only inside a transaction/,
    );
    await assert.rejects(
      store.read((r) => r.events.claimCursor(`contract-${randomUUID()}`, '0', { lastId: '1', unseen: [] })),
      /only inside a transaction/,
    );
  });
});
