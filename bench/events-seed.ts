/*
 * The accounts of bench/events.ts and the events it commits: K accounts signed up through the API
 * (support.ts's makeClients: one funded agent key each), a rental or two each admitted through the
 * API, and events written as the service writes them (the events repository's append, in one
 * pipelined transaction) for any of those keys' rentals.
 */
import { randomUUID } from 'node:crypto';
import type { NewEvent } from '../src/modules/events/events.repository.js';
import type { LoadKey } from './events-types.js';
import { makeClients, type BenchApp } from './support.js';

/** One bench key and the rental its events and waiting reads concern. */
export interface SeededKey extends LoadKey {
  keyId: string;
  /** The rental as the API answered its admission: the body of the events written for it. */
  rental: Record<string, unknown>;
}

/** Requests of the seeding in flight at once. */
const SEEDING = 32;

async function inParallel<T>(items: T[], each: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      await each(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: SEEDING }, worker));
}

/** `count` keys with a rental each (every other key a second one), through the in-process app. */
export async function seedKeys(app: BenchApp, count: number): Promise<SeededKey[]> {
  const clients = [];
  for (let from = 0; from < count; from += 100)
    clients.push(...(await makeClients(app, Math.min(100, count - from), 'ACCOUNT_BALANCE')));
  const keys: SeededKey[] = new Array(clients.length);
  await inParallel(clients, async (c, i) => {
    for (let n = 0; n < 1 + (i % 2); n++) {
      const res = await fetch(`${app.base}/api/v1/rentals`, {
        method: 'POST',
        headers: { Authorization: c.auth, 'Content-Type': 'application/json', 'Idempotency-Key': randomUUID() },
        body: JSON.stringify({ offerId: app.offer.id }),
      });
      const text = await res.text();
      if (res.status !== 201) throw new Error(`a seeding admission answered ${res.status}: ${text}`);
      const rental = (JSON.parse(text) as { data: Record<string, unknown> & { rentalId: string } }).data;
      keys[i] ??= { auth: c.auth, accountId: c.accountId, keyId: c.keyId, rentalId: rental.rentalId, rental };
    }
  });
  return keys;
}

/**
 * An event of `key`'s rental as the service would write it: `rental.active` with the rental's
 * body, a status the bench's waiting reads do not wait for (so it wakes them without a read).
 */
function eventOf(key: SeededKey): NewEvent {
  return {
    type: 'rental.active',
    accountId: key.accountId,
    keyId: key.keyId,
    rentalId: key.rentalId,
    data: { ...key.rental, status: 'ACTIVE' },
    at: new Date(),
  };
}

/** Writes the events of one commit and tells, after it, what each account numbered its event. */
export class EventWriter {
  private lastId = '0';

  constructor(private readonly app: BenchApp) {}

  /** Starts after the newest event already written (the seeding's own). */
  async begin(): Promise<void> {
    this.lastId = await this.app.services.store.read((r) => r.events.latestId());
  }

  /**
   * Commits one event for each of `keys` in one transaction; answers when the commit returned
   * (performance.timeOrigin + performance.now()) and each account's number of its event.
   */
  async commit(keys: SeededKey[]): Promise<{ commitAt: number; seqs: Record<string, string> }> {
    await this.app.services.store.pipelined(async (r) => {
      await Promise.all(keys.map((k) => r.events.append(eventOf(k))));
    });
    const commitAt = performance.timeOrigin + performance.now();
    const rows = (await this.app.services.ds.query('SELECT id, account_id, seq FROM events WHERE id > ? ORDER BY id', [
      this.lastId,
    ])) as { id: string | number; account_id: string; seq: string | number }[];
    if (rows.length !== keys.length) throw new Error(`${rows.length} events appeared for a commit of ${keys.length}`);
    this.lastId = String(rows[rows.length - 1].id);
    return { commitAt, seqs: Object.fromEntries(rows.map((r) => [r.account_id, String(r.seq)])) };
  }
}
