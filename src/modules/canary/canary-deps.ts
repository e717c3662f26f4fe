import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import type { Logger } from '../../logger.js';
import type { ProviderRegistry } from '../../providers/provider-registry.js';
import type { LedgerService } from '../billing/ledger.service.js';
import type { CredentialsService } from '../credentials/credentials.service.js';
import type { InventoryService } from '../inventory/inventory.service.js';
import type { KeysService } from '../keys/keys.service.js';
import type { ReceiptsService } from '../receipts/receipts.service.js';
import type { MachinePolicy } from '../rentals/admission/machine-settings.js';
import type { RentalsService } from '../rentals/admission/rental-requests.service.js';
import type { RentalReadsService } from '../rentals/reads/rental-reads.service.js';
import type { CanaryAccountRepos } from './canary-account.js';

/** What a canary runs on: the services an agent's requests and the worker's jobs use (src/container.ts builds them). */
export interface CanaryDeps {
  store: Store<CanaryAccountRepos>;
  clock: Clock;
  logger: Logger;
  providers: Pick<ProviderRegistry, 'registered' | 'get'>;
  inventory: Pick<InventoryService, 'refresh' | 'invalidate' | 'listOffers'>;
  keys: Pick<KeysService, 'create' | 'revoke'>;
  ledger: LedgerService;
  rentals: Pick<RentalsService, 'create' | 'terminate'>;
  rentalReads: Pick<RentalReadsService, 'get'>;
  credentials: Pick<CredentialsService, 'reveal'>;
  /** The teardown receipt of the rental, read as its key reads it (GET /api/v1/rentals/{id}/receipt). */
  receipts: Pick<ReceiptsService, 'forRental'>;
  /** The operator's machine policy, which a rental's request is parsed against (MACHINE_*). */
  machinePolicy: MachinePolicy;
}

/** What the operator asked for. */
export interface CanaryOptions {
  provider: string;
  /** The cap on real money, in cents: the run's budget, its key's limits and its account's credits. */
  maxSpendMinor: number;
  /** A GPU model or family to rent (`--gpu`), matched as GET /api/v1/offers?gpu= matches; null: any. */
  gpu: string | null;
  /** The bound on the way up (to the GPU listing), and again on the teardown. */
  timeoutMs: number;
  /** Between reads of the rental (default CANARY_POLL_MS of canary-watch.ts). */
  pollMs?: number;
}

/**
 * How a canary is stopped from outside: `stop` (a first Ctrl-C) ends the machine, waits for its
 * verified destruction, then reports; `leave` (a second one) stops waiting, leaving the rental to
 * end in the service (its termination job is written; any worker finishes it).
 */
export interface CanarySignals {
  stop?: AbortSignal;
  leave?: AbortSignal;
}
