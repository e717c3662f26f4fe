import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Store } from '../../db/store.js';
import { expressAuthentication } from '../../http/authentication.js';
import { enterFrom } from '../../http/push-limits.js';
import { principalOf } from '../keys/principal.js';
import type { Viewer } from '../keys/visibility.js';
import type { EventHub } from './event-hub.js';
import { isNumbered, visibleEvent, type EventsRepository, type NumberedEvent } from './events.repository.js';
import { EVENT_PAGE, parseAfter, toAccountEventDto } from './events.service.js';

export interface EventStreamOptions {
  /** Milliseconds between heartbeat comments, so proxies and clients see the stream alive. */
  heartbeatMs: number;
  /** Milliseconds after which the stream ends; the client reconnects with Last-Event-ID. */
  maxMs: number;
}

/** Bytes a client may leave unread before its stream is ended (it resumes from its last id). */
const MAX_UNREAD_BYTES = 1 << 20;

const PATH = /^\/api\/v1\/events\/?$/i;

/** Whether `req` asks for the event stream (the JSON page is the same path's default). */
export function wantsEventStream(req: Request): boolean {
  return (
    req.method === 'GET' &&
    PATH.test(req.path) &&
    req.accepts(['application/json', 'text/event-stream']) === 'text/event-stream'
  );
}

/**
 * `GET /api/v1/events` with `Accept: text/event-stream`: the caller's events as Server-Sent
 * Events, ahead of the generated routes, which answer the JSON paging (the default) and stay the
 * documented definition of the route. Authenticated as tsoa's bearer routes are, scope `read`,
 * under the same visibility rule. From `Last-Event-ID` or `after` it replays the log, then goes
 * live from the hub; without either it starts with the next event.
 *
 * Each stream holds a place of its client address (taken before the key is read) and one of its
 * key (the hub's), so one caller cannot hold the descriptors every request needs; over either
 * bound it is refused with 429. Open, it costs no query of its own: the heartbeat is a comment,
 * and the hub ends the streams of a revoked key within one tail period.
 */
export function eventStreamRoute(
  store: Store<{ events: EventsRepository }>,
  hub: EventHub,
  options: EventStreamOptions,
): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    if (!wantsEventStream(req)) return next();
    let release = () => {};
    try {
      if (hub.limits) release = enterFrom(hub.limits, req, res);
    } catch (err) {
      return next(err);
    }
    res.once('close', release);
    stream(store, hub, options, req, res).catch((err: unknown) => {
      if (!res.headersSent) next(err);
      else res.end();
    });
  };
}

async function stream(
  store: Store<{ events: EventsRepository }>,
  hub: EventHub,
  options: EventStreamOptions,
  req: Request,
  res: Response,
): Promise<void> {
  let gone = false;
  res.once('close', () => (gone = true));
  req.user = await expressAuthentication(req, 'bearer', ['read']);
  const viewer: Viewer = principalOf(req);
  const { keyId } = principalOf(req);
  const lastEventId = req.header('last-event-id');
  const after = parseAfter(
    lastEventId !== undefined && lastEventId !== ''
      ? lastEventId
      : typeof req.query.after === 'string'
        ? req.query.after
        : undefined,
  );

  // Listening before the log is read, so nothing falls between the replay and the live events.
  const sub = await hub.subscribe((e) => visibleEvent(viewer, e), { keyId });
  // The account number of the last event sent; null until one is when the stream starts from now.
  let sent = after;
  let replay: NumberedEvent[];
  try {
    replay = after === null ? [] : await store.read((r) => r.events.after(viewer, after, EVENT_PAGE.max));
  } catch (err) {
    sub.stop();
    throw err;
  }
  // A client gone while the key and the log were read leaves nothing listening behind it.
  if (gone) return sub.stop();

  let heartbeat: NodeJS.Timeout | undefined;
  let deadline: NodeJS.Timeout | undefined;
  const end = () => {
    sub.stop();
    clearInterval(heartbeat);
    clearTimeout(deadline);
    if (!res.writableEnded) res.end();
  };
  const write = (text: string) => {
    if (res.writableEnded) return;
    res.write(text);
    if (res.writableLength > MAX_UNREAD_BYTES) end();
  };
  const send = (e: NumberedEvent) => {
    if (sent !== null && BigInt(e.seq) <= BigInt(sent)) return;
    sent = e.seq;
    write(`id: ${e.seq}\nevent: ${e.type}\ndata: ${JSON.stringify(toAccountEventDto(e))}\n\n`);
  };

  res.on('close', end);
  req.socket.setTimeout(0);
  req.socket.setNoDelay(true);
  res.status(200);
  res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
  res.setHeader('Cache-Control', 'no-cache, no-store');
  res.setHeader('Connection', 'keep-alive');
  res.setHeader('X-Accel-Buffering', 'no');
  res.flushHeaders();
  heartbeat = setInterval(() => write(': heartbeat\n\n'), options.heartbeatMs);
  deadline = setTimeout(end, options.maxMs);

  // The log after the client's id, a page at a time, then whatever the hub has queued and brings.
  while (!sub.closed) {
    replay.forEach(send);
    if (replay.length < EVENT_PAGE.max) break;
    const from = sent!;
    replay = await store.read((r) => r.events.after(viewer, from, EVENT_PAGE.max));
  }
  while (!sub.closed) {
    const e = await sub.next(options.maxMs);
    // An event an older version wrote mid-upgrade has no number a client could resume after.
    if (e && isNumbered(e)) send(e);
  }
  end();
}
