/*
 * The service in a process of its own, for benches that measure what the service costs: started by
 * startServiceProcess (bench/support.ts) on a bench database that already exists, it serves the API
 * on a free port and answers its parent over IPC with its own CPU time (every thread of this
 * process, and nothing of the load generator's or the bench's) and the SQL it sent, and records a
 * V8 CPU profile of this process between two messages.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { exitWithParent } from './processes.js';
import type { ServiceMessage, ServiceRequest } from './bench-types.js';
import { queryCounter, serveBenchApp } from './support.js';

async function main(): Promise<void> {
  exitWithParent();
  const [databaseUrl, inventoryPath] = process.argv.slice(2);
  const app = await serveBenchApp(databaseUrl, inventoryPath);
  const send = (m: ServiceMessage) => process.send!(m);
  let session: Session | undefined;
  process.on('message', (m: ServiceRequest) => {
    void (async () => {
      if (m.type === 'stats') {
        const cpu = process.cpuUsage();
        send({ type: 'stats', userUs: cpu.user, systemUs: cpu.system, ...queryCounter });
      } else if (m.type === 'profile-start') {
        session = new Session();
        session.connect();
        await session.post('Profiler.enable');
        await session.post('Profiler.setSamplingInterval', { interval: m.intervalUs });
        await session.post('Profiler.start');
        send({ type: 'profile-started' });
      } else if (m.type === 'profile-stop') {
        const { profile } = await session!.post('Profiler.stop');
        session!.disconnect();
        writeFileSync(m.path, JSON.stringify(profile));
        send({ type: 'profile-stopped' });
      } else if (m.type === 'close') {
        await app.close();
        send({ type: 'closed' });
        process.exit(0);
      }
    })();
  });
  send({ type: 'ready', base: app.base });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
