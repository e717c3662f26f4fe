/*
 * The floor of any admission served by Express: bare Express 5 (express.json and one route, no
 * other middleware) in a process of its own, whose POST /api/v1/rentals runs the raw mysql2
 * admission (bench/raw-admission.ts: the service's statements in its three round trips) and answers
 * 201 with a body the size of the service's. Nothing of the service runs here: no authentication
 * (the client is looked up by its Authorization header in a table the bench sends), no
 * validation, no idempotency, no metrics, no logging. What this process costs per admission above
 * the raw client is what Express and Node's HTTP server cost, the least the service can cost.
 * Started by startFloorProcess; answers its parent over IPC like bench/service-process.ts.
 */
import express from 'express';
import { randomUUID } from 'node:crypto';
import { exitWithParent } from './processes.js';
import { rawAdmission, rawPool } from './raw-admission.js';
import type { Offer } from '../src/modules/inventory/offer.entity.js';
import type { Client, FloorMessage, FloorRequest } from './bench-types.js';

async function main(): Promise<void> {
  exitWithParent();
  const [databaseUrl, poolSize] = process.argv.slice(2);
  const pool = rawPool(databaseUrl, Number(poolSize));
  const counter = { deadlocks: 0 };
  const clients = new Map<string, Client>();
  let offer: Offer | undefined;
  // The service's answer to one admission, with a placeholder where the rental's id goes.
  let answer = '';
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(express.json());
  app.post('/api/v1/rentals', async (req, res) => {
    const client = clients.get(String(req.headers.authorization));
    if (!client || !offer) {
      res.status(401).json({ error: { code: 'UNAUTHENTICATED' } });
      return;
    }
    const rentalId = randomUUID();
    const failed = await rawAdmission(pool, client, offer, counter, rentalId);
    if (failed) res.status(409).json({ error: { code: 'REFUSED', message: failed } });
    else res.status(201).type('application/json').send(answer.replaceAll('__RENTAL_ID__', rentalId));
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', resolve));
  const { port } = server.address() as { port: number };
  const send = (m: FloorMessage) => process.send!(m);
  process.on('message', (m: FloorRequest) => {
    void (async () => {
      if (m.type === 'clients') {
        clients.clear();
        for (const c of m.clients) clients.set(c.auth, c);
        offer = m.offer;
        answer = m.answer;
        send({ type: 'clients-set' });
      } else if (m.type === 'stats') {
        const cpu = process.cpuUsage();
        send({ type: 'stats', userUs: cpu.user, systemUs: cpu.system });
      } else if (m.type === 'close') {
        server.closeAllConnections();
        server.close();
        await pool.end();
        send({ type: 'closed' });
        process.exit(0);
      }
    })();
  });
  send({ type: 'ready', base: `http://127.0.0.1:${port}` });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
