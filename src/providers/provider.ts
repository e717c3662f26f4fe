import type { DataSource } from 'typeorm';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';

/** One rentable shape a provider currently offers, as the provider prices it to customers. */
export interface ProviderOffer {
  /** The provider's own stable key for this shape (instance type, bundle id, ...). */
  key: string;
  /** GPU model as the provider names it, e.g. "NVIDIA H100 SXM". Normalized by the host. */
  name: string;
  /** Grouping label, e.g. "datacenter", "workstation", "consumer". */
  category: string;
  vramGb: number | null;
  gpuCount: number;
  cpuCores?: number | null;
  memoryGb?: number | null;
  storageGb?: number | null;
  /** Customer price in USD cents per hour for the whole instance. */
  pricePerHourMinor: number;
  /** Longest rental the provider allows for this offer. */
  maximumDurationSeconds: number;
}

/** What the host hands to `create`: the cached offer the customer is buying. */
export interface OfferRef {
  /** Our offer id (UUID). */
  id: string;
  /** `ProviderOffer.key` of the offer. */
  key: string;
  name: string;
  gpuCount: number;
}

/**
 * Outcome of one create attempt.
 * - `created`: the provider accepted the request; `instanceId` identifies the machine.
 * - `unavailable`: the provider explicitly refused for lack of capacity or because the offer is
 *   gone; nothing was created, so the host may try another offer.
 * - `ambiguous`: the outcome is unknown (timeout, 5xx, dropped connection). An instance may
 *   exist; the host must look it up by label and must never create another for this attempt.
 */
export type CreateResult =
  | { kind: 'created'; instanceId: string }
  | { kind: 'unavailable'; reason: string }
  | { kind: 'ambiguous'; reason: string };

/** Our states for a provider instance; each plugin maps its own states to these in one table. */
export type InstanceState = 'pending' | 'running' | 'stopped' | 'failed' | 'terminating' | 'gone';

export interface InstanceInfo {
  instanceId: string;
  label: string;
  state: InstanceState;
  /** SSH endpoint, once the provider has assigned one. */
  ssh?: { host: string; port: number; user: string };
  /** Provider's own state name, for logs only. */
  providerState?: string;
}

export interface ProviderCapabilities {
  /** The provider stores our label on the instance, so `findByLabel` is authoritative. */
  labels: boolean;
  /** The provider accepts an SSH public key per instance at create time. */
  sshKeyPerInstance: boolean;
  /** The provider can list all instances (needed by the reconciler). */
  listInstances: boolean;
}

/** A running provider client. Every method may be called again after a crash; all must be safe to repeat. */
export interface Provider {
  readonly id: string;
  readonly capabilities: ProviderCapabilities;
  /** Current inventory. Called by the refresh job, never at rental time. */
  listOffers(): Promise<ProviderOffer[]>;
  /**
   * Asks for one instance of `offer`, tagged with `label` (unique per deployment and attempt)
   * and reachable with `sshPublicKey` (OpenSSH format).
   */
  create(label: string, offer: OfferRef, sshPublicKey: string): Promise<CreateResult>;
  /** The instance carrying `label`, or null if the provider has none (including destroyed ones). */
  findByLabel(label: string): Promise<InstanceInfo | null>;
  /** Current state of an instance; `gone` when the provider no longer knows it. */
  get(instanceId: string): Promise<InstanceInfo>;
  /** Requests destruction. Idempotent: destroying a gone instance succeeds. */
  destroy(instanceId: string): Promise<void>;
  /** Every instance this service created (label carries our prefix); used by the reconciler. */
  listInstances(): Promise<InstanceInfo[]>;
  /** Releases sockets, servers and timers. */
  close?(): Promise<void>;
}

/** Services the host gives a plugin. */
export interface ProviderDeps {
  logger: Logger;
  clock: Clock;
  /** The service's database, for plugins that keep their own state table. */
  dataSource: DataSource;
  /** True when NODE_ENV=production. */
  production: boolean;
  /** Prefix every label this service uses starts with. */
  labelPrefix: string;
}

/** What `plugins/<id>/index.ts` exports as default. */
export interface ProviderPlugin<Options = unknown> {
  id: string;
  /** A one-line description for logs and docs. */
  description: string;
  /**
   * Turns raw `<ID>_PROVIDER_<NAME>` variables (name without the prefix) into typed options.
   * Throws an Error whose message names the offending variable.
   */
  validateOptions(raw: Record<string, string>): Options;
  create(options: Options, deps: ProviderDeps): Promise<Provider> | Provider;
}
