import type { Executor } from '../../db/mysql-store.js';
import { MysqlOfferCacheRepository, type OfferCacheRepository } from './offers.repository.js';
import { MysqlProviderStatusRepository, type ProviderStatusRepository } from './provider-status.repository.js';

/**
 * The inventory aggregate: the offer cache with its version (`offers`, `inventory_state`) and
 * each provider's refresh outcomes (`provider_status`). A refresh writes both halves in one
 * transaction, which is why they are one aggregate.
 */
export interface InventoryRepository {
  /** The offer cache and its version. */
  readonly offers: OfferCacheRepository;
  /** The providers' refresh outcomes and last errors. */
  readonly providerStatus: ProviderStatusRepository;
}

/** The inventory aggregate on MySQL; each half is made on first use. */
export class MysqlInventoryRepository implements InventoryRepository {
  private offerCache?: OfferCacheRepository;
  private statuses?: ProviderStatusRepository;

  constructor(private readonly sql: Executor) {}

  get offers(): OfferCacheRepository {
    return (this.offerCache ??= new MysqlOfferCacheRepository(this.sql));
  }

  get providerStatus(): ProviderStatusRepository {
    return (this.statuses ??= new MysqlProviderStatusRepository(this.sql));
  }
}
