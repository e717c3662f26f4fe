import assert from 'node:assert/strict';
import { ManualClock } from '../../src/clock.js';
import { AppError } from '../../src/errors/app-error.js';
import { RateLimiter } from '../../src/http/rate-limiter.js';
import { AccountsService, type AccountsOptions } from '../../src/modules/accounts/accounts.service.js';
import { AgentKeysService } from '../../src/modules/agents/agent-keys.service.js';
import { AgentsService, type AgentsOptions } from '../../src/modules/agents/agents.service.js';
import type { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import { KeysService } from '../../src/modules/keys/keys.service.js';
import type { Principal } from '../../src/modules/keys/principal.js';
import type { RentalsService } from '../../src/modules/rentals/admission/rental-requests.service.js';
import type { KeyRentalRow } from '../../src/modules/rentals/store/rental-reads.repository.js';
import { memoryStore } from './store/memory-repositories.js';

/**
 * The accounts module's services on one memory store, wired as the composition root wires them,
 * with a movable clock and recording stand-ins for the rentals they reach.
 */
export interface AccountsWorld {
  store: ReturnType<typeof memoryStore>;
  clock: ManualClock;
  limiter: RateLimiter;
  keys: KeysService;
  accounts: AccountsService;
  agents: AgentsService;
  agentKeys: AgentKeysService;
  /** The unfinished rentals the rentals aggregate answers for each key id. */
  rentalsOfKey: Map<string, KeyRentalRow[]>;
  /** Deployments the rentals service was asked to terminate, in order. */
  terminated: string[];
}

export interface WorldOptions {
  accounts?: Partial<AccountsOptions>;
  agents?: Partial<AgentsOptions>;
  /** Build AgentKeysService without the rentals service (the owner command does). */
  withoutRentals?: boolean;
}

export const T0 = new Date('2026-05-01T12:00:00.000Z');

export function accountsWorld(o: WorldOptions = {}): AccountsWorld {
  const store = memoryStore();
  const clock = new ManualClock(T0);
  const limiter = new RateLimiter(store, clock);
  const keys = new KeysService(store, clock);
  const accounts = new AccountsService(store, clock, keys, limiter, {
    agentV1Enabled: true,
    signupRatePerMinute: 1000,
    defaultBillingModel: 'ACCOUNT_BALANCE',
    ...o.accounts,
  });
  const rentalsOfKey = new Map<string, KeyRentalRow[]>();
  const terminated: string[] = [];
  const unfinished = async (accountId: string, keyIds: readonly string[]) =>
    keyIds.flatMap((id) => rentalsOfKey.get(id) ?? []);
  const rentals: Pick<RentalsService, 'terminate'> = {
    async terminate(_owner, deploymentId) {
      terminated.push(deploymentId);
      const at = clock.now().toISOString();
      return {
        accepted: true,
        deploymentId,
        rentalId: `order-of-${deploymentId}`,
        status: 'TERMINATING',
        terminateRequestedAt: at,
        message: 'terminating',
      };
    },
  };
  const agentKeys = new AgentKeysService(store, clock, keys, unfinished, o.withoutRentals ? undefined : rentals);
  const agents = new AgentsService(
    store,
    clock,
    keys,
    limiter,
    { agentV1Enabled: true, publicBaseUrl: 'https://gpu.example/', setupRatePerMinute: 1000, ...o.agents },
    agentKeys,
  );
  return { store, clock, limiter, keys, accounts, agents, agentKeys, rentalsOfKey, terminated };
}

/** The principal an owner key stands for. */
export function principalOf(key: ApiKey): Principal {
  return { keyId: key.id, accountId: key.accountId, kind: key.kind, scopes: key.scopes, key };
}

/** An owner account made by an operator, and its OWNER key's principal and token. */
export async function ownerOf(w: AccountsWorld, opts: { frozen?: boolean } = {}) {
  const { account, key, token } = await w.accounts.createOwner({
    name: 'owner',
    email: null,
    scopes: ['read', 'rent', 'manage', 'billing'],
    isAdmin: false,
    maxPerRentalMinor: 100_000,
    budgetLimitMinor: 1_000_000,
    maxConcurrentDeployments: 10,
  });
  if (opts.frozen) w.store.tables.table('accounts').update(account.id, { frozen: true });
  return { account, key, token, principal: principalOf(key) };
}

/** The AppError `p` rejects with (failing when it resolves, or rejects with something else). */
export async function refusal(p: Promise<unknown>): Promise<AppError> {
  const err = await p.then(
    () => assert.fail('expected a refusal'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof AppError, String(err));
  return err;
}

/** The stored rows of one memory table. */
export function rows<T extends object>(w: AccountsWorld, table: string): T[] {
  return w.store.tables.table<T>(table).all();
}
