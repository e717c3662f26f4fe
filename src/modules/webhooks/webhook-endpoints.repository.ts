import type { Executor } from '../../db/mysql-store.js';
import type { EventType } from '../events/event-types.js';
import { visibleRows, type Viewer } from '../keys/visibility.js';

// The only code that reads or writes `webhook_endpoints` on MySQL (its deliveries read their
// endpoint with the same rule: webhook-deliveries.repository.ts).

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
 * belongs to, if any). The endpoint table is always `e`, joined to its maker as `mk`.
 */
/** @internal */
export const MAKER_JOIN = 'LEFT JOIN api_keys mk ON mk.id = COALESCE(e.maker_key_id, e.key_id)';
const MAKER_REVOKED = '(mk.revoked_at IS NOT NULL)';
/** @internal */
export const RECEIVING = '(e.deleted_at IS NULL AND mk.revoked_at IS NULL)';

const toListed = (r: EndpointRow & { maker_revoked: number | string }): ListedEndpoint => ({
  ...toEndpoint(r),
  makerRevoked: Number(r.maker_revoked) === 1,
});

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
  constructor(private readonly sql: Executor) {}

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
    const rows: (EndpointRow & { maker_revoked: number })[] =
      keyId === undefined
        ? await this.sql.query(
            `SELECT e.*, ${MAKER_REVOKED} AS maker_revoked FROM webhook_endpoints e ${MAKER_JOIN} WHERE e.account_id = ? AND e.deleted_at IS NULL ORDER BY e.created_at DESC, e.id`,
            [accountId],
          )
        : await this.sql.query(
            `SELECT e.*, ${MAKER_REVOKED} AS maker_revoked FROM webhook_endpoints e ${MAKER_JOIN} WHERE e.account_id = ? AND e.key_id = ? AND e.deleted_at IS NULL ORDER BY e.created_at DESC, e.id`,
            [accountId, keyId],
          );
    return rows.map(toListed);
  }

  async visibleOne(viewer: Viewer, id: string): Promise<ListedEndpoint | null> {
    const { accountId, keyId } = visibleRows(viewer);
    const rows: (EndpointRow & { maker_revoked: number })[] =
      keyId === undefined
        ? await this.sql.query(
            `SELECT e.*, ${MAKER_REVOKED} AS maker_revoked FROM webhook_endpoints e ${MAKER_JOIN} WHERE e.id = ? AND e.account_id = ? AND e.deleted_at IS NULL`,
            [id, accountId],
          )
        : await this.sql.query(
            `SELECT e.*, ${MAKER_REVOKED} AS maker_revoked FROM webhook_endpoints e ${MAKER_JOIN} WHERE e.id = ? AND e.account_id = ? AND e.key_id = ? AND e.deleted_at IS NULL`,
            [id, accountId, keyId],
          );
    return rows[0] ? toListed(rows[0]) : null;
  }

  async markDeleted(id: string, at: Date): Promise<void> {
    await this.sql.query(`UPDATE webhook_endpoints SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL`, [at, id]);
  }

  async receiving(accountIds: readonly string[]): Promise<StoredEndpoint[]> {
    if (accountIds.length === 0) return [];
    const rows: EndpointRow[] = await this.sql.query(
      `SELECT e.* FROM webhook_endpoints e ${MAKER_JOIN} WHERE e.account_id IN (?) AND ${RECEIVING}`,
      [accountIds],
    );
    return rows.map(toEndpoint);
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
