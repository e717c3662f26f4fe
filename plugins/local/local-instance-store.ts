import type { DataSource } from 'typeorm';

/**
 * What the local provider stores per instance. `state` is the provider's stored fact:
 * - `pending`: accepted; becomes `outcome` (`running` or `failed`) at `runningAt`.
 * - `ghost`: the API says destroyed but the machine was left running (inventory `destroy: ghost`).
 * - `destroyed`: gone for good.
 */
export interface LocalInstanceRow {
  id: string;
  label: string;
  offerKey: string;
  gpuName: string;
  gpuCount: number;
  vramGb: number | null;
  publicKey: string;
  hostKey: string;
  state: 'pending' | 'ghost' | 'destroyed';
  outcome: 'running' | 'failed';
  sshPort: number | null;
  sandboxDir: string;
  /** The uid the instance's commands run as when the service runs as root; null until its first start and after destroy. */
  sandboxUid: number | null;
  createdAt: Date;
  runningAt: Date;
  destroyedAt: Date | null;
}

interface RawRow {
  id: string;
  label: string;
  offer_key: string;
  gpu_name: string;
  gpu_count: number | string;
  vram_gb: number | string | null;
  public_key: string;
  host_key: string;
  state: LocalInstanceRow['state'];
  outcome: LocalInstanceRow['outcome'];
  ssh_port: number | string | null;
  sandbox_dir: string;
  sandbox_uid: number | string | null;
  created_at: Date;
  running_at: Date;
  destroyed_at: Date | null;
}

const COLUMNS =
  'id, label, offer_key, gpu_name, gpu_count, vram_gb, public_key, host_key, state, outcome, ssh_port, sandbox_dir, sandbox_uid, created_at, running_at, destroyed_at';

function toRow(r: RawRow): LocalInstanceRow {
  return {
    id: r.id,
    label: r.label,
    offerKey: r.offer_key,
    gpuName: r.gpu_name,
    gpuCount: Number(r.gpu_count),
    vramGb: r.vram_gb === null ? null : Number(r.vram_gb),
    publicKey: r.public_key,
    hostKey: r.host_key,
    state: r.state,
    outcome: r.outcome,
    sshPort: r.ssh_port === null ? null : Number(r.ssh_port),
    sandboxDir: r.sandbox_dir,
    sandboxUid: r.sandbox_uid === null ? null : Number(r.sandbox_uid),
    createdAt: new Date(r.created_at),
    runningAt: new Date(r.running_at),
    destroyedAt: r.destroyed_at === null ? null : new Date(r.destroyed_at),
  };
}

const isDuplicate = (err: unknown) => {
  const e = err as { code?: string; driverError?: { code?: string } };
  return e.code === 'ER_DUP_ENTRY' || e.driverError?.code === 'ER_DUP_ENTRY';
};

// The lowest uid from the block's first that no row holds: the first itself, or one past a held
// uid whose successor is free. Both probes are lookups on the unique index.
const LOWEST_FREE_UID = `SELECT CASE
  WHEN NOT EXISTS (SELECT 1 FROM local_provider_instances WHERE sandbox_uid = ?) THEN ?
  ELSE (SELECT MIN(a.sandbox_uid) + 1 FROM local_provider_instances a
        WHERE a.sandbox_uid >= ?
          AND NOT EXISTS (SELECT 1 FROM local_provider_instances b WHERE b.sandbox_uid = a.sandbox_uid + 1))
  END AS uid`;

/** Raw-SQL access to `local_provider_instances`, the local provider's own "cloud database". */
export class LocalInstanceStore {
  constructor(private readonly ds: DataSource) {}

  async byId(id: string): Promise<LocalInstanceRow | null> {
    const rows: RawRow[] = await this.ds.query(`SELECT ${COLUMNS} FROM local_provider_instances WHERE id = ?`, [id]);
    return rows[0] ? toRow(rows[0]) : null;
  }

  async byLabel(label: string): Promise<LocalInstanceRow | null> {
    const rows: RawRow[] = await this.ds.query(`SELECT ${COLUMNS} FROM local_provider_instances WHERE label = ?`, [
      label,
    ]);
    return rows[0] ? toRow(rows[0]) : null;
  }

  /** Instances the API still reports (neither destroyed nor ghosted) whose label starts with `prefix`. */
  async listLive(prefix: string): Promise<LocalInstanceRow[]> {
    const like = `${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    const rows: RawRow[] = await this.ds.query(
      `SELECT ${COLUMNS} FROM local_provider_instances WHERE state = 'pending' AND label LIKE ? ORDER BY created_at, id`,
      [like],
    );
    return rows.map(toRow);
  }

  /**
   * Inserts unless the label is taken; returns the row that carries the label either way, so
   * two racing creates for one label end with one instance.
   */
  async insertOnce(row: LocalInstanceRow): Promise<{ row: LocalInstanceRow; inserted: boolean }> {
    try {
      await this.ds.query(
        `INSERT INTO local_provider_instances (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          row.id,
          row.label,
          row.offerKey,
          row.gpuName,
          row.gpuCount,
          row.vramGb,
          row.publicKey,
          row.hostKey,
          row.state,
          row.outcome,
          row.sshPort,
          row.sandboxDir,
          row.sandboxUid,
          row.createdAt,
          row.runningAt,
          row.destroyedAt,
        ],
      );
      return { row, inserted: true };
    } catch (err) {
      if (!isDuplicate(err)) throw err;
      const existing = await this.byLabel(row.label);
      if (!existing) throw err;
      return { row: existing, inserted: false };
    }
  }

  /** Compare-and-set of the SSH port, so two processes cannot both claim to serve an instance. */
  async claimPort(id: string, expected: number | null, port: number): Promise<boolean> {
    const res: { affectedRows?: number } = await this.ds.query(
      `UPDATE local_provider_instances SET ssh_port = ? WHERE id = ? AND ssh_port <=> ? AND state <> 'destroyed'`,
      [port, id, expected],
    );
    return (res.affectedRows ?? 0) > 0;
  }

  /**
   * The instance's sandbox uid, taking the lowest free one in [`first`, `last`] on first call.
   * The unique index on `sandbox_uid` decides between processes picking the same uid at once:
   * the loser sees a duplicate and looks again. Throws for a destroyed instance or a full block.
   */
  async allocateSandboxUid(id: string, first: number, last: number): Promise<number> {
    for (let attempt = 0; attempt < 50; attempt++) {
      const row = await this.byId(id);
      if (!row || row.state === 'destroyed')
        throw new Error(`local provider: instance ${id} does not exist; no uid for it`);
      if (row.sandboxUid !== null) return row.sandboxUid;
      const [{ uid }]: { uid: number | string | null }[] = await this.ds.query(LOWEST_FREE_UID, [first, first, first]);
      if (uid === null || Number(uid) > last)
        throw new Error(`local provider: all sandbox uids ${first}-${last} are taken`);
      try {
        await this.ds.query(
          `UPDATE local_provider_instances SET sandbox_uid = ? WHERE id = ? AND sandbox_uid IS NULL AND state <> 'destroyed'`,
          [Number(uid), id],
        );
      } catch (err) {
        if (!isDuplicate(err)) throw err;
      }
    }
    throw new Error(`local provider: could not allocate a sandbox uid for ${id}`);
  }

  /** Frees a destroyed instance's uid for the next instance; call once none of its processes is left. */
  async releaseSandboxUid(id: string): Promise<void> {
    await this.ds.query(`UPDATE local_provider_instances SET sandbox_uid = NULL WHERE id = ? AND state = 'destroyed'`, [
      id,
    ]);
  }

  /** Moves a live instance to `ghost` or `destroyed`; a ghost may still be destroyed for good. */
  async markDestroyed(id: string, state: 'ghost' | 'destroyed', at: Date): Promise<void> {
    await this.ds.query(
      `UPDATE local_provider_instances SET state = ?, destroyed_at = COALESCE(destroyed_at, ?) WHERE id = ? AND state <> 'destroyed'`,
      [state, at, id],
    );
  }
}
