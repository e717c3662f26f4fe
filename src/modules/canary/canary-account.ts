import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import { AppError } from '../../errors/app-error.js';
import type { Repositories } from '../../repositories.js';
import { formatUsd } from '../../vocabulary/money.js';
import { Account } from '../accounts/account.entity.js';
import { rentalSpentMinor, type LedgerService } from '../billing/ledger.service.js';
import type { ApiKey } from '../keys/api-key.entity.js';
import type { KeysService } from '../keys/keys.service.js';
import type { Principal } from '../keys/principal.js';
import type { KeyRentalRow } from '../rentals/store/rentals.repository.js';
import type { CanaryCharge } from './canary-report.js';

// The canary's own account: the operator's proof rentals are charged there, never to a customer,
// and the money it spends comes from and goes back to it through the ledger, so every account's
// entries still sum to its balance. Nothing but the canary uses it.

/**
 * The id of the canary's internal account: fixed, so every run (and an operator reading the
 * tables) finds the same one; created by the first run. Its keys carry {@link CANARY_KEY_ORIGIN}.
 */
export const CANARY_ACCOUNT_ID = '00000000-0000-4000-8000-00000000ca4a';

/** `api_keys.origin` of the key each canary run rents with. */
export const CANARY_KEY_ORIGIN = 'canary';

/** The aggregates the canary's account and money touch. */
export type CanaryAccountRepos = Pick<Repositories, 'accounts' | 'ledger' | 'rentals'>;

/**
 * The canary's account, created on first use: billed by usage (ACCOUNT_BALANCE) whatever the
 * service's default, so a run's budget is a spend cap the metering enforces. Two first runs at
 * once meet on the primary key: the loser reads the winner's row.
 */
export async function ensureCanaryAccount(store: Store<CanaryAccountRepos>, clock: Clock): Promise<Account> {
  const found = await store.read((r) => r.accounts.find(CANARY_ACCOUNT_ID));
  if (found) return found;
  const account = Object.assign(new Account(), {
    id: CANARY_ACCOUNT_ID,
    billingModel: 'ACCOUNT_BALANCE',
    balanceMinor: 0,
    unpostedUsageMinor: 0,
    frozen: false,
    email: null,
    telegramUserId: null,
    telegramChatId: null,
    createdAt: clock.now(),
  } satisfies Partial<Account>);
  try {
    await store.transaction((r) => r.accounts.insert(account));
    return account;
  } catch (err) {
    if ((err as { code?: string }).code !== 'ER_DUP_ENTRY') throw err;
    return store.read((r) => r.accounts.get(CANARY_ACCOUNT_ID));
  }
}

/**
 * Sets the canary account's credits to exactly `targetMinor` with one ADJUSTMENT entry (none when
 * they are that already), under the account lock: before a run, to its cap (what it may spend);
 * after it, to zero (what it did not spend goes back). `ref` makes the entry unique per run and
 * purpose, so a repeated call posts nothing twice. Answers the entry's amount.
 */
export async function adjustCanaryCredits(
  store: Store<CanaryAccountRepos>,
  ledger: LedgerService,
  targetMinor: number,
  ref: string,
  why: string,
): Promise<number> {
  return store.transaction(async (r) => {
    const account = await ledger.lockAccount(r, CANARY_ACCOUNT_ID);
    const amountMinor = targetMinor - account.balanceMinor;
    if (amountMinor === 0) return 0;
    await ledger.post(
      r,
      {
        accountId: CANARY_ACCOUNT_ID,
        kind: 'ADJUSTMENT',
        amountMinor,
        externalRef: ref,
        description: `Canary: ${why} (credits set to ${formatUsd(targetMinor)})`.slice(0, 255),
      },
      account,
    );
    return amountMinor;
  });
}

/** The key's principal, as authentication would make it: what the rental services act for. */
export function principalOfKey(key: ApiKey): Principal {
  return { keyId: key.id, accountId: key.accountId, kind: key.kind, scopes: key.scopes, key };
}

/**
 * A key of the canary account for one run, whose limits are the run's cap: per rental, in total
 * over its life, and one rental at a time. Its token is dropped at once; the run acts through the
 * principal, as a request authenticated with the token would.
 */
export async function newRunKey(
  store: Store<CanaryAccountRepos>,
  keys: Pick<KeysService, 'create'>,
  name: string,
  capMinor: number,
): Promise<Principal> {
  const { key } = await store.transaction((r) =>
    keys.create(r.accounts, {
      accountId: CANARY_ACCOUNT_ID,
      kind: 'AGENT',
      name: name.slice(0, 100),
      scopes: ['read', 'rent', 'manage'],
      origin: CANARY_KEY_ORIGIN,
      maxPerRentalMinor: capMinor,
      budgetLimitMinor: capMinor,
      maxConcurrentDeployments: 1,
    }),
  );
  return principalOfKey(key);
}

/** Revokes a run's key once its rental is over; one revoked already (by an earlier attempt) is left as it is. */
export async function revokeRunKey(keys: Pick<KeysService, 'revoke'>, keyId: string): Promise<void> {
  try {
    await keys.revoke(CANARY_ACCOUNT_ID, keyId);
  } catch (err) {
    if (!(err instanceof AppError) || err.code !== 'NOT_FOUND') throw err;
  }
}

/** A rental an earlier run left unfinished, with the principal of the key it was started with. */
export interface LeftRental {
  rental: KeyRentalRow;
  principal: Principal;
}

/**
 * What earlier runs left: the canary account's rentals not yet TERMINATED or FAILED (a run killed,
 * or left ending), oldest first, and the keys of runs whose rentals are all over but that were
 * never revoked (a run that left).
 */
export async function leftByEarlierRuns(
  store: Store<CanaryAccountRepos>,
): Promise<{ rentals: LeftRental[]; idleKeyIds: string[] }> {
  return store.read(async (r) => {
    const keys = (await r.accounts.keys.ofAccount(CANARY_ACCOUNT_ID, 'AGENT')).filter(
      (k) => k.origin === CANARY_KEY_ORIGIN && k.revokedAt === null,
    );
    if (keys.length === 0) return { rentals: [], idleKeyIds: [] };
    const byId = new Map(keys.map((k) => [k.id, k]));
    const rows = await r.rentals.reads.unfinishedOfKeys(CANARY_ACCOUNT_ID, [...byId.keys()]);
    const busy = new Set(rows.map((row) => row.keyId));
    return {
      rentals: rows.map((rental) => ({ rental, principal: principalOfKey(byId.get(rental.keyId)!) })),
      idleKeyIds: keys.filter((k) => !busy.has(k.id)).map((k) => k.id),
    };
  });
}

/**
 * The run's rental as the ledger holds it: its entries, oldest first, and what it cost by the one
 * rule of a rental's cost (`rentalSpentMinor`, the figure its key's spend and its receipt count).
 */
export async function rentalCharges(
  store: Store<CanaryAccountRepos>,
  keyId: string,
  rentalId: string,
): Promise<{ costMinor: number; charges: CanaryCharge[] }> {
  return store.read(async (r) => {
    // The run's key is new, so its entries are this rental's; a rental's entries are a handful.
    const entries = await r.ledger.visible({ kind: 'AGENT', accountId: CANARY_ACCOUNT_ID, keyId }, 100);
    const charges = entries
      .filter((e) => e.rentalId === rentalId)
      .reverse()
      .map((e) => ({ kind: e.kind, amountMinor: e.amountMinor, description: e.description }));
    return { costMinor: await rentalSpentMinor(r.ledger, rentalId), charges };
  });
}
