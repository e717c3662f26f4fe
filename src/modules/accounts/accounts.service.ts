import { randomUUID } from 'node:crypto';
import type { Clock } from '../../clock.js';
import type { BillingModel } from '../../config.js';
import type { Store } from '../../db/store.js';
import { AppError } from '../../errors/app-error.js';
import type { Principal } from '../keys/principal.js';
import type { RateLimiter } from '../../http/rate-limiter.js';
import { claimOrReplay, idempotentRequest, priorUse, requireIdempotencyKey } from '../idempotency/idempotency.js';
import type { IdempotencyRepository } from '../idempotency/idempotency.repository.js';
import { SIGNUP_ORIGIN } from '../keys/account-holder.js';
import type { ApiKey, Scope } from '../keys/api-key.entity.js';
import { keyLimitsOf, OWNER_KEY_LIMITS, SIGNUP_LIMITS, type KeyLimitsInput } from '../keys/key-limits.js';
import { agentName } from '../keys/key-name.js';
import { API_KEY_TAG } from '../keys/tokens.js';
import type { KeysService, KeyUsage } from '../keys/keys.service.js';
import { Account } from './account.entity.js';
import type { AccountsRepository } from './accounts.repository.js';
import type { AccountDto, KeyDto, SignupRequest, SignupResponse } from './accounts.dto.js';
import { accountBalanceEligible } from './billing-eligibility.js';

/** What an operator gives to create an owner account (see src/cli/owner-command.ts). */
export interface NewOwner extends KeyLimitsInput {
  /** Name of the owner key, e.g. the owner's or the team's. */
  name: string;
  email?: string | null;
  scopes: Scope[];
  /** Also grants the operator pages (the jobs dashboard). */
  isAdmin: boolean;
}

export interface AccountsOptions {
  agentV1Enabled: boolean;
  signupRatePerMinute: number;
  defaultBillingModel: BillingModel;
}

export function toKeyDto(key: ApiKey, usage: KeyUsage): KeyDto {
  return {
    id: key.id,
    kind: key.kind,
    name: key.name,
    prefix: key.prefix,
    origin: key.origin,
    scopes: key.scopes,
    ...keyLimitsOf(key),
    netSpentMinor: usage.netSpentMinor,
    remainingBudgetMinor: usage.remainingBudgetMinor,
    activeDeployments: usage.activeDeployments,
    createdAt: key.createdAt.toISOString(),
    revokedAt: key.revokedAt ? key.revokedAt.toISOString() : null,
  };
}

export class AccountsService {
  constructor(
    private readonly store: Store<{ accounts: AccountsRepository; idempotency: IdempotencyRepository }>,
    private readonly clock: Clock,
    private readonly keys: KeysService,
    private readonly rateLimiter: RateLimiter,
    private readonly options: AccountsOptions,
  ) {}

  assertAgentsEnabled(): void {
    if (!this.options.agentV1Enabled)
      throw new AppError('AGENTS_DISABLED', 'Agent creation is switched off on this service.');
  }

  /** A new account with no credits, written in the caller's transaction (`accounts` is its repository). */
  async createAccount(
    accounts: AccountsRepository,
    fields: Partial<Pick<Account, 'email' | 'telegramUserId' | 'telegramChatId'>> = {},
  ): Promise<Account> {
    const account = Object.assign(new Account(), {
      id: randomUUID(),
      billingModel: this.options.defaultBillingModel,
      balanceMinor: 0,
      frozen: false,
      email: fields.email ?? null,
      telegramUserId: fields.telegramUserId ?? null,
      telegramChatId: fields.telegramChatId ?? null,
      createdAt: this.clock.now(),
    });
    await accounts.insert(account);
    return account;
  }

  /** Headless signup: always a new zero-balance account and one AGENT key with every scope. */
  async signup(
    idempotencyKeyHeader: string | undefined,
    body: SignupRequest | undefined,
    authorization?: string,
  ): Promise<SignupResponse> {
    this.assertAgentsEnabled();
    const idemKey = requireIdempotencyKey(idempotencyKeyHeader, { uuid: true });
    if (authorization !== undefined) {
      // A key that does not authenticate (lost, revoked, mistyped) is no account to keep: signup goes on.
      const holder = await this.keys.authenticate(authorization).catch(() => null);
      if (holder) throw signupWithKey(`${API_KEY_TAG}_${holder.key.prefix}`);
    }
    const { name: rawName, ...given } = body ?? {};
    const name = agentName(rawName) ?? undefined;
    const limits = { ...SIGNUP_LIMITS.defaults, ...stripUndefined(given) };
    const request = idempotentRequest('signup', idemKey, name === undefined ? limits : { ...limits, name });
    // A retry of a finished signup is answered without spending the global rate budget.
    if ((await this.store.read((r) => priorUse(r.idempotency, request))) !== null) throw signupCompleted();
    await this.rateLimiter.hit('signup', this.options.signupRatePerMinute, 60, 'signups');

    const token = await this.store.transaction((r) =>
      claimOrReplay(r.idempotency, this.clock, request, {
        replay: () => {
          throw signupCompleted();
        },
        create: async () => {
          const account = await this.createAccount(r.accounts);
          const { token } = await this.keys.create(r.accounts, {
            accountId: account.id,
            kind: 'AGENT',
            name: name ?? 'signup',
            scopes: ['read', 'rent', 'manage', 'billing'],
            origin: SIGNUP_ORIGIN,
            ...limits,
          });
          return { resourceId: account.id, result: token };
        },
      }),
    );
    const principal = await this.keys.authenticate(`Bearer ${token}`);
    return { account: await this.describe(principal), token };
  }

  /**
   * The owner account bound to a Telegram user, created on first contact. The unique key on
   * telegram_user_id makes concurrent first messages converge on one account; the chat id is kept
   * current so notifications reach the chat the owner last used.
   */
  async findOrCreateTelegramOwner(telegramUserId: number, chatId: number): Promise<Account> {
    const existing = await this.store.read((r) => r.accounts.ofTelegramUser(telegramUserId));
    if (existing) {
      if (existing.telegramChatId !== chatId) {
        await this.store.read((r) => r.accounts.setTelegramChat(existing.id, chatId));
        existing.telegramChatId = chatId;
      }
      return existing;
    }
    try {
      return await this.store.transaction((r) =>
        this.createAccount(r.accounts, { telegramUserId, telegramChatId: chatId }),
      );
    } catch (err) {
      if ((err as { code?: string }).code !== 'ER_DUP_ENTRY') throw err;
      // The concurrent first message that won the unique key made the account.
      const winner = await this.store.read((r) => r.accounts.ofTelegramUser(telegramUserId));
      if (!winner) throw err;
      return winner;
    }
  }

  /**
   * Issues an OWNER key with every scope (shown once). Owner keys approve agents and issue agent
   * keys; their own rental limits are generous because the owner is the one paying.
   */
  async issueOwnerKey(accountId: string, name = 'owner key'): Promise<{ key: ApiKey; token: string }> {
    return this.store.transaction((r) =>
      this.keys.create(r.accounts, {
        accountId,
        kind: 'OWNER',
        name,
        scopes: ['read', 'rent', 'manage', 'billing'],
        origin: 'owner',
        ...OWNER_KEY_LIMITS,
      }),
    );
  }

  /**
   * An owner account with its first OWNER key, made by an operator from the server's shell
   * (`owner create`): for owners who do not use Telegram. The token exists only in the result.
   */
  async createOwner(input: NewOwner): Promise<{ account: Account; key: ApiKey; token: string }> {
    return this.store.transaction(async (r) => {
      const account = await this.createAccount(r.accounts, { email: input.email ?? null });
      const { key, token } = await this.keys.create(r.accounts, {
        accountId: account.id,
        kind: 'OWNER',
        name: input.name,
        scopes: input.scopes,
        origin: 'operator',
        isAdmin: input.isAdmin,
        ...keyLimitsOf(input),
      });
      return { account, key, token };
    });
  }

  async describe(principal: Principal): Promise<AccountDto> {
    const account = await this.store.read((r) => r.accounts.get(principal.accountId));
    const usage = (await this.keys.usage([principal.key])).get(principal.keyId)!;
    return {
      user: {
        id: account.id,
        email: account.email,
        createdAt: account.createdAt.toISOString(),
        telegramLinked: account.telegramUserId !== null,
      },
      key: toKeyDto(principal.key, usage),
      balance: {
        creditsMinor: account.balanceMinor,
        keyRemainingBudgetMinor: usage.remainingBudgetMinor,
        currency: 'USD',
        frozen: account.frozen,
      },
      billing: {
        model: account.billingModel,
        budgetRequired: !accountBalanceEligible(account),
      },
    };
  }
}

/** A signup's token is shown once, so its replay is an error rather than the first answer. */
function signupCompleted(): AppError {
  return new AppError(
    'SIGNUP_ALREADY_COMPLETED',
    'This Idempotency-Key already completed a signup; its token is shown only once and not again. ' +
      'If you kept the token, use it (GET /api/v1/me shows its account). If it is lost, sign up again with a new Idempotency-Key (a new, empty account), or ask the account owner for a setup code.',
  );
}

/** A signup sent with a working key: a second account would be empty and unrelated to the first. */
function signupWithKey(prefix: string): AppError {
  return new AppError(
    'SIGNUP_ALREADY_COMPLETED',
    `This signup carries the API key ${prefix} of an existing account; a signup would make a second, empty account. ` +
      'Keep using that key (GET /api/v1/me shows its account and limits). To make a separate account on purpose, send the signup without the Authorization header.',
  );
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
