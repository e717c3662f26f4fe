import type { CreateResult, InstanceInfo, Provider, ProviderOffer } from '../../src/providers/provider.js';
import type { ProviderRegistry } from '../../src/providers/provider-registry.js';

/**
 * A second GPU cloud for inventory tests: its listings are whatever the test last set, or the
 * error it set (as a real plugin throws `ProviderApiError`). Inventory only calls `listOffers`;
 * the rest answers as a cloud with no instances would.
 */
export class ScriptedCloud implements Provider {
  readonly capabilities = { labels: true, sshKeyPerInstance: true, listInstances: true };
  offers: ProviderOffer[] = [];
  failure: Error | null = null;
  calls = 0;

  constructor(readonly id: string) {}

  async listOffers(): Promise<ProviderOffer[]> {
    this.calls++;
    if (this.failure) throw this.failure;
    return this.offers.map((o) => ({ ...o }));
  }

  /** What a create answers; a cloud with no capacity unless a test says otherwise. */
  createAnswer: CreateResult = { kind: 'unavailable', reason: 'scripted cloud has no capacity' };

  async create(): Promise<CreateResult> {
    return this.createAnswer;
  }

  async findByLabel(): Promise<InstanceInfo | null> {
    return null;
  }

  async get(instanceId: string): Promise<InstanceInfo> {
    return { instanceId, label: '', state: 'gone' };
  }

  async destroy(): Promise<void> {}

  async listInstances(): Promise<InstanceInfo[]> {
    return [];
  }
}

/** Registers a scripted cloud beside the configured providers of a test context. */
export function addScriptedCloud(registry: ProviderRegistry, id: string, markupPercent = 0): ScriptedCloud {
  const cloud = new ScriptedCloud(id);
  registry.register({ id, description: `Scripted test cloud ${id}`, markupPercent, provider: cloud });
  return cloud;
}

export const cloudOffer = (o: Partial<ProviderOffer> & { key: string }): ProviderOffer => ({
  name: 'H100 SXM',
  category: 'datacenter',
  vramGb: 80,
  gpuCount: 1,
  cpuCores: 16,
  memoryGb: 128,
  storageGb: 500,
  pricePerHourMinor: 250,
  maximumDurationSeconds: 86400,
  ...o,
});
