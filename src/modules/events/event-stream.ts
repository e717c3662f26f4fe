import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { DataSource } from 'typeorm';
import { expressAuthentication } from '../../http/authentication.js';
import { keyRevoked } from '../keys/keys.repository.js';
import { principalOf } from '../keys/principal.js';
import type { Viewer } from '../keys/visibility.js';
import type { EventHub } from './event-hub.js';
import { eventsAfter, visibleEvent, type StoredEvent } from './events.repository.js';
import { EVENT_PAGE, parseAfter, toEventDto } from './events.service.js';

export interface EventStreamOptions {
  /** Milliseconds between heartbeat comments, so proxies and clients see the stream alive. */
  heartbeatMs: number;
  /** Milliseconds after which the stream ends; the client reconnects with Last-Event-ID. */
  maxMs: number;
}

/** Bytes a client may leave unread before its stream is ended (it resumes from its last id). */
const MAX_UNREAD_BYTES = 1 << 20;

const PATH = /^\/api\/v1\/events\/?$/i;

/**
 * `GET /api/v1/events` with `Accept: text/event-stream`: the caller's events as Server-Sent
 * Events, ahead of the generated routes, which answer the JSON paging (the default) and stay the
 * documented definition of the route. Authenticated as tsoa's bearer routes are, scope `read`,
 * under the same visibility rule. From `Last-Event-ID` or `after` it replays the log, then goes
 * live from the hub; without either it starts with the next event. A key revoked meanwhile ends
 * its stream at the next heartbeat.
 */
export function eventStreamRoute(ds: DataSource, hub: EventHub, options: EventStreamOptions): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    if (req.method !== 'GET' || !PATH.test(req.path) || req.accepts(['application/json', 'text/event-stream']) !== 'text/event-stream') return next();
    stream(ds, hub, options, req, res).catch((err: unknown) => {
      if (!res.headersSent) next(err);
      else res.end();
    });
  };
}

async function stream(ds: DataSource, hub: EventHub, options: EventStreamOptions, req: Request, res: Response): Promise<void> {
  req.user = await expressAuthentication(req, 'bearer', ['read']);
  const viewer: Viewer = principalOf(req);
  const { keyId } = principalOf(req);
  const lastEventId = req.header('last-event-id');
  const after = parseAfter(lastEventId !== undefined && lastEventId !== '' ? lastEventId : typeof req.query.after === 'string' ? req.query.after : undefined);

  // Listening before the log is read, so nothing falls between the replay and the live events.
  const sub = await hub.subscribe((e) => visibleEvent(viewer, e));
  let sent = after ?? sub.since;
  let replay: StoredEvent[];
  try {
    replay = await eventsAfter(ds, viewer, sent, EVENT_PAGE.max);
  } catch (err) {
    sub.stop();
    throw err;
  }

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
  const send = (e: StoredEvent) => {
    if (BigInt(e.id) <= BigInt(sent)) return;
    sent = e.id;
    write(`id: ${e.id}\nevent: ${e.type}\ndata: ${JSON.stringify(toEventDto(e))}\n\n`);
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
  heartbeat = setInterval(() => {
    write(': heartbeat\n\n');
    // A key revoked while its stream is open stops receiving within one heartbeat.
    keyRevoked(ds, keyId).then(
      (revoked) => revoked && end(),
      () => undefined,
    );
  }, options.heartbeatMs);
  deadline = setTimeout(end, options.maxMs);

  // The log after the client's id, a page at a time, then whatever the hub has queued and brings.
  while (!sub.closed) {
    replay.forEach(send);
    if (replay.length < EVENT_PAGE.max) break;
    replay = await eventsAfter(ds, viewer, sent, EVENT_PAGE.max);
  }
  while (!sub.closed) {
    const e = await sub.next(options.maxMs);
    if (e) send(e);
  }
  end();
}
