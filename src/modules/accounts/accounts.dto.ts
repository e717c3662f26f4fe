import type { BillingModel } from '../../config.js';
import type { KeyKind, Scope } from '../keys/api-key.entity.js';

export interface SignupRequest {
  /**
   * Per-rental spending cap in cents.
   * @isInt
   * @minimum 500
   * @maximum 100000000
   * @default 500
   */
  maxPerRentalMinor?: number;
  /**
   * Total net-spending cap in cents over the key's lifetime.
   * @isInt
   * @minimum 500
   * @maximum 1000000000
   * @default 50000
   */
  budgetLimitMinor?: number;
  /**
   * Maximum concurrent deployments.
   * @isInt
   * @minimum 1
   * @maximum 1000
   * @default 1
   */
  maxConcurrentDeployments?: number;
  /**
   * What the agent calls itself (e.g. `nightly-trainer`): the name of its key, shown in key
   * listings and to the owner. Defaults to `signup`.
   * @minLength 1
   * @maxLength 100
   */
  name?: string;
}

export interface UserDto {
  /** The account id. */
  id: string;
  email: string | null;
  /** @format date-time */
  createdAt: string;
  /** True when an owner is linked through the Telegram bot. */
  telegramLinked: boolean;
}

export interface KeyDto {
  id: string;
  kind: KeyKind;
  name: string;
  /** Public part of the token, shown in listings. */
  prefix: string;
  /**
   * How the key came to be: `signup`, `authorization` (an agent authorization session its owner
   * approved), `telegram-setup` (a setup code), `oauth` (a remote MCP client its owner approved;
   * its OAuth tokens act as this key), `owner-issued`, `owner` (an owner's own key), `operator`.
   */
  origin: string;
  scopes: Scope[];
  maxPerRentalMinor: number;
  budgetLimitMinor: number;
  maxConcurrentDeployments: number;
  /** The longest any rental of the key may run, in seconds; null: no such limit. */
  maxRentalSeconds: number | null;
  /** Minutes of idle GPUs after which the key's rentals are warned (`rental.idle_warning`), then ended (IDLE); null: never. */
  idleTerminateMinutes: number | null;
  /** Rental debits and usage minus reversals, in cents, over the key's life. */
  netSpentMinor: number;
  /** budgetLimitMinor minus netSpentMinor; negative when usage settled after a stop went past the budget. */
  remainingBudgetMinor: number;
  activeDeployments: number;
  /** @format date-time */
  createdAt: string;
  /** @format date-time */
  revokedAt: string | null;
}

export interface BalanceDto {
  /** Account credits in cents. */
  creditsMinor: number;
  /** The calling key's remaining budget: lifetime budget minus net rental debits. */
  keyRemainingBudgetMinor: number;
  currency: string;
  frozen: boolean;
}

export interface BillingDto {
  model: BillingModel;
  /** False only for an eligible ACCOUNT_BALANCE account: rentals may then omit budgetMinor. */
  budgetRequired: boolean;
}

export interface AccountDto {
  user: UserDto;
  key: KeyDto;
  balance: BalanceDto;
  billing: BillingDto;
}

export interface SignupResponse {
  account: AccountDto;
  /** The raw API key. Shown once; the server keeps only a hash. */
  token: string;
}
