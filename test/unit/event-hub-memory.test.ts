import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { EventHub } from '../../src/modules/events/event-hub.js';
import { EventsService } from '../../src/modules/events/events.service.js';
import type { NewEvent } from '../../src/modules/events/events.repository.js';
import { newAccount, newKey } from '../contracts/accounts.contract.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

/** The push hub and the events pages on the memory store: what they read is the events aggregate's. */
describe('event hub and events pages on the memory store', () => {
  let store: ReturnType<typeof memoryStore>;
  let hub: EventHub;
  const accountId = randomUUID();
  beforeEach(() => {
    store = memoryStore();
    hub = new EventHub(store, { tailMs: 5 });
  });
  afterEach(() => hub.stop());

  const event = (o: Partial<NewEvent> = {}): NewEvent => ({
    type: 'credits.low',
    accountId,
    keyId: null,
    rentalId: null,
    data: { n: randomUUID() },
    at: new Date(),
    ...o,
  });
  const append = (...events: NewEvent[]) =>
    store.transaction(async (r) => {
      for (const e of events) await r.events.append(e);
    });

  it('hands a subscription the events after it began that pass its filter, in order', async () => {
    await append(event());
    const sub = await hub.subscribe((e) => e.type === 'topup.paid');
    assert.equal(sub.since, '1');
    await append(event(), event({ type: 'topup.paid' }), event({ type: 'topup.paid' }));
    hub.poke();
    const first = await sub.next(5_000);
    const second = await sub.next(5_000);
    assert.deepEqual([first?.seq, second?.seq], ['3', '4']);
    sub.stop();
    assert.equal(hub.listeners, 0);
  });

  it("ends a key's subscriptions once the key is revoked", async () => {
    const account = newAccount({ id: accountId });
    const key = newKey(accountId);
    await store.transaction(async (r) => {
      await r.accounts.insert(account);
      await r.accounts.keys.insert(key);
    });
    const sub = await hub.subscribe(() => true, { keyId: key.id });
    assert.equal(hub.listeningKeys, 1);
    await store.transaction((r) => r.accounts.keys.markRevoked(key.id, new Date()));
    hub.poke();
    assert.equal(await sub.next(5_000), undefined);
    assert.equal(sub.revoked, true);
    assert.equal(hub.listeningKeys, 0);
  });

  it('pages the newest events, then those after a number, and says where the next page starts', async () => {
    const events = new EventsService(store);
    const owner = { kind: 'OWNER' as const, accountId };
    assert.deepEqual(await events.page(owner, undefined, 10), { events: [], nextAfter: '0' });
    await append(event(), event({ type: 'topup.paid' }), event());
    const newest = await events.page(owner, undefined, 2);
    assert.deepEqual(
      newest.events.map((e) => [e.id, e.type]),
      [
        ['2', 'topup.paid'],
        ['3', 'credits.low'],
      ],
    );
    assert.equal(newest.nextAfter, '3');
    const after = await events.page(owner, '1', 10);
    assert.deepEqual(
      after.events.map((e) => e.id),
      ['2', '3'],
    );
    assert.deepEqual(await events.page(owner, '3', 10), { events: [], nextAfter: '3' });
  });
});
