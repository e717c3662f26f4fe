import type {
  CreateResult,
  InstanceInfo,
  OfferRef,
  Provider,
  ProviderCapabilities,
  ProviderDeps,
  ProviderOffer,
} from '../../src/providers/provider.js';
import { defaultInventory } from './default-inventory.js';
import { readInventoryFile, type LocalInventory } from './inventory.js';

export interface LocalOptions {
  /** Inventory JSON path; re-read on every listing so edits take effect at the next refresh. */
  inventoryPath?: string;
  allowProduction: boolean;
}

export class LocalProvider implements Provider {
  readonly id = 'local';
  readonly capabilities: ProviderCapabilities = { labels: true, sshKeyPerInstance: true, listInstances: true };

  constructor(
    private readonly options: LocalOptions,
    private readonly deps: ProviderDeps,
  ) {}

  async inventory(): Promise<LocalInventory> {
    return this.options.inventoryPath ? readInventoryFile(this.options.inventoryPath) : defaultInventory;
  }

  async listOffers(): Promise<ProviderOffer[]> {
    const inv = await this.inventory();
    return inv.offers
      .filter((o) => o.available !== false)
      .map((o) => ({
        key: o.key,
        name: o.name,
        category: o.category,
        vramGb: o.vramGb,
        gpuCount: o.gpuCount,
        cpuCores: o.cpuCores ?? null,
        memoryGb: o.memoryGb ?? null,
        storageGb: o.storageGb ?? null,
        pricePerHourMinor: o.pricePerHourMinor,
        maximumDurationSeconds: o.maximumDurationSeconds,
      }));
  }

  async create(_label: string, _offer: OfferRef, _sshPublicKey: string): Promise<CreateResult> {
    throw new Error('local provider: instances are not implemented yet');
  }

  async findByLabel(_label: string): Promise<InstanceInfo | null> {
    throw new Error('local provider: instances are not implemented yet');
  }

  async get(_instanceId: string): Promise<InstanceInfo> {
    throw new Error('local provider: instances are not implemented yet');
  }

  async destroy(_instanceId: string): Promise<void> {
    throw new Error('local provider: instances are not implemented yet');
  }

  async listInstances(): Promise<InstanceInfo[]> {
    return [];
  }
}
