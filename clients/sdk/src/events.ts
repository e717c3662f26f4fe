import type { components } from './generated/openapi.js';
import { GprApiError, GprNetworkError } from './errors.js';

/** One event of the caller's log: `{ id, type, createdAt, data }`; ids grow with time. */
export type GprEvent = components['schemas']['EventDto'];
/** `rental.active`, `rental.failed`, `credits.low`, ... */
export type EventType = components['schemas']['EventType'];

/** A page of events, oldest first; `nextAfter` is the next page's `after` (keep it even when the page is empty). */
export interface EventPage {
  data: GprEvent[];
  nextAfter: string;
}

/** One Server-Sent Event as the wire carries it. */
export interface SseMessage {
  id?: string;
  event?: string;
  data: string;
}

/**
 * Splits a Server-Sent Events body into messages: `id:`, `event:` and `data:` lines up to a blank
 * line; comments (`: heartbeat`) and messages without data are skipped, as the spec says.
 */
export async function* parseSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  let buffer = '';
  let msg: { id?: string; event?: string; data: string[] } = { data: [] };
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + (buffer.startsWith('\r\n', nl) ? 2 : 1));
        if (line === '') {
          if (msg.data.length) yield { id: msg.id, event: msg.event, data: msg.data.join('\n') };
          msg = { data: [] };
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'id') msg.id = value;
        else if (field === 'event') msg.event = value;
        else if (field === 'data') msg.data.push(value);
      }
      if (done) return;
    }
  } finally {
    // Also when the reader stops early: the connection is closed, not left open.
    await reader.cancel().catch(() => undefined);
  }
}

export interface StreamOptions {
  /** Start after this event id (e.g. a page's `nextAfter`); without it the stream starts with the next event. */
  after?: string;
  /** Ends the iteration (the open request is aborted). */
  signal?: AbortSignal;
  /** Called before each reconnection with the id it resumes after (the server ends a stream after at most 5 minutes). */
  onReconnect?: (lastId: string | undefined) => void;
}

interface StreamDeps {
  url: string;
  headers: Record<string, string>;
  fetch: typeof fetch;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
  });

/**
 * The caller's events as they are written: replays after `after`, then live. When the server
 * ends the stream, or the connection drops, it reconnects with `Last-Event-ID` set to the last id
 * received, so nothing is missed or repeated. A refusal (401, 403, 400) is thrown; 429 and 5xx are
 * retried with back-off. Ends when `signal` aborts.
 */
export async function* eventStream(deps: StreamDeps, opts: StreamOptions = {}): AsyncGenerator<GprEvent> {
  let lastId = opts.after;
  let failures = 0;
  for (let first = true; !opts.signal?.aborted; first = false) {
    if (!first) {
      await sleep(failures ? Math.min(30_000, 500 * 2 ** failures) : 200, opts.signal);
      if (opts.signal?.aborted) return;
      opts.onReconnect?.(lastId);
    }
    let res: Response;
    try {
      const headers: Record<string, string> = { ...deps.headers, Accept: 'text/event-stream' };
      if (lastId) headers['Last-Event-ID'] = lastId;
      res = await deps.fetch(deps.url, { headers, signal: opts.signal });
    } catch (err) {
      if (opts.signal?.aborted) return;
      if (++failures > 8)
        throw new GprNetworkError(`Cannot reach ${new URL(deps.url).origin}: ${(err as Error).message}`, deps.url, err);
      continue;
    }
    if (!res.ok || !res.body) {
      if (res.status === 429 || res.status >= 500) {
        await res.body?.cancel().catch(() => undefined);
        failures++;
        continue;
      }
      throw await GprApiError.fromResponse(res);
    }
    failures = 0;
    try {
      for await (const m of parseSse(res.body)) {
        const event = JSON.parse(m.data) as GprEvent;
        lastId = m.id ?? event.id;
        yield event;
      }
    } catch (err) {
      if (opts.signal?.aborted) return;
      if (err instanceof SyntaxError) throw err;
      failures++;
    }
  }
}
