import { createLogger, type Logger } from '../logger.js';
import {
  compactShape,
  MAX_DRIFT_SHAPES_PER_PROVIDER,
  shapeHash,
  type DriftKind,
  type DriftRecorder,
  type DriftSighting,
  type Shape,
} from './kit/drift.js';

/** One shape's sightings since the last write: what the store adds to its row. */
export interface DriftTally {
  provider: string;
  kind: DriftKind;
  where: string;
  shape: Shape;
  /** {@link shapeHash} of `shape`: with provider, kind and where, the row's key. */
  shapeHash: string;
  firstSeenAt: Date;
  lastSeenAt: Date;
  /** Sightings in this batch (added to the stored count). */
  seen: number;
}

/** What a write of a batch did: how many of its shapes the store refused, its provider being at the bound. */
export interface DriftWriteOutcome {
  refused: number;
}

/** Writes a batch of tallies, keeping at most `maxShapesPerProvider` shapes per provider; may throw. */
export type DriftSink = (batch: readonly DriftTally[], maxShapesPerProvider: number) => Promise<DriftWriteOutcome>;

interface Held {
  tally: DriftTally;
  /** Sightings not yet written. */
  pending: number;
}

export interface DriftLogOptions {
  logger?: Logger;
  /** The time sightings are stamped with (the service's clock). */
  now?: () => Date;
  maxShapesPerProvider?: number;
  /** How long after a sighting the batch is written, gathering the polls of that moment into one write. */
  flushDelayMs?: number;
  /** How long after a failed write it is tried again. */
  retryDelayMs?: number;
}

/**
 * The process's drift recorder: every plugin's sightings, deduplicated in memory by provider,
 * kind, where and shape, and written to the store in the background. `record` only counts, so it
 * never slows a provider call; a write gathers what came in during `flushDelayMs`; a failed write
 * is logged and tried again later with its counts kept. At most `maxShapesPerProvider` shapes are
 * kept per provider (and the store holds no more): past that, new shapes are counted as dropped
 * and logged once. Until the composition root attaches a sink (the store), it only counts.
 */
export class DriftLog implements DriftRecorder {
  private readonly held = new Map<string, Held>();
  private readonly shapesOf = new Map<string, number>();
  private readonly full = new Set<string>();
  private readonly logger: Logger;
  private readonly now: () => Date;
  private readonly max: number;
  private sink?: DriftSink;
  private timer?: NodeJS.Timeout;
  private chain: Promise<void> = Promise.resolve();
  private closed = false;
  /** Sightings of shapes past the bound, never kept. */
  dropped = 0;

  constructor(private readonly opts: DriftLogOptions = {}) {
    this.logger = opts.logger ?? createLogger('silent');
    this.now = opts.now ?? (() => new Date());
    this.max = opts.maxShapesPerProvider ?? MAX_DRIFT_SHAPES_PER_PROVIDER;
  }

  record(s: DriftSighting): void {
    try {
      const hash = shapeHash(s.shape);
      const key = `${s.provider}\u0000${s.kind}\u0000${s.where}\u0000${hash}`;
      const at = this.now();
      const known = this.held.get(key);
      if (known) {
        known.pending += 1;
        known.tally.lastSeenAt = at;
        known.tally.seen += 1;
      } else if (!this.admit(s.provider)) {
        this.dropped += 1;
        return;
      } else {
        const tally = { ...s, shapeHash: hash, firstSeenAt: at, lastSeenAt: at, seen: 1 };
        this.held.set(key, { tally, pending: 1 });
        this.logger.warn(
          { provider: s.provider, kind: s.kind, where: s.where, shape: compactShape(s.shape) },
          'a provider answered something its plugin could not fully read; recorded in the drift report (owner providers drift)',
        );
      }
      this.schedule(this.opts.flushDelayMs ?? 1000);
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'could not record a drift sighting');
    }
  }

  /** Whether a new shape of `provider` may be kept; logs once when its bound is reached. */
  private admit(provider: string): boolean {
    const n = this.shapesOf.get(provider) ?? 0;
    if (n < this.max) {
      this.shapesOf.set(provider, n + 1);
      return true;
    }
    if (!this.full.has(provider)) {
      this.full.add(provider);
      this.logger.warn(
        { provider, maxShapes: this.max },
        'the drift report holds as many shapes of this provider as it keeps; new ones are not recorded',
      );
    }
    return false;
  }

  /** Where batches are written from now on (the store); what is held is written soon. */
  attach(sink: DriftSink): void {
    this.sink = sink;
    if ([...this.held.values()].some((h) => h.pending > 0)) this.schedule(0);
  }

  private schedule(ms: number): void {
    if (!this.sink || this.timer || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, ms);
    this.timer.unref?.();
  }

  /** Writes every sighting not yet written; resolves when done, never rejects (a failure is logged and kept). */
  flush(): Promise<void> {
    this.chain = this.chain.then(() => this.writeOnce());
    return this.chain;
  }

  private async writeOnce(): Promise<void> {
    const sink = this.sink;
    if (!sink) return;
    const due = [...this.held.values()].filter((h) => h.pending > 0);
    if (due.length === 0) return;
    const batch = due.map((h) => ({ ...h.tally, seen: h.pending }));
    for (const h of due) h.pending = 0;
    try {
      const { refused } = await sink(batch, this.max);
      if (refused > 0)
        this.logger.warn(
          { refused, maxShapes: this.max },
          'the stored drift report is full for a provider; shapes beyond it are not stored',
        );
    } catch (err) {
      due.forEach((h, i) => (h.pending += batch[i].seen));
      this.logger.warn(
        { err: (err as Error).message, shapes: batch.length },
        'could not write the drift report; keeping its counts and trying again later',
      );
      this.schedule(this.opts.retryDelayMs ?? 30_000);
    }
  }

  /** Every shape this process has seen, with its counts since it started. */
  seen(): DriftTally[] {
    return [...this.held.values()].map((h) => ({ ...h.tally }));
  }

  /** Writes what is held and stops scheduling writes. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.flush();
  }
}
