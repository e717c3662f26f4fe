import { randomUUID } from 'node:crypto';
import type { Logger } from '../../src/logger.js';
import {
  DEFAULT_MACHINE_SETTINGS,
  type CreateResult,
  type InstanceInfo,
  type InstanceState,
  type MachineSettings,
  type OfferRef,
  type Provider,
  type ProviderCapabilities,
  type ProviderDeps,
  type ProviderOffer,
} from '../../src/providers/provider.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { fingerprintOfKey } from '../../src/providers/ssh-probe.js';
import type { ProviderCheck } from '../../src/providers/provider-check.js';
import { checkLocal } from './check.js';
import { defaultInventory } from './default-inventory.js';
import { offerCapabilities, readInventoryFile, type DestroyMode, type LocalInventory } from './inventory.js';
import { LocalInstanceStore, type LocalInstanceRow } from './local-instance-store.js';
import {
  MachineRuntime,
  endpointsOf,
  machineEtc,
  machineRecord,
  machineStateDir,
  readHostPorts,
  readMachineRecord,
  removeMachineState,
  writeMachineRecord,
  type MachineRecord,
} from './machine.js';
import { hasMachineNamespaces, stopMachine } from './machine-namespaces.js';
import {
  killSandboxProcesses,
  prepareSandbox,
  removeSandbox,
  sandboxDirFor,
  sandboxOwner,
  shellIsolation,
  usesSandboxUids,
  type SandboxOwner,
  type ShellIsolation,
} from './sandbox.js';
import type { UidClaim } from './uid-claims.js';
import { LOCAL_SSH_USER, SshInstanceServer } from './ssh-instance-server.js';

export interface LocalOptions {
  /** Inventory JSON path; re-read on every call so edits take effect without a restart. */
  inventoryPath?: string;
  allowProduction: boolean;
  /** The uids (inclusive) machines run as when the service runs as root; no other service on the host may use them. */
  sandboxUids: { first: number; last: number };
  /** Where the services of this host claim their blocks of sandbox uids (see `uid-claims.ts`). */
  sandboxUidClaimsDir: string;
}

/** The local provider's own state names, as its "API" would report them. */
type LocalState = 'provisioning' | 'running' | 'error' | 'destroyed';

/** The one table from the local provider's states to ours. */
const STATE_MAP: Record<LocalState, InstanceState> = {
  provisioning: 'pending',
  running: 'running',
  error: 'failed',
  destroyed: 'gone',
};

const SSH_HOST = '127.0.0.1';
const MAX_LABEL_LENGTH = 191;

/**
 * The reference provider: a simulated GPU cloud whose instances are real SSH servers on
 * 127.0.0.1, one sandbox directory each, with the machine settings a cloud honours: the image
 * (recorded and shown in the machine, nothing pulled), environment variables, a startup script
 * run once, exposed ports forwarded from this host's loopback, and the disk size (recorded).
 *
 * Instance state lives in `local_provider_instances`, playing the cloud's database: a new
 * process (or another worker) answers `findByLabel`/`get` for instances an earlier one created,
 * and brings a running instance's SSH server back up on first use, on its old port when free.
 * Misbehaviour is driven by the inventory file, per offer:
 * `create`: `ok | unavailable | ambiguous-created | ambiguous-none | fail`,
 * `provisionSeconds`: time from create to running (or to failed under `fail`),
 * `destroy`: `ok | ignore | ghost` (read when destroy is called; see {@link DestroyMode}).
 */
export class LocalProvider implements Provider {
  readonly id = 'local';
  readonly capabilities: ProviderCapabilities = { labels: true, sshKeyPerInstance: true, listInstances: true };

  private readonly store: LocalInstanceStore;
  private readonly log: Logger;
  private readonly servers = new Map<string, SshInstanceServer>();
  private readonly starting = new Map<string, Promise<number | null>>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly runtimes = new Map<string, MachineRuntime>();
  private readonly records = new Map<string, MachineRecord>();
  private readonly hostKeys = new Map<string, string>();
  private closed = false;

  /**
   * @param isolation how renters' shells are cut off from this host; by default the strongest it
   * allows, probed once per process.
   * @param uidClaim this process's claim on `options.sandboxUids`, released by {@link close}.
   */
  constructor(
    private readonly options: LocalOptions,
    private readonly deps: ProviderDeps,
    private readonly isolation: ShellIsolation = shellIsolation(),
    private readonly uidClaim?: UidClaim,
  ) {
    this.store = new LocalInstanceStore(deps.dataSource);
    this.log = deps.logger.child({ provider: 'local' });
    if (isolation.mode === 'none') {
      this.log.warn(
        { reason: isolation.reason },
        "local provider: renters' shells share this host's network and can reach every service on it, the database included; use the local provider for development only",
      );
    } else if (!hasMachineNamespaces(isolation)) {
      this.log.warn(
        'local provider: util-linux `nsenter` was not found; each command runs in namespaces of its own and exposed ports answer 502',
      );
    }
  }

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
        capabilities: offerCapabilities(o),
        ...(o.trafficPrice ? { trafficPrice: o.trafficPrice } : {}),
      }));
  }

  /**
   * A label already in use returns its instance, even a destroyed one (as cloud idempotency
   * tokens do), so a retried create can never make a second machine. The machine's settings are
   * recorded before its row, so whichever process boots it finds them.
   */
  async create(
    label: string,
    offer: OfferRef,
    sshPublicKey: string,
    machine: MachineSettings = DEFAULT_MACHINE_SETTINGS,
  ): Promise<CreateResult> {
    if (label.length === 0 || label.length > MAX_LABEL_LENGTH) {
      throw new Error(`local provider: label must be 1-${MAX_LABEL_LENGTH} characters`);
    }
    SshInstanceServer.assertPublicKey(sshPublicKey);
    const existing = await this.store.byLabel(label);
    if (existing) return { kind: 'created', instanceId: existing.id };

    const o = (await this.inventory()).offers.find((x) => x.key === offer.key);
    if (!o || o.available === false)
      return { kind: 'unavailable', reason: `offer "${offer.key}" is not offered any more` };
    const mode = o.create ?? 'ok';
    if (mode === 'unavailable') return { kind: 'unavailable', reason: `no capacity for offer "${o.key}"` };
    if (mode === 'ambiguous-none')
      return { kind: 'ambiguous', reason: 'simulated timeout: the request never reached the provider' };

    const id = randomUUID();
    const now = this.deps.clock.now();
    const provisionMs = Math.round((o.provisionSeconds ?? 3) * 1000);
    const record = machineRecord(machine, o.actualGpuCount ?? o.gpuCount, o.storageGb ?? null);
    await writeMachineRecord(sandboxDirFor(id), record);
    const { row, inserted } = await this.store.insertOnce({
      id,
      label,
      offerKey: o.key,
      gpuName: o.name,
      gpuCount: o.gpuCount,
      vramGb: o.vramGb,
      publicKey: sshPublicKey.trim(),
      // The shared generator redraws the rare ed25519 key ssh2 cannot parse back.
      hostKey: generateDeploymentKeyPair('local-host-key').privateKey,
      state: 'pending',
      outcome: mode === 'fail' ? 'failed' : 'running',
      sshPort: null,
      sandboxDir: sandboxDirFor(id),
      sandboxUid: null,
      createdAt: now,
      runningAt: new Date(now.getTime() + provisionMs),
      destroyedAt: null,
    });
    if (inserted) {
      this.records.set(row.id, record);
      this.log.info({ instanceId: row.id, label, offerKey: o.key, mode }, 'local instance created');
      this.scheduleBoot(row);
    } else {
      // Another create of this label won; its instance has its own record.
      await removeMachineState(sandboxDirFor(id));
    }
    if (mode === 'ambiguous-created') {
      return { kind: 'ambiguous', reason: 'simulated lost response: the instance was created' };
    }
    return { kind: 'created', instanceId: row.id };
  }

  async findByLabel(label: string): Promise<InstanceInfo | null> {
    const row = await this.store.byLabel(label);
    if (!row) return null;
    if (row.state !== 'pending') {
      await this.reapIfDestroyed(row);
      return null;
    }
    return this.info(row);
  }

  async get(instanceId: string): Promise<InstanceInfo> {
    const row = await this.store.byId(instanceId);
    if (!row || row.state !== 'pending') {
      if (row) await this.reapIfDestroyed(row);
      return { instanceId, label: row?.label ?? '', state: 'gone', providerState: 'destroyed' };
    }
    return this.info(row);
  }

  async destroy(instanceId: string): Promise<void> {
    const row = await this.store.byId(instanceId);
    if (!row) return;
    const mode = row.state === 'destroyed' ? 'ok' : await this.destroyMode(row.offerKey);
    if (mode === 'ignore') {
      this.log.warn({ instanceId }, 'local instance destroy ignored (inventory destroy: ignore)');
      return;
    }
    if (mode === 'ghost') {
      if (row.state === 'pending') {
        // Make sure the machine the API is about to forget is actually up and reachable.
        if (this.localState(row) === 'running') await this.ensureServer(row);
        await this.store.markDestroyed(instanceId, 'ghost', this.deps.clock.now());
        this.log.warn(
          { instanceId },
          'local instance ghosted: reported destroyed, SSH left running (inventory destroy: ghost)',
        );
      }
      return;
    }
    // Recorded first, so a server of this instance in any other process refuses logins from now on.
    await this.store.markDestroyed(instanceId, 'destroyed', this.deps.clock.now());
    await this.teardown(row);
    // Read again: another process may have started the machine (and taken its uid) meanwhile.
    const uid = (await this.store.byId(instanceId))?.sandboxUid ?? null;
    if (uid !== null) {
      // The uid goes back to the pool only once nothing runs under it, here or in another process.
      await killSandboxProcesses(sandboxOwner(uid));
      await this.store.releaseSandboxUid(instanceId);
    }
    if (row.state !== 'destroyed') this.log.info({ instanceId, label: row.label }, 'local instance destroyed');
  }

  async listInstances(): Promise<InstanceInfo[]> {
    const rows = await this.store.listLive(this.deps.labelPrefix);
    return Promise.all(rows.map((r) => this.info(r)));
  }

  /** Trivially usable: nothing to sign in to; the check reads the inventory (`check.ts`). */
  check(): Promise<ProviderCheck> {
    return checkLocal(this);
  }

  /** Stops every SSH server of this process; the instances themselves live on in the table. */
  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    await Promise.allSettled([...this.starting.values()]);
    const servers = [...this.servers.values()];
    this.servers.clear();
    const runtimes = [...this.runtimes.values()];
    this.runtimes.clear();
    // The machines themselves run on, as cloud machines do while their API restarts.
    await Promise.all([...servers.map((s) => s.close()), ...runtimes.map((r) => r.close())]);
    await this.uidClaim?.release();
  }

  private localState(row: LocalInstanceRow): LocalState {
    if (row.state !== 'pending') return 'destroyed';
    if (this.deps.clock.now().getTime() < row.runningAt.getTime()) return 'provisioning';
    return row.outcome === 'failed' ? 'error' : 'running';
  }

  private async info(row: LocalInstanceRow): Promise<InstanceInfo> {
    const local = this.localState(row);
    const info: InstanceInfo = { instanceId: row.id, label: row.label, state: STATE_MAP[local], providerState: local };
    if (local === 'provisioning') {
      // A custom image "downloads" for the first half of provisioning; the rest is boot.
      const half = row.createdAt.getTime() + (row.runningAt.getTime() - row.createdAt.getTime()) / 2;
      const pulling = (await this.recordOf(row)).image !== null && this.deps.clock.now().getTime() < half;
      info.startupPhase = pulling ? 'pulling_image' : 'booting';
    }
    if (local === 'running') {
      const port = await this.ensureServer(row);
      if (port !== null) {
        info.ssh = { host: SSH_HOST, port, user: LOCAL_SSH_USER };
        // As a cloud's API would report it: the key the instance's server shows, whoever serves it.
        info.sshHostKey = this.hostKeyOf(row);
        const endpoints = endpointsOf(await this.recordOf(row), await readHostPorts(row.sandboxDir));
        if (endpoints) info.endpoints = endpoints;
      }
    }
    return info;
  }

  /** Fingerprint of the instance's host key (its public half), parsed once per process. */
  private hostKeyOf(row: LocalInstanceRow): string {
    let fp = this.hostKeys.get(row.id);
    if (!fp) {
      fp = fingerprintOfKey(row.hostKey);
      this.hostKeys.set(row.id, fp);
    }
    return fp;
  }

  /** What runs on the instance's machine; the defaults for an instance recorded before machines had settings. */
  private async recordOf(row: LocalInstanceRow): Promise<MachineRecord> {
    let rec = this.records.get(row.id);
    if (!rec) {
      rec = (await readMachineRecord(row.sandboxDir)) ?? machineRecord(DEFAULT_MACHINE_SETTINGS, row.gpuCount, null);
      this.records.set(row.id, rec);
    }
    return rec;
  }

  private async destroyMode(offerKey: string): Promise<DestroyMode> {
    try {
      const o = (await this.inventory()).offers.find((x) => x.key === offerKey);
      return o?.destroy ?? 'ok';
    } catch (err) {
      // A broken inventory file must not keep machines alive; destroying is the safe default.
      this.log.warn({ err }, 'local inventory unreadable at destroy; destroying normally');
      return 'ok';
    }
  }

  /** Brings the SSH server up when provisioning ends, as a cloud VM boots without being polled. */
  private scheduleBoot(row: LocalInstanceRow): void {
    if (row.outcome !== 'running' || this.closed) return;
    const delay = Math.max(0, row.runningAt.getTime() - this.deps.clock.now().getTime());
    const timer = setTimeout(() => {
      this.timers.delete(row.id);
      void this.bootIfDue(row.id);
    }, delay);
    timer.unref();
    this.timers.set(row.id, timer);
  }

  private async bootIfDue(instanceId: string): Promise<void> {
    try {
      const row = await this.store.byId(instanceId);
      // With a manual clock the timer can fire "early"; the first get() after the clock moves boots it.
      if (row && this.localState(row) === 'running') await this.ensureServer(row);
    } catch (err) {
      if (!this.closed) this.log.warn({ err, instanceId }, 'local instance boot failed; will retry on next get');
    }
  }

  /** Port of the instance's SSH server, starting it in this process when nobody serves it. */
  private ensureServer(row: LocalInstanceRow): Promise<number | null> {
    const running = this.servers.get(row.id);
    if (running?.port !== undefined) return Promise.resolve(running.port);
    if (this.closed) return Promise.resolve(null);
    let p = this.starting.get(row.id);
    if (!p) {
      p = this.startServer(row).finally(() => this.starting.delete(row.id));
      this.starting.set(row.id, p);
    }
    return p;
  }

  private async isAlive(id: string): Promise<boolean> {
    const r = await this.store.byId(id);
    return r !== null && r.state !== 'destroyed';
  }

  private onDead(row: LocalInstanceRow): void {
    void this.teardown(row).catch((err) =>
      this.log.warn({ err, instanceId: row.id }, 'local instance teardown failed'),
    );
  }

  private newServer(
    row: LocalInstanceRow,
    owner: SandboxOwner | undefined,
    machine: MachineRuntime,
  ): SshInstanceServer {
    return new SshInstanceServer({
      instanceId: row.id,
      hostKey: row.hostKey,
      authorizedKey: row.publicKey,
      sandboxDir: row.sandboxDir,
      owner,
      isolation: this.isolation,
      shell: (args) => machine.shell(args),
      logger: this.log,
      isAlive: () => this.isAlive(row.id),
      onDead: () => this.onDead(row),
    });
  }

  /**
   * As root, the instance's own uid: allocated on its first start, kept across restarts and
   * repairs; otherwise none (shells keep the service's unprivileged user).
   */
  private async ownerFor(row: LocalInstanceRow): Promise<SandboxOwner | undefined> {
    if (!usesSandboxUids()) return undefined;
    const uid =
      row.sandboxUid ??
      (await this.store.allocateSandboxUid(row.id, this.options.sandboxUids.first, this.options.sandboxUids.last));
    return sandboxOwner(uid);
  }

  private async startServer(row: LocalInstanceRow): Promise<number | null> {
    const owner = await this.ownerFor(row);
    const record = await this.recordOf(row);
    const gpus = { instanceId: row.id, name: row.gpuName, count: record.gpuCount, vramGb: row.vramGb };
    await prepareSandbox(row.sandboxDir, gpus, owner, machineEtc(record, row.sandboxDir));
    const machine = new MachineRuntime({
      instanceId: row.id,
      sandboxDir: row.sandboxDir,
      owner,
      isolation: this.isolation,
      record,
      user: LOCAL_SSH_USER,
      logger: this.log,
      isAlive: () => this.isAlive(row.id),
      onDead: () => this.onDead(row),
    });
    let server = this.newServer(row, owner, machine);
    let port: number;
    if (row.sshPort === null) {
      port = await server.listen(0);
    } else {
      try {
        // A restarted VM keeps its address; reuse the recorded port when it is free.
        port = await server.listen(row.sshPort);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
        await server.close();
        if (await SshInstanceServer.isServing(row.sshPort, row.id)) return row.sshPort;
        server = this.newServer(row, owner, machine);
        port = await server.listen(0);
      }
    }
    if (port !== row.sshPort && !(await this.store.claimPort(row.id, row.sshPort, port))) {
      // Another process claimed the instance first; its server is the instance's.
      await server.close();
      const fresh = await this.store.byId(row.id);
      return fresh && fresh.state !== 'destroyed' ? fresh.sshPort : null;
    }
    if (this.closed) {
      await server.close();
      return null;
    }
    // This process serves the machine now: it brings up the rest of it.
    try {
      await machine.boot();
    } catch (err) {
      await Promise.all([server.close(), machine.close()]);
      throw err;
    }
    this.servers.set(row.id, server);
    this.runtimes.set(row.id, machine);
    this.log.info({ instanceId: row.id, port }, 'local instance ssh server listening');
    return port;
  }

  private async reapIfDestroyed(row: LocalInstanceRow): Promise<void> {
    if (row.state === 'destroyed' && (this.servers.has(row.id) || this.starting.has(row.id))) await this.teardown(row);
  }

  /**
   * Closes the instance's server and port forwards in this process (waiting out a start in
   * flight), stops its machine wherever it runs and wipes its disk.
   */
  private async teardown(row: LocalInstanceRow): Promise<void> {
    const timer = this.timers.get(row.id);
    if (timer) clearTimeout(timer);
    this.timers.delete(row.id);
    await this.starting.get(row.id)?.catch(() => null);
    const server = this.servers.get(row.id);
    this.servers.delete(row.id);
    const machine = this.runtimes.get(row.id);
    this.runtimes.delete(row.id);
    await Promise.all([server?.close(), machine?.close()]);
    await stopMachine(machineStateDir(row.sandboxDir));
    await removeSandbox(row.sandboxDir);
    await removeMachineState(row.sandboxDir);
    this.records.delete(row.id);
    this.hostKeys.delete(row.id);
  }
}
