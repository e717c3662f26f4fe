import type {
  DriftCounts,
  DriftRecord,
  ProviderDriftRepository,
} from '../../../src/modules/inventory/provider-drift.repository.js';
import type { DriftTally, DriftWriteOutcome } from '../../../src/providers/drift-log.js';
import { shapeText } from '../../../src/providers/kit/drift.js';
import type { MemoryTables } from './memory-store.js';

/** A row of `provider_drift` as the memory store keeps it (the shape as its canonical text, as stored). */
interface DriftRow extends Omit<DriftRecord, 'shape'> {
  shapeHash: string;
  shape: string;
}

const keyOf = (r: { provider: string; kind: string; where: string; shapeHash: string }) =>
  `${r.provider}\u0000${r.kind}\u0000${r.where}\u0000${r.shapeHash}`;

/** Text compared as the utf8mb4_bin collation does (code order, for ASCII). */
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** `provider_drift` in memory, keyed as its primary key is. */
export class MemoryProviderDriftRepository implements ProviderDriftRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get rows() {
    return this.tables.table<DriftRow>('provider_drift');
  }

  async record(batch: readonly DriftTally[], maxShapesPerProvider: number): Promise<DriftWriteOutcome> {
    let refused = 0;
    for (const t of batch) {
      const key = keyOf(t);
      const had = this.rows.get(key);
      if (had) {
        this.rows.update(key, {
          seen: had.seen + t.seen,
          firstSeenAt: t.firstSeenAt < had.firstSeenAt ? t.firstSeenAt : had.firstSeenAt,
          lastSeenAt: t.lastSeenAt > had.lastSeenAt ? t.lastSeenAt : had.lastSeenAt,
        });
      } else if (this.rows.where((r) => r.provider === t.provider).length >= maxShapesPerProvider) {
        refused += 1;
      } else {
        this.rows.insert(key, {
          provider: t.provider,
          kind: t.kind,
          where: t.where,
          shapeHash: t.shapeHash,
          shape: shapeText(t.shape),
          firstSeenAt: t.firstSeenAt,
          lastSeenAt: t.lastSeenAt,
          seen: t.seen,
        });
      }
    }
    return { refused };
  }

  async list(provider?: string): Promise<DriftRecord[]> {
    return this.rows
      .where((r) => provider === undefined || r.provider === provider)
      .sort(
        (a, b) =>
          cmp(a.provider, b.provider) ||
          cmp(a.kind, b.kind) ||
          cmp(a.where, b.where) ||
          a.firstSeenAt.getTime() - b.firstSeenAt.getTime() ||
          cmp(a.shapeHash, b.shapeHash),
      )
      .map(({ shapeHash: _hash, shape, ...r }) => ({ ...r, shape: JSON.parse(shape) as DriftRecord['shape'] }));
  }

  async counts(): Promise<Map<string, DriftCounts>> {
    const out = new Map<string, DriftCounts>();
    for (const r of this.rows.where(() => true)) {
      const c = out.get(r.provider) ?? { shapes: 0, seen: 0 };
      out.set(r.provider, { shapes: c.shapes + 1, seen: c.seen + r.seen });
    }
    return out;
  }
}
