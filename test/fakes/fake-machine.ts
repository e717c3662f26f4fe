import { randomUUID } from 'node:crypto';
import { createLogger } from '../../src/logger.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { prepareSandbox, removeSandbox, sandboxDirFor } from '../../plugins/local/sandbox.js';
import { SshInstanceServer } from '../../plugins/local/ssh-instance-server.js';

export interface FakeMachineOptions {
  /** The image's login user (`root` on Vast and RunPod images, `ubuntu` on Lambda). */
  user: string;
  gpuName: string;
  gpuCount: number;
  vramGb: number | null;
  /** The key the cloud installed at create time; `authorize` adds more later. */
  publicKey: string;
  /** Loopback address to listen on (any of 127.0.0.0/8 on Linux). Default 127.0.0.1. */
  host?: string;
  /** Port to listen on. Default an ephemeral one. */
  port?: number;
}

/**
 * The machine behind a fake cloud's instance: a real SSH endpoint on a loopback address that lets in only
 * the keys the cloud delivered, with a simulated `nvidia-smi`. The fake cloud decides when it is
 * reachable and when it dies; forgetting an instance in the API need not stop its machine.
 */
export class FakeMachine {
  private constructor(
    private readonly server: SshInstanceServer,
    private readonly dir: string,
    readonly port: number,
    readonly host: string,
  ) {}

  static async start(o: FakeMachineOptions): Promise<FakeMachine> {
    const id = `fake-${randomUUID()}`;
    const dir = sandboxDirFor(id);
    await prepareSandbox(dir, { instanceId: id, name: o.gpuName, count: o.gpuCount, vramGb: o.vramGb });
    let alive = true;
    const server = new SshInstanceServer({
      instanceId: id,
      hostKey: generateDeploymentKeyPair('fake-host-key').privateKey,
      authorizedKey: o.publicKey,
      user: o.user,
      sandboxDir: dir,
      logger: createLogger('silent'),
      isAlive: async () => alive,
      onDead: () => {
        alive = false;
      },
    });
    const host = o.host ?? '127.0.0.1';
    let port: number;
    try {
      port = await server.listen(o.port ?? 0, host);
    } catch (err) {
      await removeSandbox(dir);
      throw err;
    }
    return new FakeMachine(server, dir, port, host);
  }

  /** Adds a key as the cloud's "attach SSH key" call would. */
  authorize(publicKey: string): void {
    this.server.authorize(publicKey);
  }

  /** Powers the machine off: SSH stops answering at once. */
  async close(): Promise<void> {
    await this.server.close();
    await removeSandbox(this.dir);
  }
}
