import { randomUUID } from 'node:crypto';
import { AUTH_HINT } from '../../vocabulary/access-hints.js';
import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import { AppError } from '../../errors/app-error.js';
import { isOperator, type Principal } from './principal.js';
import type { AccountsRepository, LockedAccount } from '../accounts/accounts.repository.js';
import { ApiKey, type KeyKind, type Scope } from './api-key.entity.js';
import { keyLimitsOf, type KeyLimitsInput } from './key-limits.js';
import { hashesEqual, mintApiKey, parseApiKey } from './tokens.js';

/** A key to create: who holds it and what it may do; its limits as given, a longest rental or idle minutes left out as none. */
export interface NewKey extends KeyLimitsInput {
  accountId: string;
  kind: KeyKind;
  name: string;
  scopes: Scope[];
  origin: string;
  isAdmin?: boolean;
  /** The OWNER key issuing it (see ApiKey.issuedByKeyId); revoking that key revokes this one. */
  issuedByKeyId?: string | null;
}

export type { LockedAccount };

export interface KeyUsage {
  /** Rental debits and usage minus reversals, in cents, over the key's life. */
  netSpentMinor: number;
  remainingBudgetMinor: number;
  activeDeployments: number;
}

function usageOf(key: ApiKey, netSpentMinor: number, activeDeployments: number): KeyUsage {
  return { netSpentMinor, remainingBudgetMinor: key.budgetLimitMinor - netSpentMinor, activeDeployments };
}

/**
 * The uniform 401: same code and message whatever the cause, so callers learn nothing about the
 * key; the message says how to send one and how to get one, which holds for every cause.
 */
export function unauthenticated(): AppError {
  return new AppError('UNAUTHENTICATED', `Missing, invalid or revoked API key. ${AUTH_HINT}`);
}

const LAST_USED_GRANULARITY_MS = 60_000;

/** How long, and for how many keys, a key read by {@link KeysService.authenticate} may be reused. */
const RECENT_KEY_TTL_MS = 60_000;
const RECENT_KEYS_MAX = 10_000;

export interface AuthenticateOptions {
  /**
   * The caller reads the key's `revoked_at` again in its own transaction before it acts (as
   * admission does, in the same statement that locks the account), so a key this process read
   * in the last minute may stand in for a fresh read. Scopes and limits are never changed after
   * a key is made; revocation is the one thing that can, and that read sees it in every process.
   */
  revocationCheckedInTransaction?: boolean;
}

export class KeysService {
  /** Keys read in the last RECENT_KEY_TTL_MS, by prefix, oldest first (see AuthenticateOptions). */
  private readonly recent = new Map<string, { key: ApiKey; readAt: number }>();

  constructor(
    private readonly store: Store<{ accounts: AccountsRepository }>,
    private readonly clock: Clock,
  ) {}

  /**
   * Creates a key in the caller's transaction (`accounts` is its repository) and returns the raw
   * token, which exists only in this return value.
   */
  async create(accounts: AccountsRepository, input: NewKey): Promise<{ key: ApiKey; token: string }> {
    const minted = mintApiKey();
    const key = Object.assign(new ApiKey(), {
      id: randomUUID(),
      accountId: input.accountId,
      kind: input.kind,
      name: input.name,
      prefix: minted.prefix,
      secretHash: minted.secretHash,
      scopes: input.scopes,
      ...keyLimitsOf(input),
      isAdmin: input.isAdmin ?? false,
      origin: input.origin,
      issuedByKeyId: input.issuedByKeyId ?? null,
      createdAt: this.clock.now(),
      revokedAt: null,
      lastUsedAt: null,
    });
    await accounts.keys.insert(key);
    return { key, token: minted.token };
  }

  /**
   * The AGENT key `keyId` as its principal, read afresh, while it acts (not revoked); null
   * otherwise. What an OAuth access token and a remote MCP call resolve to, on every request, so
   * a revoked key stops its tokens at once.
   */
  async agentPrincipal(keyId: string): Promise<Principal | null> {
    let key: ApiKey;
    try {
      key = await this.store.read((r) => r.accounts.keys.get(keyId));
    } catch {
      return null;
    }
    return key.kind === 'AGENT' && !key.revokedAt ? principalOf(key) : null;
  }

  /** {@link agentPrincipal}, or the uniform 401 UNAUTHENTICATED when the key no longer acts. */
  async authenticateAgent(keyId: string): Promise<Principal> {
    const principal = await this.agentPrincipal(keyId);
    if (!principal) throw unauthenticated();
    return principal;
  }

  /** Whether `principal` is an operator's key ({@link isOperator}): for the layers that may not import the rule. */
  isOperator(principal: Parameters<typeof isOperator>[0]): boolean {
    return isOperator(principal);
  }

  async authenticate(header: string | undefined, options: AuthenticateOptions = {}): Promise<Principal> {
    // RFC 7235: the scheme name is case-insensitive (`bearer`, `BEARER`).
    const m = header ? /^Bearer +([^\s]+)$/i.exec(header.trim()) : null;
    const parsed = m ? parseApiKey(m[1]) : null;
    if (!parsed) throw unauthenticated();
    const now = this.clock.now();
    if (options.revocationCheckedInTransaction) {
      const hit = this.recent.get(parsed.prefix);
      if (hit && now.getTime() - hit.readAt < RECENT_KEY_TTL_MS && hashesEqual(hit.key.secretHash, parsed.secretHash))
        return principalOf(hit.key);
    }
    // Otherwise the key is read afresh (one indexed statement), so a revoked key is refused on
    // its very next request in every process.
    const key = await this.store.read((r) => r.accounts.keys.byPrefix(parsed.prefix));
    if (!key || !hashesEqual(key.secretHash, parsed.secretHash) || key.revokedAt) {
      this.recent.delete(parsed.prefix);
      throw unauthenticated();
    }
    this.remember(key, now.getTime());
    if (!key.lastUsedAt || now.getTime() - key.lastUsedAt.getTime() > LAST_USED_GRANULARITY_MS) {
      // Best effort and coarse, so authentication does not become a write on every request.
      await this.store.read((r) => r.accounts.keys.touch(key.id, now));
    }
    return principalOf(key);
  }

  private remember(key: ApiKey, readAt: number): void {
    this.recent.delete(key.prefix);
    this.recent.set(key.prefix, { key, readAt });
    // Map order is insertion order: the first entry is the one read longest ago.
    if (this.recent.size > RECENT_KEYS_MAX) this.recent.delete(this.recent.keys().next().value!);
  }

  /**
   * Drops keys this process may hold (see AuthenticateOptions); the next request reads them
   * afresh. Other processes need no word: every path re-reads `revoked_at` before it acts.
   */
  forget(...keyIds: string[]): void {
    const ids = new Set(keyIds);
    for (const [prefix, e] of this.recent) if (ids.has(e.key.id)) this.recent.delete(prefix);
  }

  /**
   * Each key's spend and slots from its counters (migrations/1763800009000-KeyCounters.ts), kept
   * in step by LedgerService and rental-state: one indexed read whatever the ledger's size, as last
   * committed. A decision that needs them to hold reads them under the account lock instead
   * ({@link lockAccountWithUsage}).
   */
  async usage(keys: ApiKey[]): Promise<Map<string, KeyUsage>> {
    const out = new Map<string, KeyUsage>();
    if (keys.length === 0) return out;
    const ids = keys.map((k) => k.id);
    const byId = await this.store.read((r) => r.accounts.keys.counters(ids));
    for (const k of keys) {
      const r = byId.get(k.id);
      out.set(k.id, usageOf(k, r?.netSpentMinor ?? 0, r?.activeDeployments ?? 0));
    }
    return out;
  }

  /**
   * Locks the key's account row (where every money decision about an account starts) and reads
   * the key's counters in the same statement: admission's and card checkout's first read. Under
   * that lock the counters cannot grow until the caller commits. STRAIGHT_JOIN takes the locks
   * account first, then key, the order every ledger posting takes them in. `accounts` is the
   * caller's transaction's; its statements are issued before this awaits anything, so in a
   * pipelined transaction they travel with whatever the caller issues in the same tick.
   */
  async lockAccountWithUsage(
    accounts: AccountsRepository,
    key: ApiKey,
  ): Promise<{ account: LockedAccount; usage: KeyUsage }> {
    const r = await accounts.lockAccountWithKey(key.accountId, key.id);
    if (!r) throw new AppError('NOT_FOUND', 'Account not found.');
    // The revocation check of a request authenticated with a recently read key (AuthenticateOptions).
    if (r.revokedAt !== null) {
      this.forget(key.id);
      throw unauthenticated();
    }
    return { account: r.account, usage: usageOf(key, r.netSpentMinor, r.activeDeployments) };
  }

  /**
   * Locks the account row, then the row of the key acting on it (the order admission and every
   * ledger posting take them in), and refuses a key revoked since the request was authenticated
   * with the uniform 401. Whatever the key issues or approves in the caller's transaction is then
   * seen by a concurrent revocation of it, which waits for that transaction to end. `accounts` is
   * the caller's transaction's.
   */
  async lockActingKey(accounts: AccountsRepository, accountId: string, keyId: string): Promise<void> {
    const row = await accounts.lockAccountAndKey(accountId, keyId);
    if (row && row.revokedAt === null) return;
    this.forget(keyId);
    throw unauthenticated();
  }

  async revoke(accountId: string, keyId: string): Promise<void> {
    this.forget(keyId);
    const at = this.clock.now();
    if (!(await this.store.read((r) => r.accounts.keys.revoke(accountId, keyId, at))))
      throw new AppError('NOT_FOUND', 'No such key on this account.');
  }
}

function principalOf(key: ApiKey): Principal {
  return { keyId: key.id, accountId: key.accountId, kind: key.kind, scopes: key.scopes, key };
}
