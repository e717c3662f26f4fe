import type { Services } from '../src/container.js';
import type { Account } from '../src/modules/accounts/account.entity.js';

/** The owner acting: the account, and the key it acts with (none when acting through the bot). */
export interface OwnerRef {
  accountId: string;
  keyId: string | null;
}

export interface AgentLimitsInput {
  maxPerRentalMinor: number;
  budgetLimitMinor: number;
  maxConcurrentDeployments: number;
  name?: string;
}

export interface AgentKeySummary {
  id: string;
  name: string;
  prefix: string;
  maxPerRentalMinor: number;
  budgetLimitMinor: number;
  maxConcurrentDeployments: number;
  netSpentMinor: number;
  remainingBudgetMinor: number;
  activeDeployments: number;
  revokedAt: string | Date | null;
}

/** What the bot uses of the agents module (authorization sessions, setup codes, agent keys). */
export interface AgentsPort {
  describeAuthorization(approvalCode: string): Promise<{ status: string; expiresAt: string | Date }>;
  approveAuthorization(owner: OwnerRef, approvalCode: string, limits: AgentLimitsInput): Promise<unknown>;
  mintSetupCode(owner: OwnerRef, limits: AgentLimitsInput): Promise<{ setupCode: string; expiresAt: string | Date }>;
  listAgentKeys(accountId: string): Promise<AgentKeySummary[]>;
  revokeAgentKey(accountId: string, keyId: string): Promise<unknown>;
}

/** What the bot uses of the accounts module for Telegram owners. */
export interface OwnersPort {
  findOrCreateTelegramOwner(telegramUserId: number, chatId: number): Promise<Account>;
  issueOwnerKey(accountId: string): Promise<{ key: { id: string; prefix: string }; token: string }>;
}

/** The agents service of `services`; fails the update (with a logged cause) if this build has none. */
export function agentsOf(services: Services): AgentsPort {
  const agents = (services as unknown as { agents?: AgentsPort }).agents;
  if (!agents) throw new Error('services.agents is not available in this build');
  return agents;
}

/** The Telegram-owner operations of the accounts service. */
export function ownersOf(services: Services): OwnersPort {
  const accounts = services.accounts as unknown as Partial<OwnersPort>;
  const need = <K extends keyof OwnersPort>(name: K): OwnersPort[K] => {
    const fn = accounts[name];
    if (typeof fn !== 'function') throw new Error(`accounts.${name} is not available in this build`);
    return fn.bind(accounts) as OwnersPort[K];
  };
  return {
    findOrCreateTelegramOwner: (telegramUserId, chatId) => need('findOrCreateTelegramOwner')(telegramUserId, chatId),
    issueOwnerKey: (accountId) => need('issueOwnerKey')(accountId),
  };
}
