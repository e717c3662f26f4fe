import type { Executor } from '../../db/mysql-store.js';
import type { SealedColumnStatements } from '../../db/sealed-column.js';
import type { EventType } from '../events/event-types.js';
import { MysqlKeysRepository, type KeysRepository } from '../keys/keys.repository.js';
import { visibleRows, type Viewer } from '../keys/visibility.js';

// The only code that reads or writes `webhook_endpoints` on MySQL (its deliveries read their
// endpoint with the same rule: webhook-deliveries.repository.ts).

/**
 * @internal The endpoints' sealed signing secrets (`secret_sealed`, key id `secret_key_id`), as
 * re-sealing walks them (WebhooksRepository.sealed), deleted endpoints' too.
 */
export const SIGNING_SECRETS: SealedColumnStatements = {
  select:
    'SELECT id, secret_sealed AS sealed, secret_key_id AS keyId FROM webhook_endpoints WHERE secret_key_id <> ? AND id > ? ORDER BY id LIMIT ?',
  update:
    'UPDATE webhook_endpoints SET secret_sealed = ?, secret_key_id = ? WHERE id = ? AND secret_key_id = ? AND secret_sealed = ?',
  count: 'SELECT secret_key_id AS keyId, COUNT(*) AS n FROM webhook_endpoints GROUP BY secret_key_id',
};

/** An endpoint as stored: where to send, what, and its sealed signing secret. */
export interface StoredEndpoint {
  id: string;
  accountId: string;
  /** The agent key it belongs to (it receives what that key may see); null: the account's. */
  keyId: string | null;
  /**
   * The key that made it (an agent key's endpoint: that key); it stops when that key is revoked.
   * Null only for an owner key's endpoint made before makers were recorded that no record names.
   */
  makerKeyId: string | null;
  url: string;
  eventTypes: EventType[];
  secretSealed: Buffer;
  secretKeyId: string;
  /** It receives only events after this one (the newest when it was made): a log-wide id, as a decimal string. */
  afterEventId: string;
  createdAt: Date;
}

/** An endpoint as its listing shows it: stopped when the key that made it was revoked. */
export interface ListedEndpoint extends StoredEndpoint {
  makerRevoked: boolean;
}

/** @internal A `webhook_endpoints` row as the driver answers it. */
export interface EndpointRow {
  id: string;
  account_id: string;
  key_id: string | null;
  maker_key_id: string | null;
  url: string;
  event_types: string;
  secret_sealed: Buffer;
  secret_key_id: string;
  after_event_id: string | number;
  created_at: Date;
  deleted_at: Date | null;
}

/** @internal */
export const toEndpoint = (r: EndpointRow): StoredEndpoint => ({
  id: r.id,
  accountId: r.account_id,
  keyId: r.key_id,
  makerKeyId: r.maker_key_id,
  url: r.url,
  eventTypes: r.event_types.split(',').filter(Boolean) as EventType[],
  secretSealed: r.secret_sealed,
  secretKeyId: r.secret_key_id,
  afterEventId: String(r.after_event_id),
  createdAt: r.created_at,
});

/*
 * The one rule of an endpoint's life: it receives events while it is not deleted and the key that
 * made it is not revoked (an agent key's endpoint: that key; a row without a maker: the key it
 * belongs to, if any; a maker no key row holds: not revoked). Keys are the accounts aggregate's:
 * their revocation is read there, once for all the endpoints a read answers, never per endpoint.
 */

/** The key whose revocation stops the endpoint, or null when none does. */
const makerOf = (e: Pick<StoredEndpoint, 'makerKeyId' | 'keyId'>): string | null => e.makerKeyId ?? e.keyId;

/**
 * @internal The makers of `endpoints` that are revoked: one read of the keys (none when no
 * endpoint has a maker).
 */
export async function revokedMakers(keys: KeysRepository, endpoints: readonly StoredEndpoint[]): Promise<Set<string>> {
  const makers = [...new Set(endpoints.map(makerOf).filter((id): id is string => id !== null))];
  return new Set(await keys.revokedAmong(makers));
}

/** @internal Whether `e`'s maker is among the `revoked`. */
export const makerRevoked = (e: StoredEndpoint, revoked: ReadonlySet<string>): boolean => {
  const maker = makerOf(e);
  return maker !== null && revoked.has(maker);
};

/** Live endpoints as their listings show them: stopped ones marked. */
async function listed(keys: KeysRepository, rows: readonly EndpointRow[]): Promise<ListedEndpoint[]> {
  const endpoints = rows.map(toEndpoint);
  const revoked = await revokedMakers(keys, endpoints);
  return endpoints.map((e) => ({ ...e, makerRevoked: makerRevoked(e, revoked) }));
}

/**
 * The endpoints of the webhooks aggregate. An endpoint row is never removed: deleting marks it,
 * and its deliveries keep naming it.
 */
export interface WebhookEndpointsRepository {
  /** Stores a new endpoint (its id is new). */
  insert(e: StoredEndpoint): Promise<void>;
  /**
   * How many live endpoints `makerKeyId` has made, locking them (and the gap after them) until the
   * transaction ends: run it in the transaction that inserts, so two creates of one key cannot
   * both pass its limit.
   */
  lockMadeBy(makerKeyId: string): Promise<number>;
  /** The viewer's live endpoints, newest first (then by id): an agent key's own, every one of the account for its holder. */
  visible(viewer: Viewer): Promise<ListedEndpoint[]>;
  /** One live endpoint the viewer may see, or null. */
  visibleOne(viewer: Viewer, id: string): Promise<ListedEndpoint | null>;
  /** Marks a live endpoint deleted at `at` (a deleted one keeps its first time): nothing more is sent to it. */
  markDeleted(id: string, at: Date): Promise<void>;
  /**
   * The endpoints of these accounts that receive events now, in no set order (by the account
   * index: the dispatcher reads only the endpoints of the accounts whose events it fans out).
   */
  receiving(accountIds: readonly string[]): Promise<StoredEndpoint[]>;
  /** The smallest `afterEventId` of the live endpoints, or null when there is none: where a dispatcher without a cursor starts. */
  earliestStart(): Promise<string | null>;
}

export class MysqlWebhookEndpointsRepository implements WebhookEndpointsRepository {
  private keyRows?: KeysRepository;

  constructor(private readonly sql: Executor) {}

  /** The accounts aggregate's keys, on this executor: whose revocation stops an endpoint. */
  private get keys(): KeysRepository {
    return (this.keyRows ??= new MysqlKeysRepository(this.sql));
  }

  async insert(e: StoredEndpoint): Promise<void> {
    await this.sql.query(
      `INSERT INTO webhook_endpoints (id, account_id, key_id, maker_key_id, url, event_types, secret_sealed, secret_key_id, after_event_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [
        e.id,
        e.accountId,
        e.keyId,
        e.makerKeyId,
        e.url,
        e.eventTypes.join(','),
        e.secretSealed,
        e.secretKeyId,
        e.afterEventId,
        e.createdAt,
      ],
    );
  }

  async lockMadeBy(makerKeyId: string): Promise<number> {
    const rows = (await this.sql.query(
      `SELECT id FROM webhook_endpoints WHERE maker_key_id = ? AND deleted_at IS NULL FOR UPDATE`,
      [makerKeyId],
    )) as { id: string }[];
    return rows.length;
  }

  async visible(viewer: Viewer): Promise<ListedEndpoint[]> {
    const { accountId, keyId } = visibleRows(viewer);
    const rows: EndpointRow[] =
      keyId === undefined
        ? await this.sql.query(
            `SELECT e.* FROM webhook_endpoints e WHERE e.account_id = ? AND e.deleted_at IS NULL ORDER BY e.created_at DESC, e.id`,
            [accountId],
          )
        : await this.sql.query(
            `SELECT e.* FROM webhook_endpoints e WHERE e.account_id = ? AND e.key_id = ? AND e.deleted_at IS NULL ORDER BY e.created_at DESC, e.id`,
            [accountId, keyId],
          );
    return listed(this.keys, rows);
  }

  async visibleOne(viewer: Viewer, id: string): Promise<ListedEndpoint | null> {
    const { accountId, keyId } = visibleRows(viewer);
    const rows: EndpointRow[] =
      keyId === undefined
        ? await this.sql.query(
            `SELECT e.* FROM webhook_endpoints e WHERE e.id = ? AND e.account_id = ? AND e.deleted_at IS NULL`,
            [id, accountId],
          )
        : await this.sql.query(
            `SELECT e.* FROM webhook_endpoints e WHERE e.id = ? AND e.account_id = ? AND e.key_id = ? AND e.deleted_at IS NULL`,
            [id, accountId, keyId],
          );
    return rows[0] ? (await listed(this.keys, rows.slice(0, 1)))[0] : null;
  }

  async markDeleted(id: string, at: Date): Promise<void> {
    await this.sql.query(`UPDATE webhook_endpoints SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL`, [at, id]);
  }

  async receiving(accountIds: readonly string[]): Promise<StoredEndpoint[]> {
    if (accountIds.length === 0) return [];
    const live = (
      (await this.sql.query(`SELECT e.* FROM webhook_endpoints e WHERE e.account_id IN (?) AND e.deleted_at IS NULL`, [
        accountIds,
      ])) as EndpointRow[]
    ).map(toEndpoint);
    const revoked = await revokedMakers(this.keys, live);
    return live.filter((e) => !makerRevoked(e, revoked));
  }

  async earliestStart(): Promise<string | null> {
    const [row] = (await this.sql.query(
      `SELECT MIN(after_event_id) AS id FROM webhook_endpoints WHERE deleted_at IS NULL`,
    )) as {
      id: string | number | null;
    }[];
    return row?.id === null || row?.id === undefined ? null : String(row.id);
  }
}
