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
  created_at: Date;
  running_at: Date;
  destroyed_at: Date | null;
}

const COLUMNS =
  'id, label, offer_key, gpu_name, gpu_count, vram_gb, public_key, host_key, state, outcome, ssh_port, sandbox_dir, created_at, running_at, destroyed_at';

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
    createdAt: new Date(r.created_at),
    runningAt: new Date(r.running_at),
    destroyedAt: r.destroyed_at === null ? null : new Date(r.destroyed_at),
  };
}

const isDuplicate = (err: unknown) => {
  const e = err as { code?: string; driverError?: { code?: string } };
  return e.code === 'ER_DUP_ENTRY' || e.driverError?.code === 'ER_DUP_ENTRY';
};

/** Raw-SQL access to `local_provider_instances`, the local provider's own "cloud database". */
export class LocalInstanceStore {
  constructor(private readonly ds: DataSource) {}

  async byId(id: string): Promise<LocalInstanceRow | null> {
    const rows: RawRow[] = await this.ds.query(`SELECT ${COLUMNS} FROM local_provider_instances WHERE id = ?`, [id]);
    return rows[0] ? toRow(rows[0]) : null;
  }

  async byLabel(label: string): Promise<LocalInstanceRow | null> {
    const rows: RawRow[] = await this.ds.query(`SELECT ${COLUMNS} FROM local_provider_instances WHERE label = ?`, [label]);
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
        `INSERT INTO local_provider_instances (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
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

  /** Moves a live instance to `ghost` or `destroyed`; a ghost may still be destroyed for good. */
  async markDestroyed(id: string, state: 'ghost' | 'destroyed', at: Date): Promise<void> {
    await this.ds.query(
      `UPDATE local_provider_instances SET state = ?, destroyed_at = COALESCE(destroyed_at, ?) WHERE id = ? AND state <> 'destroyed'`,
      [state, at, id],
    );
  }
}
