import net from 'node:net';

/*
 * Root hooks of the unit tier (`npm run test:unit`): no database, no network. Every socket's
 * connect is refused before it opens, so a test that reaches for MariaDB, a fake cloud on
 * loopback or anything else fails at once, naming what it tried, instead of passing only where a
 * server happens to run. Such a test belongs in test/store/ or beside the end-to-end tests.
 */
net.Socket.prototype.connect = function refused(this: net.Socket, ...args: unknown[]) {
  const [first] = args;
  const where =
    typeof first === 'object' && first !== null
      ? JSON.stringify({
          host: (first as net.TcpNetConnectOpts).host,
          port: (first as net.TcpNetConnectOpts).port,
          path: (first as net.IpcNetConnectOpts).path,
        })
      : String(first);
  throw new Error(
    `the unit tier opens no connection (tried ${where}); this test belongs in test/store/ or an end-to-end suite`,
  );
} as typeof net.Socket.prototype.connect;

export const mochaHooks = {};
