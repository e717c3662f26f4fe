import type { DataSource } from 'typeorm';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { ProviderErrorClass } from './error-class.js';
import type { DriftRecorder } from './kit/drift.js';
import type { ProviderCheck } from './provider-check.js';

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
  /**
   * What the provider charges us, in whole USD cents per hour for the whole instance, rounded up
   * (`usdToCentsCeil` in `src/providers/pricing.ts`). The host adds the configured markup; a
   * plugin never prices for customers itself.
   */
  pricePerHourMinor: number;
  /** Longest rental the provider allows for this offer. */
  maximumDurationSeconds: number;
  /** Where the machine would run, when the cloud says (shown on the offer as `region`). */
  region?: string | null;
  /**
   * What a rental may ask of this offer's machine beyond the defaults (shown on the offer as
   * `capabilities`). Absent: nothing ({@link NO_MACHINE_CAPABILITIES}). Declare only what
   * `create` really honours: the host refuses or skips an offer on these alone.
   */
  capabilities?: MachineCapabilities;
  /**
   * What the provider charges us per GB of internet traffic the machine moves, on top of the
   * hourly price (Vast hosts that bill traffic). Absent: traffic is free. The host adds the
   * markup and charges the traffic the instance's counters ({@link InstanceInfo.traffic}) show.
   */
  trafficPrice?: TrafficPrice;
}

/** Per-GB traffic prices, in millionths of a USD (integers, so sub-cent prices stay exact). */
export interface TrafficPrice {
  /** Per GB the machine sends (upload). */
  upMicroUsdPerGb: number;
  /** Per GB the machine receives (download). */
  downMicroUsdPerGb: number;
}

/**
 * Traffic an instance has moved since it started, as its cloud bills it: cumulative, in bytes
 * (1 GB = 2^30 bytes). The host charges the growth between readings and keeps the highest reading.
 */
export interface TrafficCounters {
  upBytes: number;
  downBytes: number;
}

/** What an offer's machine can be given beyond the defaults. */
export interface MachineCapabilities {
  /** `create` runs `MachineSettings.image` instead of the default image. */
  customImage: boolean;
  /** `create` runs `MachineSettings.startupScript` once after boot. */
  startupScript: boolean;
  /** How many TCP ports `create` can expose over HTTP(S) (`MachineSettings.ports`); 0 = none. */
  ports: number;
  /** Largest `MachineSettings.diskGb` `create` honours; null: the disk cannot be chosen. */
  maxDiskGb: number | null;
}

/** An offer that declares no capabilities: the default image, no script, no ports, the default disk. */
export const NO_MACHINE_CAPABILITIES: MachineCapabilities = Object.freeze({
  customImage: false,
  startupScript: false,
  ports: 0,
  maxDiskGb: null,
});

/**
 * What should run on the machine, as the rental asked and the host checked against the offer's
 * {@link MachineCapabilities} (a plugin never receives a setting its offer did not declare).
 * `env` values and `startupScript` are the agent's secrets: send them to the cloud, never log them.
 */
export interface MachineSettings {
  /** Container image reference; null: the plugin's default image. */
  image: string | null;
  /** Environment variables for the machine's processes (and the startup script). */
  env: Record<string, string>;
  /**
   * A shell script to run once after boot as the machine's SSH user, in the background. The host
   * has already wrapped the agent's script so that it records its start in
   * {@link STARTUP_MARKER_PATH}; a plugin runs the text it is given, as it is.
   */
  startupScript: string | null;
  /** TCP ports to expose over HTTP(S); see `InstanceInfo.endpoints`. */
  ports: number[];
  /** Disk in GB; null: the offer's default. */
  diskGb: number | null;
}

/** Settings of a rental that asked for nothing: the plugin's defaults. */
export const DEFAULT_MACHINE_SETTINGS: Readonly<MachineSettings> = Object.freeze({
  image: null,
  env: {},
  startupScript: null,
  ports: [],
  diskGb: null,
});

/** Where the wrapped startup script records that it has started (relative to the SSH user's home). */
export const STARTUP_MARKER_PATH = '.gpr/startup-started';

/** What the host hands to `create`: the cached offer the customer is buying. */
export interface OfferRef {
  /** Our offer id (UUID). */
  id: string;
  /** `ProviderOffer.key` of the offer. */
  key: string;
  name: string;
  gpuCount: number;
  /**
   * What the cached offer said the provider charges us (`ProviderOffer.pricePerHourMinor`,
   * before markup): the cost the customer's price was built on. A plugin that can read the
   * machine's actual price after create compares it with this. Absent when the host does not
   * know it (offers cached before costs were kept, or a call from outside a rental).
   */
  costPerHourMinor?: number;
  /**
   * What the cached offer said the provider charges us per GB of traffic
   * (`ProviderOffer.trafficPrice`), when it bills traffic: a plugin that reads the machine's own
   * per-GB prices after create compares them with this.
   */
  trafficPrice?: TrafficPrice;
}

/**
 * Outcome of one create attempt.
 * - `created`: the provider accepted the request; `instanceId` identifies the machine.
 * - `unavailable`: the provider explicitly refused for lack of capacity, quota, or because the
 *   offer is gone; nothing was created, so the host may try another offer.
 * - `ambiguous`: the outcome is unknown (timeout, 5xx, dropped connection). An instance may
 *   exist; the host must look it up by label and must never create another for this attempt.
 * - `throttled`: the provider refused for its rate limit (429); nothing was created. The host
 *   asks again with the same label after `retryAfterMs`, within its provisioning bound.
 * - `rejected`: a configuration or request error on our side (bad API key, invalid request,
 *   image refused). Nothing was created and asking again will not help: the host logs `reason`
 *   loudly for the operator and fails the rental with a customer-safe reason. `reason` must
 *   not contain secrets.
 */
export type CreateResult =
  | { kind: 'created'; instanceId: string }
  | { kind: 'unavailable'; reason: string }
  | { kind: 'ambiguous'; reason: string }
  | { kind: 'throttled'; reason: string; retryAfterMs: number }
  | {
      kind: 'rejected';
      reason: string;
      /**
       * What kind of error the host records as the provider's last error on `/api/v1/providers`:
       * `auth` for a refused key, otherwise `request` (the default when absent).
       */
      errorClass?: ProviderErrorClass;
    };

/** Our states for a provider instance; each plugin maps its own states to these in one table. */
export type InstanceState = 'pending' | 'running' | 'stopped' | 'failed' | 'terminating' | 'gone';

export interface InstanceInfo {
  instanceId: string;
  label: string;
  state: InstanceState;
  /** SSH endpoint, once the provider has assigned one. */
  ssh?: { host: string; port: number; user: string };
  /**
   * Fingerprint of the machine's SSH host key, when the provider's answer gives it: OpenSSH's
   * `SHA256:<unpadded base64>` of the key blob (`hostKeyFingerprint`/`fingerprintOfKey` in
   * `src/providers/ssh-probe.ts` make it). The host pins it before its first login, so a server
   * showing another key at that address is never taken for the machine. Leave it out when the
   * cloud does not say: the host then pins the key shown at its first successful login.
   */
  sshHostKey?: string;
  /** The public URL of each exposed port (`MachineSettings.ports`), once the provider has assigned them. */
  endpoints?: { port: number; url: string }[];
  /**
   * What the provider says the machine is doing while it is not yet running, when it says:
   * `pulling_image` (the image is downloading) or `booting`. The host shows it as the rental's phase.
   */
  startupPhase?: 'pulling_image' | 'booting';
  /** Provider's own state name, for logs and the teardown receipt of a verified destruction. */
  providerState?: string;
  /**
   * The HTTP status of the cloud's answer this was read from (e.g. 404 for an instance the cloud no
   * longer knows), when the plugin knows it: a teardown receipt records the one of the final read.
   */
  httpStatus?: number;
  /**
   * The instance's billed traffic counters, whenever the cloud's answer carries them. The host
   * reads them with its status polls and before destruction, and charges them to rentals whose
   * offer has a {@link ProviderOffer.trafficPrice}.
   */
  traffic?: TrafficCounters;
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
   * Asks for one instance of `offer`, tagged with `label` (unique per deployment and attempt),
   * reachable with `sshPublicKey` (OpenSSH format) and set up as `machine` says (absent:
   * {@link DEFAULT_MACHINE_SETTINGS}; the host passes only what the offer's capabilities declare).
   */
  create(label: string, offer: OfferRef, sshPublicKey: string, machine?: MachineSettings): Promise<CreateResult>;
  /**
   * The instance carrying `label`, or null if the provider has none (including destroyed ones).
   * When the host adopts an instance after an ambiguous create it passes the deployment's public
   * key: a plugin that delivers keys after create (Vast attaches them) makes sure the adopted
   * instance carries it, even in a process that never saw the create.
   */
  findByLabel(label: string, sshPublicKey?: string): Promise<InstanceInfo | null>;
  /** Current state of an instance; `gone` when the provider no longer knows it. */
  get(instanceId: string): Promise<InstanceInfo>;
  /** Requests destruction. Idempotent: destroying a gone instance succeeds. */
  destroy(instanceId: string): Promise<void>;
  /**
   * Every instance this service created (label carries our prefix); used by the reconciler.
   * Pages through the whole list. Any failure (including a deprecated endpoint's 410) throws:
   * an empty answer must mean "none", never "could not tell".
   */
  listInstances(): Promise<InstanceInfo[]>;
  /**
   * Called once the host has verified that the instance of `label` is gone (provider and SSH
   * probe agree), and again if the host is unsure whether an earlier call went through. Plugins
   * that hold per-deployment resources (Lambda's registered SSH key) release them here.
   * Idempotent; optional.
   */
  afterDestroyed?(label: string): Promise<void>;
  /**
   * Whether the configured account can be used, learned through READ-ONLY calls only (never a
   * create, destroy, registration or deletion): credentials, balance where the cloud tells it,
   * one inventory read with its drops by reason, SSH key registration where a launch needs it,
   * each call's time, and the User-Agent the edge accepted (`owner providers check`). Optional:
   * the host reports a provider without it as "check not supported". Never throws for a cloud's
   * answer; a failed call is a result.
   */
  check?(): Promise<ProviderCheck>;
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
  /**
   * Where the plugin reports every answer it could not fully read (an unknown state, field shape,
   * error body or page shape), for the operator's drift report. The kit records most of it when
   * handed this: `StateWatch`, `createProviderClient` with the error table, `readCursor`, and
   * `ProviderDrift` for the rest (`docs/plugins.md`, "Reporting drift").
   */
  drift: DriftRecorder;
}

export type { ProviderErrorClass } from './error-class.js';

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
