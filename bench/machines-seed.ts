/*
 * The rentals of bench/machines.ts: ACTIVE metered rentals (test/helpers/metered-seed.ts, as the
 * metering bench seeds them) whose keys end idle machines after an hour, each given an SSH address
 * on one of the bench's servers, a sealed private key and its server's host key pinned, written
 * with multi-row statements. The private keys come from a small pool: ssh2 makes ed25519 keys
 * slowly, and the servers let any key in, so sharing a key between rentals changes nothing the
 * worker does (each rental's key is still sealed, and opened, on its own).
 */
import type { DataSource } from 'typeorm';
import type { SecretBox } from '../src/modules/credentials/secret-box.js';
import { generateDeploymentKeyPair, type DeploymentKeyPair } from '../src/providers/ssh-keys.js';
import { seedMeteredRentals } from '../test/helpers/metered-seed.js';
import type { MachineServer } from './machines-servers.js';

/** Rentals per account: an account may hold only its share of the sweep's slots (CheckSlots). */
export const RENTALS_PER_ACCOUNT = 10;
/** The idle window of every seeded rental's key: one hour. */
export const IDLE_WINDOW_MINUTES = 60;

/** `count` deployment key pairs, made once and shared by the rentals. */
export function keyPool(count: number): DeploymentKeyPair[] {
  return Array.from({ length: count }, (_, i) => generateDeploymentKeyPair(`bench-rental-${i}`));
}

/** What was seeded: the rentals, and how many of them sit on servers whose GPUs read idle. */
export interface SeededMachines {
  rentals: number;
  idle: number;
}

/**
 * Seeds `rentals` watched rentals (rounded up to whole accounts), rental i on server i mod S with
 * key i mod the pool's size, sealed to the rental as provisioning seals it.
 */
export async function seedWatchedRentals(
  ds: DataSource,
  o: { rentals: number; servers: MachineServer[]; keys: DeploymentKeyPair[]; box: SecretBox; at: Date },
): Promise<SeededMachines> {
  const seed = await seedMeteredRentals(ds, {
    accounts: Math.ceil(o.rentals / RENTALS_PER_ACCOUNT),
    perAccount: RENTALS_PER_ACCOUNT,
    creditsMinor: 1_000_000_000,
    priceMinor: 300,
    startedAt: o.at,
  });
  await ds.query(`UPDATE api_keys SET idle_terminate_minutes = ?`, [IDLE_WINDOW_MINUTES]);
  // A scratch table joined once: one UPDATE per rental would take longer than the bench.
  await ds.query(
    `CREATE TABLE bench_machine_ssh (id CHAR(36) PRIMARY KEY, host VARCHAR(255), port INT, user VARCHAR(64),
       host_key VARCHAR(100), public_key TEXT, enc VARBINARY(4096), kid VARCHAR(32))`,
  );
  let idle = 0;
  const rows = seed.deploymentIds.map((id, i) => {
    const server = o.servers[i % o.servers.length];
    const key = o.keys[i % o.keys.length];
    const sealed = o.box.seal(key.privateKey, id);
    if (server.idle) idle++;
    return [id, '127.0.0.1', server.port, 'root', server.hostKey, key.publicKey, sealed.ciphertext, sealed.keyId];
  });
  for (let from = 0; from < rows.length; from += 1000)
    await ds.query(`INSERT INTO bench_machine_ssh (id, host, port, user, host_key, public_key, enc, kid) VALUES ?`, [
      rows.slice(from, from + 1000),
    ]);
  await ds.query(
    `UPDATE deployments d JOIN bench_machine_ssh s ON s.id = d.id
        SET d.ssh_host = s.host, d.ssh_port = s.port, d.ssh_user = s.user, d.ssh_host_key = s.host_key,
            d.ssh_public_key = s.public_key, d.ssh_private_key_enc = s.enc, d.ssh_key_kid = s.kid`,
  );
  await ds.query(`DROP TABLE bench_machine_ssh`);
  return { rentals: rows.length, idle };
}
