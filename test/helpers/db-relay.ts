import { createServer, connect, type Server, type Socket } from 'node:net';
import supertest from 'supertest';
import type { DataSource } from 'typeorm';
import { createApp } from '../../src/app.js';
import { createServices } from '../../src/container.js';
import { createDataSource } from '../../src/db/data-source.js';
import { entities } from '../../src/entities.js';
import type { TestContext } from './context.js';
import { testDatabaseUrl } from './db.js';

/** An app of its own whose database sits behind a TCP relay a test can cut. */
export interface RelayedApp {
  api: supertest.Agent;
  ds: DataSource;
  /** Takes the database away from this app only: the relay stops and every connection drops. */
  cut(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The same services as `ctx`, on a DataSource that reaches MariaDB through a relay on loopback:
 * cutting the relay is the database going away for this app alone, while the rest of the run
 * keeps its own.
 */
export async function appBehindRelay(ctx: TestContext): Promise<RelayedApp> {
  const sockets = new Set<Socket>();
  const upstreamPort = Number(new URL(testDatabaseUrl).port || 3306);
  const relay: Server = createServer((client) => {
    const upstream = connect(upstreamPort, '127.0.0.1');
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', () => r()));
  const url = new URL(testDatabaseUrl);
  url.port = String((relay.address() as { port: number }).port);
  const ds = createDataSource(url.toString(), 2, entities);
  await ds.initialize();
  const services = createServices({
    config: ctx.config,
    ds,
    clock: ctx.clock,
    logger: ctx.services.logger,
    providers: ctx.services.providers,
  });
  let open = true;
  const cut = async () => {
    if (!open) return;
    open = false;
    const closed = new Promise<void>((r) => relay.close(() => r()));
    for (const s of sockets) s.destroy();
    await closed;
  };
  return {
    api: supertest.agent(createApp(services)),
    ds,
    cut,
    async close() {
      await cut();
      await ds.destroy().catch(() => undefined);
    },
  };
}
