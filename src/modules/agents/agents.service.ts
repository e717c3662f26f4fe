import { randomUUID } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import { revokedKeyRentalsNote } from '../../../clients/sdk/src/hints.js';
import type { Clock } from '../../clock.js';
import { inTransaction } from '../../db/transaction.js';
import { AppError } from '../../errors/app-error.js';
import type { Principal } from '../keys/principal.js';
import type { RateLimiter } from '../../http/rate-limiter.js';
import { Account } from '../accounts/account.entity.js';
import { assertNotFrozen as refuseIfFrozen } from '../accounts/billing-eligibility.js';
import { toKeyDto } from '../accounts/accounts.service.js';
import type { KeyDto } from '../accounts/accounts.dto.js';
import { claimOrReplay, idempotentRequest, requireIdempotencyKey } from '../idempotency/idempotency.js';
import { ApiKey, type Scope } from '../keys/api-key.entity.js';
import { agentName, keyName } from '../keys/key-name.js';
import { APPROVAL_LIMITS, type KeyLimits } from '../keys/key-limits.js';
import type { KeysService } from '../keys/keys.service.js';
import { APPROVAL_CODE_TAG, mintCode, SETUP_CODE_TAG, sha256 } from '../keys/tokens.js';
import { TERMINAL_STATUSES, type RentalStatus } from '../rentals/rental-status.js';
import type { RentalsService } from '../rentals/rentals.service.js';
import { AgentAuthorization } from './agent-authorization.entity.js';
import type {
  AgentKeyIssued,
  AgentLimits,
  ApproveAuthorizationResponse,
  BeginAuthorizationRequest,
  BeginAuthorizationResponse,
  IssueAgentKeyRequest,
  KeyRental,
  RevokedKey,
  RevokedOwnerKey,
} from './agents.dto.js';

/** Setup codes and approval sessions are valid for 10 minutes (docs/api.md, Limits). */
export const AUTHORIZATION_TTL_MS = 10 * 60 * 1000;
/** Agent keys obtained through a setup code never carry `billing`. */
export const SETUP_SCOPES: Scope[] = ['read', 'rent', 'manage'];

/** The owner acting: the account, and the OWNER key it acts with (null through the Telegram bot). */
export interface OwnerRef {
  accountId: string;
  keyId: string | null;
}

export type AuthorizationView = 'PENDING' | 'APPROVED' | 'EXCHANGED' | 'REVOKED' | 'EXPIRED';

export interface AuthorizationDescription {
  authorizationId: string;
  status: AuthorizationView;
  expiresAt: Date;
  approvalUrl: string;
  /** The name the agent gave itself, if any: untrusted text, escape it. */
  requestedName: string | null;
}

export interface AgentsOptions {
  agentV1Enabled: boolean;
  publicBaseUrl: string;
  setupRatePerMinute: number;
}

/** How a revocation treats the revoked keys' unfinished rentals. */
export interface RevokeOptions {
  /** Terminate them with the key, through the normal termination path; otherwise they keep running. */
  terminateRentals?: boolean;
}

/**
 * How agents get keys without ever holding their owner's credential: authorization sessions an
 * owner approves, setup codes an owner mints in Telegram, and keys an owner issues directly.
 * Every code is stored as a SHA-256 hash; each authorization is exchanged for at most one key.
 */
export class AgentsService {
  constructor(
    private readonly ds: DataSource,
    private readonly clock: Clock,
    private readonly keys: KeysService,
    private readonly rateLimiter: RateLimiter,
    private readonly options: AgentsOptions,
    /** Terminates revoked keys' rentals on request; a process built without it cannot. */
    private readonly rentals?: Pick<RentalsService, 'terminate'>,
  ) {}

  /**
   * The AGENT_V1_ENABLED switch covers what mints new agent credentials out of nowhere: signup,
   * authorization sessions, setup codes and their exchange. Owners' own key management stays up.
   */
  private assertEnabled(): void {
    if (!this.options.agentV1Enabled) throw new AppError('AGENTS_DISABLED', 'Agent creation is switched off on this service.');
  }

  private approvalUrl(approvalCode: string): string {
    return `${this.options.publicBaseUrl.replace(/\/+$/, '')}/approve/${approvalCode}`;
  }

  private async limitAddress(kind: string, clientAddress: string): Promise<void> {
    await this.rateLimiter.hit(`agent-setup:${clientAddress}`, this.options.setupRatePerMinute, 60, `agent setup requests from this address (${kind})`);
  }

  /**
   * An agent asks to be authorized: a private setup code for itself and a public approval URL
   * for its owner, both valid for 10 minutes.
   */
  async beginAuthorization(clientAddress = 'internal', request: BeginAuthorizationRequest = {}): Promise<BeginAuthorizationResponse> {
    this.assertEnabled();
    const requestedName = agentName(request.name);
    await this.limitAddress('begin', clientAddress);
    const setup = mintCode(SETUP_CODE_TAG);
    const approval = mintCode(APPROVAL_CODE_TAG);
    const now = this.clock.now();
    const row = this.ds.getRepository(AgentAuthorization).create({
      id: randomUUID(),
      origin: 'SESSION',
      status: 'PENDING',
      setupCodeHash: setup.hash,
      approvalCodeHash: approval.hash,
      accountId: null,
      approvedByKeyId: null,
      name: null,
      requestedName,
      maxPerRentalMinor: null,
      budgetLimitMinor: null,
      maxConcurrentDeployments: null,
      issuedKeyId: null,
      expiresAt: new Date(now.getTime() + AUTHORIZATION_TTL_MS),
      approvedAt: null,
      exchangedAt: null,
      createdAt: now,
    });
    await this.ds.getRepository(AgentAuthorization).insert(row);
    return {
      authorizationId: row.id,
      name: requestedName,
      pollIntervalSeconds: pollIntervalSeconds(this.options.setupRatePerMinute),
      setupCode: setup.code,
      approvalUrl: this.approvalUrl(approval.code),
      expiresAt: row.expiresAt.toISOString(),
    };
  }

  /** What the approval page and the bot show for a public approval code; null when unknown. */
  async describeAuthorization(approvalCode: string): Promise<AuthorizationDescription | null> {
    if (!/^gpa_[A-Za-z0-9_-]{43}$/.test(approvalCode)) return null;
    const row = await this.ds.getRepository(AgentAuthorization).findOneBy({ approvalCodeHash: sha256(approvalCode) });
    if (!row) return null;
    return {
      authorizationId: row.id,
      status: this.view(row),
      expiresAt: row.expiresAt,
      approvalUrl: this.approvalUrl(approvalCode),
      requestedName: row.requestedName,
    };
  }

  private view(row: AgentAuthorization): AuthorizationView {
    if (row.status === 'EXCHANGED' || row.status === 'REVOKED') return row.status;
    return row.expiresAt.getTime() <= this.clock.now().getTime() ? 'EXPIRED' : row.status;
  }

  /** The HTTP approve route: an OWNER key holding read, rent and manage approves for its account. */
  async approveWithKey(principal: Principal, approvalCode: string, limits: AgentLimits): Promise<ApproveAuthorizationResponse> {
    if (principal.kind !== 'OWNER') throw new AppError('FORBIDDEN', 'Only owner keys may approve agent authorizations.');
    const missing = SETUP_SCOPES.filter((s) => !principal.scopes.includes(s));
    if (missing.length) throw new AppError('FORBIDDEN', `Approving needs an owner key with scopes read, rent and manage (missing: ${missing.join(', ')}).`);
    assertWithinOwnLimits(principal, limits);
    return this.approveAuthorization({ accountId: principal.accountId, keyId: principal.keyId }, approvalCode, limits);
  }

  /**
   * Approves a pending session once, binding it to the owner's account and the limits. The session
   * keeps the expiry its agent was told at the start: approval and exchange both happen within
   * those 10 minutes. A second approval, or one after the session expired, is 409
   * AGENT_SETUP_INVALID; an unknown code is 404.
   */
  async approveAuthorization(owner: OwnerRef, approvalCode: string, given: AgentLimits): Promise<ApproveAuthorizationResponse> {
    const limits = checkLimits(given, APPROVAL_LIMITS);
    await assertNotFrozen(this.ds.manager, owner.accountId);
    return inTransaction(this.ds, async (m) => {
      // A revocation of the approving key either committed already (401 here) or waits for this
      // approval and then revokes the session with it.
      if (owner.keyId) await this.keys.lockActingKey(m, owner.accountId, owner.keyId);
      const row = await m
        .getRepository(AgentAuthorization)
        .createQueryBuilder('a')
        .setLock('pessimistic_write')
        .where('a.approval_code_hash = :h', { h: sha256(approvalCode) })
        .getOne();
      if (!row) throw new AppError('NOT_FOUND', 'No agent authorization has this approval code.');
      const now = this.clock.now();
      if (row.status !== 'PENDING') throw new AppError('AGENT_SETUP_INVALID', 'This agent authorization was already approved; a session can be approved once.');
      if (row.expiresAt.getTime() <= now.getTime()) throw new AppError('AGENT_SETUP_INVALID', 'This agent authorization expired; the agent must begin a new one.');
      const patch: Partial<AgentAuthorization> = {
        status: 'APPROVED',
        accountId: owner.accountId,
        approvedByKeyId: owner.keyId,
        name: limits.name ?? row.requestedName ?? 'approved agent',
        maxPerRentalMinor: limits.maxPerRentalMinor,
        budgetLimitMinor: limits.budgetLimitMinor,
        maxConcurrentDeployments: limits.maxConcurrentDeployments,
        approvedAt: now,
      };
      await m.update(AgentAuthorization, { id: row.id }, patch);
      return {
        authorizationId: row.id,
        status: 'APPROVED' as const,
        exchangeBefore: row.expiresAt.toISOString(),
        maxPerRentalMinor: limits.maxPerRentalMinor,
        budgetLimitMinor: limits.budgetLimitMinor,
        maxConcurrentDeployments: limits.maxConcurrentDeployments,
      };
    });
  }

  /** An owner mints a setup code (Telegram): usable once, within 10 minutes, with these limits. */
  async mintSetupCode(owner: OwnerRef, given: AgentLimits): Promise<{ setupCode: string; expiresAt: Date }> {
    this.assertEnabled();
    const limits = checkLimits(given, APPROVAL_LIMITS);
    await assertNotFrozen(this.ds.manager, owner.accountId);
    const setup = mintCode(SETUP_CODE_TAG);
    const now = this.clock.now();
    const expiresAt = new Date(now.getTime() + AUTHORIZATION_TTL_MS);
    await this.ds.getRepository(AgentAuthorization).insert({
      id: randomUUID(),
      origin: 'TELEGRAM',
      status: 'APPROVED',
      setupCodeHash: setup.hash,
      approvalCodeHash: null,
      accountId: owner.accountId,
      approvedByKeyId: owner.keyId,
      name: limits.name ?? 'telegram agent',
      maxPerRentalMinor: limits.maxPerRentalMinor,
      budgetLimitMinor: limits.budgetLimitMinor,
      maxConcurrentDeployments: limits.maxConcurrentDeployments,
      issuedKeyId: null,
      expiresAt,
      approvedAt: now,
      exchangedAt: null,
      createdAt: now,
    });
    return { setupCode: setup.code, expiresAt };
  }

  /**
   * Exchanges a setup code for an AGENT key (read, rent, manage). The row is locked for the
   * decision, so concurrent exchanges of one code issue one key. Pending sessions answer 409
   * AGENT_AUTHORIZATION_PENDING (the agent polls); unknown, expired or used codes 409 AGENT_SETUP_INVALID.
   */
  async exchange(setupCode: string, clientAddress = 'internal'): Promise<AgentKeyIssued> {
    this.assertEnabled();
    await this.limitAddress('exchange', clientAddress);
    const invalid = () => new AppError('AGENT_SETUP_INVALID', 'This setup code is invalid, expired or already used.');
    const { keyId, token } = await inTransaction(this.ds, async (m) => {
      const row = await m
        .getRepository(AgentAuthorization)
        .createQueryBuilder('a')
        .setLock('pessimistic_write')
        .where('a.setup_code_hash = :h', { h: sha256(setupCode) })
        .getOne();
      if (!row || row.status === 'EXCHANGED' || row.status === 'REVOKED') throw invalid();
      const now = this.clock.now();
      if (row.expiresAt.getTime() <= now.getTime()) throw invalid();
      if (row.status === 'PENDING') {
        const wait = pollIntervalSeconds(this.options.setupRatePerMinute);
        throw new AppError(
          'AGENT_AUTHORIZATION_PENDING',
          `Waiting for the owner to approve; poll again in ${wait} s (see Retry-After; the session expires at ${row.expiresAt.toISOString()}).`,
          { 'Retry-After': String(wait) },
        );
      }
      const { key, token } = await this.keys.create(m, {
        accountId: row.accountId!,
        kind: 'AGENT',
        name: row.name ?? 'agent',
        scopes: SETUP_SCOPES,
        origin: row.origin === 'TELEGRAM' ? 'telegram-setup' : 'authorization',
        issuedByKeyId: row.approvedByKeyId,
        maxPerRentalMinor: row.maxPerRentalMinor!,
        budgetLimitMinor: row.budgetLimitMinor!,
        maxConcurrentDeployments: row.maxConcurrentDeployments!,
      });
      await m.update(AgentAuthorization, { id: row.id }, { status: 'EXCHANGED', exchangedAt: now, issuedKeyId: key.id });
      return { keyId: key.id, token };
    });
    return { key: await this.describeKey(keyId), token };
  }

  /**
   * An OWNER key issues an agent key directly. Idempotent per account and key: an identical replay
   * answers the same key with `token: null` (the secret is never shown twice).
   */
  async issueAgentKey(principal: Principal, idempotencyKeyHeader: string | undefined, body: IssueAgentKeyRequest): Promise<{ issued: AgentKeyIssued; created: boolean }> {
    this.assertOwner(principal, 'issue agent keys');
    const idemKey = requireIdempotencyKey(idempotencyKeyHeader);
    const scopes = [...new Set(body.scopes)];
    const beyond = scopes.filter((s) => !principal.scopes.includes(s));
    if (beyond.length) throw new AppError('FORBIDDEN', `An agent key's scopes must be a subset of yours; this key lacks: ${beyond.join(', ')}.`);
    assertWithinOwnLimits(principal, body);
    const input = { ...body, name: keyName(body.name), scopes: [...scopes].sort() };
    const request = idempotentRequest(`agent-keys:${principal.accountId}`, idemKey, input);
    // Checked before the transaction: a plain read inside it would fix the snapshot ahead of the
    // idempotency claim, hiding a concurrent twin's committed key from the replay path.
    await assertNotFrozen(this.ds.manager, principal.accountId);
    const result = await inTransaction(this.ds, async (m) => {
      // As in approval: a concurrent revocation of the issuing key sees this key or refuses it.
      await this.keys.lockActingKey(m, principal.accountId, principal.keyId);
      return claimOrReplay<{ keyId: string; token: string | null }>(m, this.clock, request, {
        replay: (keyId) => ({ keyId, token: null }),
        create: async () => {
          const { key, token } = await this.keys.create(m, {
            accountId: principal.accountId,
            kind: 'AGENT',
            name: input.name,
            scopes: input.scopes,
            origin: 'owner-issued',
            issuedByKeyId: principal.keyId,
            maxPerRentalMinor: body.maxPerRentalMinor,
            budgetLimitMinor: body.budgetLimitMinor,
            maxConcurrentDeployments: body.maxConcurrentDeployments,
          });
          return { resourceId: key.id, result: { keyId: key.id, token } };
        },
      });
    });
    return { issued: { key: await this.describeKey(result.keyId), token: result.token }, created: result.token !== null };
  }

  /** The account's agent keys, newest first, with limits and usage; never secrets. */
  async listAgentKeys(accountId: string): Promise<KeyDto[]> {
    const keys = await this.ds.getRepository(ApiKey).find({ where: { accountId, kind: 'AGENT' }, order: { createdAt: 'DESC' } });
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
    const key = /^[0-9a-f-]{36}$/i.test(keyId) ? await this.ds.getRepository(ApiKey).findOneBy({ id: keyId.toLowerCase(), accountId, kind: 'AGENT' }) : null;
    if (!key) throw new AppError('NOT_FOUND', 'No agent key with this id on this account.');
    await this.keys.revoke(accountId, key.id);
    const after = await this.ds.getRepository(ApiKey).findOneByOrFail({ id: key.id });
    return { id: key.id, revokedAt: after.revokedAt!.toISOString(), ...(await this.rentalsOfRevoked(accountId, [key.id], opts)) };
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
  private async rentalsOfRevoked(accountId: string, keyIds: string[], opts: RevokeOptions): Promise<Pick<RevokedKey, 'liveRentals' | 'rentalsTerminated' | 'rentalsNote'>> {
    const rows: { id: string; order_id: string; key_id: string; status: RentalStatus }[] = await this.ds.query(
      `SELECT id, order_id, key_id, status FROM deployments WHERE account_id = ? AND key_id IN (?) AND status NOT IN (?) ORDER BY created_at, id`,
      [accountId, keyIds, TERMINAL_STATUSES],
    );
    const terminate = opts.terminateRentals === true;
    if (terminate && rows.length && !this.rentals) throw new Error('AgentsService was built without the rentals service, so it cannot terminate rentals');
    const liveRentals: KeyRental[] = [];
    for (const r of rows) {
      // The owner's own termination path: the revoked key can no longer act, its owner can.
      const status = terminate ? (await this.rentals!.terminate({ kind: 'OWNER', accountId }, r.id)).status : r.status;
      liveRentals.push({ rentalId: r.order_id, deploymentId: r.id, keyId: r.key_id, status });
    }
    return { liveRentals, rentalsTerminated: terminate && liveRentals.length > 0, rentalsNote: revokedKeyRentalsNote(liveRentals.length, terminate) };
  }

  /** The account's OWNER keys, newest first, revoked ones included; never secrets. */
  async listOwnerKeys(accountId: string): Promise<KeyDto[]> {
    const keys = await this.ds.getRepository(ApiKey).find({ where: { accountId, kind: 'OWNER' }, order: { createdAt: 'DESC' } });
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
  async revokeOwnerKey(accountId: string, keyId: string, opts: RevokeOptions = {}): Promise<RevokedOwnerKey> {
    const id = /^[0-9a-f-]{36}$/i.test(keyId) ? keyId.toLowerCase() : null;
    const out = await inTransaction(this.ds, async (m) => {
      // Account row first, then keys, then sessions: the order issuing and approving take them in
      // (KeysService.lockActingKey), so each waits for the other instead of missing it.
      const rows: { kind: string; revoked_at: Date | null }[] = id
        ? await m.query(
            `SELECT k.kind, k.revoked_at FROM accounts a STRAIGHT_JOIN api_keys k ON k.id = ? AND k.account_id = a.id WHERE a.id = ? FOR UPDATE`,
            [id, accountId],
          )
        : [];
      if (rows.length !== 1 || rows[0].kind !== 'OWNER') throw new AppError('NOT_FOUND', 'No owner key with this id on this account.');
      const now = this.clock.now();
      const revokedAt = rows[0].revoked_at ?? now;
      if (!rows[0].revoked_at) await m.query(`UPDATE api_keys SET revoked_at = ? WHERE id = ?`, [now, id]);
      const sessions: { id: string }[] = await m.query(
        `SELECT id FROM agent_authorizations WHERE approved_by_key_id = ? AND status = 'APPROVED' FOR UPDATE`,
        [id],
      );
      if (sessions.length) await m.query(`UPDATE agent_authorizations SET status = 'REVOKED' WHERE id IN (?)`, [sessions.map((x) => x.id)]);
      const issued: { id: string }[] = await m.query(`SELECT id FROM api_keys WHERE issued_by_key_id = ? AND revoked_at IS NULL FOR UPDATE`, [id]);
      if (issued.length) await m.query(`UPDATE api_keys SET revoked_at = ? WHERE id IN (?)`, [now, issued.map((x) => x.id)]);
      // Every key it let in, revoked now or by an earlier call: a repeat still lists (and may end) their rentals.
      const letIn: { id: string }[] = await m.query(`SELECT id FROM api_keys WHERE issued_by_key_id = ?`, [id]);
      return {
        id: id!,
        revokedAt: revokedAt.toISOString(),
        revokedAgentKeyIds: issued.map((x) => x.id),
        revokedAuthorizationIds: sessions.map((x) => x.id),
        keyIds: [id!, ...letIn.map((x) => x.id)],
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

  private async describeKey(keyId: string, manager: EntityManager = this.ds.manager): Promise<KeyDto> {
    const key = await manager.getRepository(ApiKey).findOneByOrFail({ id: keyId });
    const usage = await this.keys.usage([key], manager);
    return toKeyDto(key, usage.get(key.id)!);
  }
}

/**
 * Seconds between exchange polls that can never trip the per-address limit of `ratePerMinute`.
 * The limiter counts fixed one-minute windows, and polls `s` seconds apart put at most
 * ceil(60 / s) of them into one window; the session's begin call shares the budget. So
 * ceil(60 / s) + 1 <= rate, which s = ceil(60 / (rate - 1)) satisfies. With a budget of one or two
 * a minute, a poll a minute is the best there is.
 */
export function pollIntervalSeconds(ratePerMinute: number): number {
  return ratePerMinute <= 2 ? 60 : Math.ceil(60 / (ratePerMinute - 1));
}

/**
 * Limits given outside the HTTP schema (Telegram) are checked here with the same minimums; the
 * name, through whatever door it came, by the one rule for key names. Returns them with the name
 * as it will be stored.
 */
function checkLimits(limits: AgentLimits, bounds: { minimums: KeyLimits; maximums: KeyLimits }): AgentLimits {
  const bad: string[] = [];
  for (const f of ['maxPerRentalMinor', 'budgetLimitMinor', 'maxConcurrentDeployments'] as const) {
    const v = limits[f];
    const [min, max] = [bounds.minimums[f], bounds.maximums[f]];
    if (!Number.isSafeInteger(v) || v < min || v > max) bad.push(`${f} must be an integer from ${min} to ${max}`);
  }
  if (bad.length) throw new AppError('VALIDATION_FAILED', `Invalid limits: ${bad.join('; ')}.`);
  return limits.name === undefined ? limits : { ...limits, name: keyName(limits.name) };
}

/**
 * An owner key hands out no more than it holds: each of an agent key's three limits is at most
 * the issuing key's own, or 403 KEY_LIMIT_EXCEEDED (the code for a key's limits; the request is
 * well-formed, so not a 422). Owners in the Telegram bot hold no key and are not bound by one.
 */
function assertWithinOwnLimits(principal: Principal, limits: AgentLimits): void {
  const own = principal.key;
  const over = (['maxPerRentalMinor', 'budgetLimitMinor', 'maxConcurrentDeployments'] as const).filter((f) => limits[f] > own[f]);
  if (over.length) {
    throw new AppError(
      'KEY_LIMIT_EXCEEDED',
      `An agent key's limits may not exceed your key's own: ${over.map((f) => `${f} ${limits[f]} > ${own[f]}`).join(', ')}.`,
    );
  }
}

/** A frozen account may not bring new agents in: 402 ACCOUNT_FROZEN. */
async function assertNotFrozen(m: EntityManager, accountId: string): Promise<void> {
  const account = await m.getRepository(Account).findOneBy({ id: accountId });
  if (!account) throw new AppError('NOT_FOUND', 'This account no longer exists.');
  refuseIfFrozen(account, 'authorize new agents');
}
