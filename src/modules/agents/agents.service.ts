import { randomUUID } from 'node:crypto';
import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import { AppError } from '../../errors/app-error.js';
import type { Principal } from '../keys/principal.js';
import type { RateLimiter } from '../../http/rate-limiter.js';
import type { Scope } from '../keys/api-key.entity.js';
import { agentName, keyName } from '../keys/key-name.js';
import { APPROVAL_LIMITS, parseKeyLimits, type KeyLimits, type KeyLimitsInput } from '../keys/key-limits.js';
import type { KeysService } from '../keys/keys.service.js';
import { APPROVAL_CODE_TAG, mintCode, SETUP_CODE_TAG, sha256 } from '../keys/tokens.js';
import type { AccountsRepository } from '../accounts/accounts.repository.js';
import type { AgentAuthorization } from './agent-authorization.entity.js';
import {
  approvedLimits,
  NO_LIMITS_YET,
  type Approval,
  type NewAuthorization,
} from './agent-authorizations.repository.js';
import { assertNotFrozen, assertWithinOwnLimits, type AgentKeysService } from './agent-keys.service.js';
import type {
  AgentKeyIssued,
  ApproveAuthorizationResponse,
  BeginAuthorizationRequest,
  BeginAuthorizationResponse,
} from './agents.dto.js';

/** Setup codes and approval sessions are valid for 10 minutes (docs/api.md, Limits). */
export const AUTHORIZATION_TTL_MS = 10 * 60 * 1000;
/** Agent keys obtained through a setup code never carry `billing`. */
export const SETUP_SCOPES: Scope[] = ['read', 'rent', 'manage'];

/** An agent key's limits and, optionally, its name, as the Telegram bot gives them (checked here). */
export type AgentLimits = KeyLimitsInput & {
  /** Label of the key; a default is chosen when absent. */
  name?: string;
};

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
  /** The OAuth interaction of the remote MCP client that opened the session; null for the API's sessions. */
  clientInteraction: string | null;
}

/** A session a remote MCP client's /authorize opens: its OAuth interaction, and the approval code derived for it. */
export interface OAuthClientSession {
  interactionUid: string;
  approvalCode: string;
}

export interface AgentsOptions {
  agentV1Enabled: boolean;
  publicBaseUrl: string;
  setupRatePerMinute: number;
}

/**
 * How agents get keys without ever holding their owner's credential: authorization sessions an
 * owner approves and setup codes an owner mints in Telegram, each exchanged for at most one key.
 * Every code is stored as a SHA-256 hash. Keys an owner issues directly are AgentKeysService's.
 */
export class AgentsService {
  constructor(
    private readonly store: Store<{ accounts: AccountsRepository }>,
    private readonly clock: Clock,
    private readonly keys: KeysService,
    private readonly rateLimiter: RateLimiter,
    private readonly options: AgentsOptions,
    private readonly agentKeys: AgentKeysService,
  ) {}

  /**
   * The AGENT_V1_ENABLED switch covers what mints new agent credentials out of nowhere: signup,
   * authorization sessions, setup codes and their exchange. Owners' own key management stays up.
   */
  private assertEnabled(): void {
    if (!this.options.agentV1Enabled)
      throw new AppError('AGENTS_DISABLED', 'Agent creation is switched off on this service.');
  }

  private approvalUrl(approvalCode: string): string {
    return `${this.options.publicBaseUrl.replace(/\/+$/, '')}/approve/${approvalCode}`;
  }

  private async limitAddress(kind: string, clientAddress: string): Promise<void> {
    await this.rateLimiter.hit(
      `agent-setup:${clientAddress}`,
      this.options.setupRatePerMinute,
      60,
      `agent setup requests from this address (${kind})`,
    );
  }

  /**
   * An agent asks to be authorized: a private setup code for itself and a public approval URL
   * for its owner, both valid for 10 minutes.
   */
  async beginAuthorization(
    clientAddress = 'internal',
    request: BeginAuthorizationRequest = {},
    client?: OAuthClientSession,
  ): Promise<BeginAuthorizationResponse> {
    this.assertEnabled();
    const requestedName = agentName(request.name);
    await this.limitAddress('begin', clientAddress);
    const setup = mintCode(SETUP_CODE_TAG);
    const approval = client
      ? { code: client.approvalCode, hash: sha256(client.approvalCode) }
      : mintCode(APPROVAL_CODE_TAG);
    const now = this.clock.now();
    const row = await this.store.read((r) =>
      r.accounts.authorizations.insert({
        id: randomUUID(),
        origin: 'SESSION',
        status: 'PENDING',
        setupCodeHash: setup.hash,
        approvalCodeHash: approval.hash,
        accountId: null,
        approvedByKeyId: null,
        name: null,
        requestedName,
        ...NO_LIMITS_YET,
        issuedKeyId: null,
        expiresAt: new Date(now.getTime() + AUTHORIZATION_TTL_MS),
        approvedAt: null,
        exchangedAt: null,
        createdAt: now,
        oauthInteractionUid: client?.interactionUid ?? null,
      }),
    );
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
    const hash = sha256(approvalCode);
    const row = await this.store.read((r) => r.accounts.authorizations.byApprovalCode(hash));
    if (!row) return null;
    return {
      authorizationId: row.id,
      status: this.view(row),
      expiresAt: row.expiresAt,
      approvalUrl: this.approvalUrl(approvalCode),
      requestedName: row.requestedName,
      clientInteraction: row.oauthInteractionUid,
    };
  }

  private view(row: AgentAuthorization): AuthorizationView {
    if (row.status === 'EXCHANGED' || row.status === 'REVOKED') return row.status;
    return row.expiresAt.getTime() <= this.clock.now().getTime() ? 'EXPIRED' : row.status;
  }

  /**
   * The HTTP approve route and the approval page: an OWNER key holding read, rent and manage
   * approves for its account, with limits its door checked already (the API's schema, the form).
   */
  async approveWithKey(
    principal: Principal,
    approvalCode: string,
    limits: KeyLimits,
    name?: string,
  ): Promise<ApproveAuthorizationResponse> {
    if (principal.kind !== 'OWNER')
      throw new AppError('FORBIDDEN', 'Only owner keys may approve agent authorizations.');
    const missing = SETUP_SCOPES.filter((s) => !principal.scopes.includes(s));
    if (missing.length)
      throw new AppError(
        'FORBIDDEN',
        `Approving needs an owner key with scopes read, rent and manage (missing: ${missing.join(', ')}).`,
      );
    assertWithinOwnLimits(principal, limits);
    return this.approve({ accountId: principal.accountId, keyId: principal.keyId }, approvalCode, limits, name);
  }

  /** The Telegram bot's approval: the owner holds no key, and the limits are checked here. */
  async approveAuthorization(
    owner: OwnerRef,
    approvalCode: string,
    given: AgentLimits,
  ): Promise<ApproveAuthorizationResponse> {
    return this.approve(owner, approvalCode, parseKeyLimits(given, APPROVAL_LIMITS), given.name);
  }

  /**
   * Approves a pending session once, binding it to the owner's account and the limits. The session
   * keeps the expiry its agent was told at the start: approval and exchange both happen within
   * those 10 minutes. A second approval, or one after the session expired, is 409
   * AGENT_SETUP_INVALID; an unknown code is 404.
   */
  private async approve(
    owner: OwnerRef,
    approvalCode: string,
    limits: KeyLimits,
    givenName: string | undefined,
  ): Promise<ApproveAuthorizationResponse> {
    const name = storedName(givenName);
    await this.store.read((r) => assertNotFrozen(r.accounts, owner.accountId));
    return this.store.transaction(async (r) => {
      // A revocation of the approving key either committed already (401 here) or waits for this
      // approval and then revokes the session with it.
      if (owner.keyId) await this.keys.lockActingKey(r.accounts, owner.accountId, owner.keyId);
      const row = await r.accounts.authorizations.lockByApprovalCode(sha256(approvalCode));
      if (!row) throw new AppError('NOT_FOUND', 'No agent authorization has this approval code.');
      const now = this.clock.now();
      if (row.status !== 'PENDING')
        throw new AppError(
          'AGENT_SETUP_INVALID',
          'This agent authorization was already approved; a session can be approved once.',
        );
      if (row.expiresAt.getTime() <= now.getTime())
        throw new AppError('AGENT_SETUP_INVALID', 'This agent authorization expired; the agent must begin a new one.');
      const approval: Approval = {
        accountId: owner.accountId,
        approvedByKeyId: owner.keyId,
        name: name ?? row.requestedName ?? 'approved agent',
        ...limits,
        approvedAt: now,
      };
      await r.accounts.authorizations.markApproved(row.id, approval);
      return {
        authorizationId: row.id,
        status: 'APPROVED' as const,
        exchangeBefore: row.expiresAt.toISOString(),
        ...limits,
      };
    });
  }

  /** An owner mints a setup code (Telegram): usable once, within 10 minutes, with these limits. */
  async mintSetupCode(owner: OwnerRef, given: AgentLimits): Promise<{ setupCode: string; expiresAt: Date }> {
    this.assertEnabled();
    const limits = parseKeyLimits(given, APPROVAL_LIMITS);
    const name = storedName(given.name);
    await this.store.read((r) => assertNotFrozen(r.accounts, owner.accountId));
    const setup = mintCode(SETUP_CODE_TAG);
    const now = this.clock.now();
    const expiresAt = new Date(now.getTime() + AUTHORIZATION_TTL_MS);
    const row: NewAuthorization = {
      id: randomUUID(),
      origin: 'TELEGRAM',
      status: 'APPROVED',
      setupCodeHash: setup.hash,
      approvalCodeHash: null,
      accountId: owner.accountId,
      approvedByKeyId: owner.keyId,
      name: name ?? 'telegram agent',
      ...limits,
      issuedKeyId: null,
      expiresAt,
      approvedAt: now,
      exchangedAt: null,
      createdAt: now,
    };
    await this.store.read((r) => r.accounts.authorizations.insert(row));
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
    const { keyId, token } = await this.store.transaction(async (r) => {
      const row = await r.accounts.authorizations.lockBySetupCode(sha256(setupCode));
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
      return this.issueKey(r.accounts, row, now);
    });
    return { key: await this.agentKeys.describeKey(keyId), token };
  }

  /** The AGENT key an approved session or setup code `row` (locked) is exchanged for, in the caller's transaction. */
  private async issueKey(
    accounts: AccountsRepository,
    row: AgentAuthorization,
    now: Date,
  ): Promise<{ keyId: string; token: string }> {
    const { key, token } = await this.keys.create(accounts, {
      accountId: row.accountId!,
      kind: 'AGENT',
      name: row.name ?? 'agent',
      scopes: SETUP_SCOPES,
      origin: row.origin === 'TELEGRAM' ? 'telegram-setup' : row.oauthInteractionUid ? 'oauth' : 'authorization',
      issuedByKeyId: row.approvedByKeyId,
      ...approvedLimits(row),
    });
    await accounts.authorizations.markExchanged(row.id, key.id, now);
    return { keyId: key.id, token };
  }

  /** Where the session of OAuth interaction `uid` stands; null when the interaction opened none yet. */
  async clientSession(uid: string): Promise<AuthorizationView | null> {
    const row = await this.store.read((r) => r.accounts.authorizations.byOAuthInteraction(uid));
    return row ? this.view(row) : null;
  }

  /**
   * The AGENT key the owner's approval of OAuth interaction `uid` issues, once: the session is
   * exchanged here, by the service, since its client holds no setup code (its tokens act as the
   * key). Answers the key's id when the session is approved (or was exchanged by an earlier call,
   * a page loaded twice), and otherwise where it stands.
   */
  async issueForClient(uid: string): Promise<{ status: AuthorizationView; keyId: string | null }> {
    return this.store.transaction(async (r) => {
      const row = await r.accounts.authorizations.lockByOAuthInteraction(uid);
      if (!row) throw new AppError('NOT_FOUND', 'No agent authorization answers this OAuth interaction.');
      const status = this.view(row);
      if (status === 'EXCHANGED') return { status, keyId: row.issuedKeyId };
      if (status !== 'APPROVED') return { status, keyId: null };
      const { keyId } = await this.issueKey(r.accounts, row, this.clock.now());
      return { status: 'EXCHANGED' as const, keyId };
    });
  }

  /** The owner refused OAuth interaction `uid` on its page: the session can no longer be approved (in the bot either). */
  async refuseClient(uid: string): Promise<void> {
    await this.store.transaction(async (r) => {
      const row = await r.accounts.authorizations.lockByOAuthInteraction(uid);
      if (row && row.status === 'PENDING') await r.accounts.authorizations.markRevoked([row.id]);
    });
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

/** A key name given through whatever door, as it will be stored (the one rule for key names); undefined when none was given. */
function storedName(name: string | undefined): string | undefined {
  return name === undefined ? undefined : keyName(name);
}
