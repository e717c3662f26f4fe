import type { Executor } from '../../db/mysql-store.js';
import type { DriftTally, DriftWriteOutcome } from '../../providers/drift-log.js';
import { shapeText, type DriftKind, type Shape } from '../../providers/kit/drift.js';

// The only code that reads or writes `provider_drift`: the drift report, one row per shape of an
// answer a plugin could not fully read, keyed by provider, kind, call and shape hash.

/** One recorded shape, as the report lists it. */
export interface DriftRecord {
  provider: string;
  kind: DriftKind;
  /** The call (a template) or, for a state, the field the state table reads. */
  where: string;
  shape: Shape;
  firstSeenAt: Date;
  lastSeenAt: Date;
  /** Sightings in all, by every process. */
  seen: number;
}

/** What the report holds of one provider: its distinct shapes and their sightings in all. */
export interface DriftCounts {
  shapes: number;
  seen: number;
}

/** The drift report: the providers' answers their plugins could not fully read, once per shape. */
export interface ProviderDriftRepository {
  /**
   * Adds each tally's sightings to its shape's row (its count grows, its first and last sightings
   * widen), creating the row while its provider holds fewer than `maxShapesPerProvider` shapes; a
   * new shape of a provider at the bound is refused and counted in the outcome. Several processes
   * meeting new shapes at one moment may each add theirs: the bound holds to within those.
   */
  record(batch: readonly DriftTally[], maxShapesPerProvider: number): Promise<DriftWriteOutcome>;
  /** Every recorded shape (of `provider` alone when given), by provider, kind, call and first sighting. */
  list(provider?: string): Promise<DriftRecord[]>;
  /** Each provider with recorded shapes: how many, and their sightings in all. */
  counts(): Promise<Map<string, DriftCounts>>;
}

const keyOf = (r: { provider: string; kind: string; where: string; shapeHash: string }) =>
  `${r.provider}\u0000${r.kind}\u0000${r.where}\u0000${r.shapeHash}`;

interface DriftRow {
  provider: string;
  kind: DriftKind;
  call_site: string;
  shape: string;
  first_seen_at: Date;
  last_seen_at: Date;
  seen: number | string;
}

const COLUMNS = 'provider, kind, call_site, shape, first_seen_at, last_seen_at, seen';

export class MysqlProviderDriftRepository implements ProviderDriftRepository {
  constructor(private readonly sql: Executor) {}

  async record(batch: readonly DriftTally[], maxShapesPerProvider: number): Promise<DriftWriteOutcome> {
    if (batch.length === 0) return { refused: 0 };
    const providers = [...new Set(batch.map((t) => t.provider))];
    const stored: { provider: string; kind: string; call_site: string; shape_hash: string }[] = await this.sql.query(
      `SELECT provider, kind, call_site, shape_hash FROM provider_drift WHERE provider IN (${providers.map(() => '?').join(', ')})`,
      providers,
    );
    const known = new Set(stored.map((r) => keyOf({ ...r, where: r.call_site, shapeHash: r.shape_hash })));
    const shapes = new Map<string, number>();
    for (const r of stored) shapes.set(r.provider, (shapes.get(r.provider) ?? 0) + 1);
    let refused = 0;
    for (const t of batch) {
      if (!known.has(keyOf(t))) {
        const n = shapes.get(t.provider) ?? 0;
        if (n >= maxShapesPerProvider) {
          refused += 1;
          continue;
        }
        shapes.set(t.provider, n + 1);
        known.add(keyOf(t));
      }
      await this.sql.query(
        `INSERT INTO provider_drift (provider, kind, call_site, shape_hash, shape, first_seen_at, last_seen_at, seen)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)
           ON DUPLICATE KEY UPDATE seen = seen + VALUES(seen), first_seen_at = LEAST(first_seen_at, VALUES(first_seen_at)),
             last_seen_at = GREATEST(last_seen_at, VALUES(last_seen_at))`,
        [t.provider, t.kind, t.where, t.shapeHash, shapeText(t.shape), t.firstSeenAt, t.lastSeenAt, t.seen],
      );
    }
    return { refused };
  }

  async list(provider?: string): Promise<DriftRecord[]> {
    const rows: DriftRow[] =
      provider === undefined
        ? await this.sql.query(
            `SELECT ${COLUMNS} FROM provider_drift ORDER BY provider, kind, call_site, first_seen_at, shape_hash`,
          )
        : await this.sql.query(
            `SELECT ${COLUMNS} FROM provider_drift WHERE provider = ? ORDER BY kind, call_site, first_seen_at, shape_hash`,
            [provider],
          );
    return rows.map((r) => ({
      provider: r.provider,
      kind: r.kind,
      where: r.call_site,
      shape: JSON.parse(r.shape) as Shape,
      firstSeenAt: new Date(r.first_seen_at),
      lastSeenAt: new Date(r.last_seen_at),
      seen: Number(r.seen),
    }));
  }

  async counts(): Promise<Map<string, DriftCounts>> {
    const rows: { provider: string; shapes: number | string; seen: number | string }[] = await this.sql.query(
      `SELECT provider, COUNT(*) AS shapes, SUM(seen) AS seen FROM provider_drift GROUP BY provider`,
    );
    return new Map(rows.map((r) => [r.provider, { shapes: Number(r.shapes), seen: Number(r.seen) }]));
  }
}
