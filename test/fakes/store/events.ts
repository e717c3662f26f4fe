import type { StoredPosition, TailPosition } from '../../../src/modules/events/event-cursors.repository.js';
import {
  isNumbered,
  visibleEvent,
  type EventsRepository,
  type NewEvent,
  type NumberedEvent,
  type StoredEvent,
} from '../../../src/modules/events/events.repository.js';
import type { Viewer } from '../../../src/modules/keys/visibility.js';
import type { MemoryTables } from './memory-store.js';

/*
 * The events aggregate in memory: `events` keyed by log-wide id (the rows the ledger's twin writes
 * too, test/fakes/store/ledger.ts), each account numbered from its highest number so far (a rolled
 * back transaction gives its number back, as the locked counter row does), and `event_cursors`
 * keyed by consumer name with the version a move must match.
 */

interface CursorRow {
  lastId: string;
  unseen: string[];
  version: number;
}

const bySeq = (a: NumberedEvent, b: NumberedEvent) => (BigInt(a.seq) < BigInt(b.seq) ? -1 : 1);
const byId = (a: StoredEvent, b: StoredEvent) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1);

/** An event a test writes as a process of an older version did, without its account number (mid-upgrade). */
export function appendUnnumbered(tables: MemoryTables, e: NewEvent): StoredEvent {
  const events = tables.table<StoredEvent>('events');
  const id = events.nextId();
  const row: StoredEvent = { ...stored(e, id), seq: null };
  events.insert(id, row);
  return row;
}

function stored(e: NewEvent, id: string): Omit<StoredEvent, 'seq'> {
  return {
    id,
    type: e.type,
    accountId: e.accountId,
    keyId: e.keyId,
    rentalId: e.rentalId,
    // Stored as the JSON column holds it: what a reader gets back is the parsed text.
    data: JSON.parse(JSON.stringify(e.data ?? null)) as unknown,
    createdAt: e.at,
  };
}

export class MemoryEventsRepository implements EventsRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get events() {
    return this.tables.table<StoredEvent>('events');
  }

  private get cursors() {
    return this.tables.table<CursorRow>('event_cursors');
  }

  async append(e: NewEvent): Promise<void> {
    const top = this.events
      .where((x) => x.accountId === e.accountId && x.seq !== null)
      .reduce((max, x) => (BigInt(x.seq!) > max ? BigInt(x.seq!) : max), 0n);
    const id = this.events.nextId();
    this.events.insert(id, { ...stored(e, id), seq: String(top + 1n) });
  }

  private visible(viewer: Viewer): NumberedEvent[] {
    return this.events
      .where((e) => visibleEvent(viewer, e))
      .filter(isNumbered)
      .sort(bySeq);
  }

  async after(viewer: Viewer, afterSeq: string, limit: number): Promise<NumberedEvent[]> {
    return this.visible(viewer)
      .filter((e) => BigInt(e.seq) > BigInt(afterSeq))
      .slice(0, limit);
  }

  async latest(viewer: Viewer, limit: number): Promise<NumberedEvent[]> {
    return this.visible(viewer).slice(-limit);
  }

  async latestAccountSeq(accountId: string): Promise<string> {
    const seqs = this.events.where((e) => e.accountId === accountId && e.seq !== null).map((e) => BigInt(e.seq!));
    return String(seqs.reduce((max, s) => (s > max ? s : max), 0n));
  }

  async tail(afterId: string, unseen: readonly string[], limit: number): Promise<StoredEvent[]> {
    const missed = new Set(unseen);
    return this.events
      .where((e) => BigInt(e.id) > BigInt(afterId) || missed.has(e.id))
      .sort(byId)
      .slice(0, limit);
  }

  async lastIdBefore(at: Date): Promise<string> {
    const old = this.events.where((e) => e.createdAt.getTime() < at.getTime()).sort(byId);
    return old.length ? old[old.length - 1].id : '0';
  }

  async latestId(): Promise<string> {
    const all = this.events.all().sort(byId);
    return all.length ? all[all.length - 1].id : '0';
  }

  async accountSeqsOf(ids: readonly string[]): Promise<Map<string, string>> {
    const wanted = new Set(ids);
    return new Map(this.events.where((e) => wanted.has(e.id) && e.seq !== null).map((e) => [e.id, e.seq!] as const));
  }

  async byId(id: string): Promise<StoredEvent | null> {
    return this.events.get(id) ?? null;
  }

  async readCursor(name: string): Promise<StoredPosition | null> {
    const row = this.cursors.get(name);
    return row ? { position: { lastId: row.lastId, unseen: row.unseen }, version: String(row.version) } : null;
  }

  async createCursor(name: string, lastId: string): Promise<void> {
    this.cursors.insert(name, { lastId, unseen: [], version: 0 });
  }

  async claimCursor(name: string, version: string, to: TailPosition): Promise<boolean> {
    const row = this.cursors.get(name);
    if (!row || String(row.version) !== version) return false;
    return this.cursors.update(name, { lastId: to.lastId, unseen: [...to.unseen], version: row.version + 1 });
  }
}

/** Every event in memory, in log order. */
export function memoryEventLog(tables: MemoryTables): StoredEvent[] {
  return tables.table<StoredEvent>('events').all().sort(byId);
}
