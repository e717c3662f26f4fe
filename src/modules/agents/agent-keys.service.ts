import { revokedKeyRentalsNote } from '../../vocabulary/rental-hints.js';
import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import { AppError } from '../../errors/app-error.js';
import type { Principal } from '../keys/principal.js';
import type { AccountsRepository } from '../accounts/accounts.repository.js';
import { assertNotFrozen as refuseIfFrozen } from '../accounts/billing-eligibility.js';
import { toKeyDto } from '../accounts/accounts.service.js';
import type { KeyDto } from '../accounts/accounts.dto.js';
import { claimOrReplay, idempotentRequest, requireIdempotencyKey } from '../idempotency/idempotency.js';
import type { IdempotencyRepository } from '../idempotency/idempotency.repository.js';
import { keyLimitsOf, limitsBeyond, type KeyLimits } from '../keys/key-limits.js';
import { keyName } from '../keys/key-name.js';
import type { KeysService } from '../keys/keys.service.js';
import type { RentalsService } from '../rentals/admission/rental-requests.service.js';
import type { AgentKeyIssued, IssueAgentKeyRequest, KeyRental, RevokedKey, RevokedOwnerKey } from './agents.dto.js';
import type { KeyRentalRow } from '../rentals/store/rental-reads.repository.js';

/** How a revocation treats the revoked keys' unfinished rentals. */
export interface RevokeOptions {
  /** Terminate them with the key, through the normal termination path; otherwise they keep running. */
  terminateRentals?: boolean;
}

/**
 * The unfinished rentals of the keys given, oldest first: the rentals aggregate's read, given by
 * the composition root until that aggregate is on the store.
 */
export type UnfinishedRentalsOfKeys = (accountId: string, keyIds: readonly string[]) => Promise<KeyRentalRow[]>;

/**
 * The agent keys an owner holds directly: issuing them from an OWNER key, listing agent and owner
 * keys, and revoking either, an owner key together with everything it let in. Revocations answer
 * with the revoked keys' unfinished rentals and terminate them on request.
 */
export class AgentKeysService {
  constructor(
    private readonly store: Store<{ accounts: AccountsRepository; idempotency: IdempotencyRepository }>,
    private readonly clock: Clock,
    private readonly keys: KeysService,
    private readonly unfinishedRentals: UnfinishedRentalsOfKeys,
    /** Terminates revoked keys' rentals on request; a process built without it cannot. */
    private readonly rentals?: Pick<RentalsService, 'terminate'>,
  ) {}

  /**
   * An OWNER key issues an agent key directly. Idempotent per account and key: an identical replay
   * answers the same key with `token: null` (the secret is never shown twice).
   */
  async issueAgentKey(
    principal: Principal,
    idempotencyKeyHeader: string | undefined,
    body: IssueAgentKeyRequest,
  ): Promise<{ issued: AgentKeyIssued; created: boolean }> {
    this.assertOwner(principal, 'issue agent keys');
    const idemKey = requireIdempotencyKey(idempotencyKeyHeader);
    const scopes = [...new Set(body.scopes)];
    const beyond = scopes.filter((s) => !principal.scopes.includes(s));
    if (beyond.length)
      throw new AppError(
        'FORBIDDEN',
        `An agent key's scopes must be a subset of yours; this key lacks: ${beyond.join(', ')}.`,
      );
    const limits = keyLimitsOf(body);
    assertWithinOwnLimits(principal, limits);
    // No limit sent as null or left out is one request: both replay the same key.
    const input = {
      ...body,
      name: keyName(body.name),
      scopes: [...scopes].sort(),
      maxRentalSeconds: limits.maxRentalSeconds ?? undefined,
      idleTerminateMinutes: limits.idleTerminateMinutes ?? undefined,
    };
    const request = idempotentRequest(`agent-keys:${principal.accountId}`, idemKey, input);
    // Checked before the transaction: a plain read inside it would fix the snapshot ahead of the
    // idempotency claim, hiding a concurrent twin's committed key from the replay path.
    await this.store.read((r) => assertNotFrozen(r.accounts, principal.accountId));
    const result = await this.store.transaction(async (r) => {
      // As in approval: a concurrent revocation of the issuing key sees this key or refuses it.
      await this.keys.lockActingKey(r.accounts, principal.accountId, principal.keyId);
      return claimOrReplay<{ keyId: string; token: string | null }>(r.idempotency, this.clock, request, {
        replay: (keyId) => ({ keyId, token: null }),
        create: async () => {
          const { key, token } = await this.keys.create(r.accounts, {
            accountId: principal.accountId,
            kind: 'AGENT',
            name: input.name,
            scopes: input.scopes,
            origin: 'owner-issued',
            issuedByKeyId: principal.keyId,
            ...limits,
          });
          return { resourceId: key.id, result: { keyId: key.id, token } };
        },
      });
    });
    return {
      issued: { key: await this.describeKey(result.keyId), token: result.token },
      created: result.token !== null,
    };
  }

  /** The account's agent keys, newest first, with limits and usage; never secrets. */
  async listAgentKeys(accountId: string): Promise<KeyDto[]> {
    const keys = await this.store.read((r) => r.accounts.keys.ofAccount(accountId, 'AGENT'));
    const usage = await this.keys.usage(keys);
    return keys.map((k) => toKeyDto(k, usage.get(k.id)!));
  }

  async listAgentKeysFor(principal: Principal): Promise<KeyDto[]> {
    this.assertOwner(principal, 'list agent keys');
    return this.listAgentKeys(principal.accountId);
  }

  /**
   * Revokes an agent key of the account at once; revoking twice is fine. Owner keys are not agent
   * keys (404). Answers with the key's unfinished rentals, terminated with it on request.
   */
  async revokeAgentKey(accountId: string, keyId: string, opts: RevokeOptions = {}): Promise<RevokedKey> {
    const key = await this.store.read((r) => r.accounts.keys.agentKeyOfAccount(accountId, keyId));
    if (!key) throw new AppError('NOT_FOUND', 'No agent key with this id on this account.');
    await this.keys.revoke(accountId, key.id);
    const after = await this.store.read((r) => r.accounts.keys.get(key.id));
    return {
      id: key.id,
      revokedAt: after.revokedAt!.toISOString(),
      ...(await this.rentalsOfRevoked(accountId, [key.id], opts)),
    };
  }

  async revokeAgentKeyFor(principal: Principal, keyId: string, opts: RevokeOptions = {}): Promise<RevokedKey> {
    this.assertOwner(principal, 'revoke agent keys');
    return this.revokeAgentKey(principal.accountId, keyId, opts);
  }

  /**
   * The unfinished rentals of keys revoked a moment ago, terminated first when asked. Read after
   * the revocation committed: a rental admitted under the key locks its row and re-checks
   * `revoked_at`, so none can start after this list is read.
   */
  private async rentalsOfRevoked(
    accountId: string,
    keyIds: string[],
    opts: RevokeOptions,
  ): Promise<Pick<RevokedKey, 'liveRentals' | 'rentalsTerminated' | 'rentalsNote'>> {
    const rows = await this.unfinishedRentals(accountId, keyIds);
    const terminate = opts.terminateRentals === true;
    if (terminate && rows.length && !this.rentals)
      throw new Error('AgentKeysService was built without the rentals service, so it cannot terminate rentals');
    const liveRentals: KeyRental[] = [];
    for (const r of rows) {
      // The owner's own termination path: the revoked key can no longer act, its owner can.
      const status = terminate
        ? (await this.rentals!.terminate({ kind: 'OWNER', accountId }, r.deploymentId)).status
        : r.status;
      liveRentals.push({ rentalId: r.orderId, deploymentId: r.deploymentId, keyId: r.keyId, status });
    }
    return {
      liveRentals,
      rentalsTerminated: terminate && liveRentals.length > 0,
      rentalsNote: revokedKeyRentalsNote(liveRentals.length, terminate),
    };
  }

  /** The account's OWNER keys, newest first, revoked ones included; never secrets. */
  async listOwnerKeys(accountId: string): Promise<KeyDto[]> {
    const keys = await this.store.read((r) => r.accounts.keys.ofAccount(accountId, 'OWNER'));
    const usage = await this.keys.usage(keys);
    return keys.map((k) => toKeyDto(k, usage.get(k.id)!));
  }

  async listOwnerKeysFor(principal: Principal): Promise<KeyDto[]> {
    this.assertOwner(principal, 'list owner keys');
    return this.listOwnerKeys(principal.accountId);
  }

  /**
   * Revokes an OWNER key of the account and, in the same transaction, everything it let in: the
   * agent keys it issued, the keys exchanged for authorization sessions it approved, and the
   * sessions it approved that were not exchanged yet (REVOKED: their setup codes stop working).
   * Every request re-reads `revoked_at` before it acts, so all of them are refused at once in
   * every process. Rentals already running keep running. Repeatable: a revoked key keeps its
   * revocation time, and anything it let in since is revoked again.
   */
  async revokeOwnerKey(accountId: string, id: string, opts: RevokeOptions = {}): Promise<RevokedOwnerKey> {
    const out = await this.store.transaction(async ({ accounts }) => {
      // Account row first, then keys, then sessions: the order issuing and approving take them in
      // (KeysService.lockActingKey), so each waits for the other instead of missing it.
      const key = await accounts.lockAccountAndKeyKind(accountId, id);
      if (!key || key.kind !== 'OWNER') throw new AppError('NOT_FOUND', 'No owner key with this id on this account.');
      const now = this.clock.now();
      const revokedAt = key.revokedAt ?? now;
      if (!key.revokedAt) await accounts.keys.markRevoked(id, now);
      const sessions = await accounts.authorizations.lockUnexchangedApprovalsOf(id);
      await accounts.authorizations.markRevoked(sessions);
      const issued = await accounts.keys.lockLiveIssuedBy(id);
      await accounts.keys.markManyRevoked(issued, now);
      // Every key it let in, revoked now or by an earlier call: a repeat still lists (and may end) their rentals.
      const letIn = await accounts.keys.issuedBy(id);
      return {
        id,
        revokedAt: revokedAt.toISOString(),
        revokedAgentKeyIds: issued,
        revokedAuthorizationIds: sessions,
        keyIds: [id, ...letIn],
      };
    });
    const { keyIds, ...revoked } = out;
    this.keys.forget(revoked.id, ...revoked.revokedAgentKeyIds);
    return { ...revoked, ...(await this.rentalsOfRevoked(accountId, keyIds, opts)) };
  }

  async revokeOwnerKeyFor(principal: Principal, keyId: string, opts: RevokeOptions = {}): Promise<RevokedOwnerKey> {
    this.assertOwner(principal, 'revoke owner keys');
    return this.revokeOwnerKey(principal.accountId, keyId, opts);
  }

  private assertOwner(principal: Principal, what: string): void {
    if (principal.kind !== 'OWNER') throw new AppError('FORBIDDEN', `Only owner keys may ${what}.`);
  }

  /** A key as the API shows it, with its usage, as last committed. */
  async describeKey(keyId: string): Promise<KeyDto> {
    const key = await this.store.read((r) => r.accounts.keys.get(keyId));
    const usage = await this.keys.usage([key]);
    return toKeyDto(key, usage.get(key.id)!);
  }
}

/**
 * An owner key hands out no more than it holds ({@link limitsBeyond}), or 403 KEY_LIMIT_EXCEEDED
 * (the code for a key's limits; the request is well-formed, so not a 422). Owners in the Telegram
 * bot hold no key and are not bound by one.
 */
export function assertWithinOwnLimits(principal: Principal, limits: KeyLimits): void {
  const own = principal.key;
  const over = limitsBeyond(limits, own).map((f) =>
    f === 'maxRentalSeconds'
      ? `maxRentalSeconds ${limits.maxRentalSeconds ?? 'null (no limit)'} > ${own.maxRentalSeconds}`
      : `${f} ${limits[f]} > ${own[f]}`,
  );
  if (over.length)
    throw new AppError(
      'KEY_LIMIT_EXCEEDED',
      `An agent key's limits may not exceed your key's own: ${over.join(', ')}.`,
    );
}

/** A frozen account may not bring new agents in: 402 ACCOUNT_FROZEN. `accounts` reads without a lock. */
export async function assertNotFrozen(accounts: AccountsRepository, accountId: string): Promise<void> {
  const account = await accounts.find(accountId);
  if (!account) throw new AppError('NOT_FOUND', 'This account no longer exists.');
  refuseIfFrozen(account, 'authorize new agents');
}
