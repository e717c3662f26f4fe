/*
 * What bench/events.ts and its two child processes say to each other over IPC: the load process
 * (bench/events-load.ts), which holds the streams and waiting reads, and the probe preloaded into
 * the api process (bench/events-api.ts), which reports the api's memory, statements and requests.
 */

/** One bench key as the load process uses it: its bearer header, its account, and the rental its waiting reads wait on. */
export interface LoadKey {
  auth: string;
  accountId: string;
  rentalId: string;
}

/** What the bench asks the load process; each request is answered by one message. */
export type LoadRequest =
  | { type: 'setup'; base: string; keys: LoadKey[]; openRate: number }
  /** Opens event streams until `total` are open (stream i on key i mod K); answered once each has its headers. */
  | { type: 'streams'; total: number }
  /** Starts waiting reads of `waitSeconds` until `total` are held, each sent again when it ends; answered once all are sent. */
  | { type: 'waits'; total: number; waitSeconds: number }
  /** Closes every stream and waiting read and stops sending them again. */
  | { type: 'close' }
  | { type: 'counters' }
  /**
   * The events of one commit: `seqs` maps each account an event was written for to its number
   * there, `commitAt` is when the commit returned (performance.timeOrigin + performance.now()).
   * Answered once every stream of those accounts has received its event, or after `timeoutMs`.
   */
  | { type: 'expect'; commitAt: number; seqs: Record<string, string>; timeoutMs: number };

/** What the load process has seen so far. */
export interface LoadCounters {
  openStreams: number;
  heartbeats: number;
  frames: number;
  /** Streams that ended while wanted (the server's 5-minute bound, or an error) and were opened again with Last-Event-ID. */
  streamsReopened: number;
  waitsAnswered: number;
  /** Waiting reads and stream opens that got anything but their answer, by status (or `error`). */
  failures: Record<string, number>;
}

export type LoadMessage =
  | { type: 'ready' }
  | { type: 'setup-done' }
  | { type: 'streams-open'; open: number; ms: number; failures: Record<string, number> }
  | { type: 'waits-sent'; sent: number; ms: number }
  | { type: 'closed' }
  | { type: 'counters'; counters: LoadCounters }
  /** Milliseconds from the commit to each stream's arrival of its event; `missing` streams never got it. */
  | { type: 'arrivals'; latencies: number[]; missing: number };

/** What the bench asks the probe in the api process. */
export interface ProbeRequest {
  type: 'probe';
  /** Collect garbage first (the api runs with --expose-gc), so memory figures do not depend on when V8 last did. */
  gc?: boolean;
  /** Start the event-loop delay histogram afresh after answering. */
  resetLoop?: boolean;
}

/** The probe's answer: the api process as it stands. */
export interface ProbeStats {
  type: 'probe-stats';
  memory: NodeJS.MemoryUsage;
  /** Statements sent on every mysql2 connection of the api process so far. */
  statements: number;
  /** The same by the statement's first words. */
  byKind: Record<string, number>;
  /**
   * The counts just before the hub's latest read of the tail, and how many such reads there have
   * been: between two marks lie whole ticks of the hub, each beginning with its tail read.
   */
  mark: { tails: number; statements: number; byKind: Record<string, number> };
  /** Event streams and waiting reads the api has received and not yet answered or lost. */
  inflight: { streams: number; waits: number };
  /** Event streams and waiting reads the api has received so far. */
  received: { streams: number; waits: number };
  /** Event-loop delay since the last reset, ms. */
  loop: { p50: number; p99: number; max: number };
}
