import { createHash } from 'node:crypto';
import { DEFAULT_MACHINE_SETTINGS, STARTUP_MARKER_PATH, type MachineSettings } from '../../../providers/provider.js';
import type { SecretBox } from '../../credentials/secret-box.js';
import type { Order } from './order.entity.js';

// A rental's machine settings at rest. The image, the variable names, ports and disk are stored
// in the clear (reads show them); the variables' values and the startup script are the agent's
// secrets, sealed together like SSH keys and bound to the order id, so a ciphertext copied onto
// another order fails to open. Only the script's hash is readable.

/** The sealed part of the settings. */
interface MachineSecrets {
  env: Record<string, string>;
  startupScript: string | null;
}

/** The order columns that hold a rental's machine settings. */
export type MachineColumns = Pick<
  Order,
  | 'machineImage'
  | 'machineEnvNames'
  | 'machinePorts'
  | 'machineDiskGb'
  | 'machineSecretsEnc'
  | 'machineSecretsKid'
  | 'startupScriptSha256'
>;

/** The columns of a rental that asked for nothing (card orders, which take no settings). */
export const NO_MACHINE_COLUMNS: Readonly<MachineColumns> = Object.freeze({
  machineImage: null,
  machineEnvNames: null,
  machinePorts: null,
  machineDiskGb: null,
  machineSecretsEnc: null,
  machineSecretsKid: null,
  startupScriptSha256: null,
});

/** SHA-256 of the script's UTF-8 bytes, in hex: what reads show of it. */
export function scriptSha256(script: string): string {
  return createHash('sha256').update(script, 'utf8').digest('hex');
}

/** The columns of `settings` for order `orderId`; nothing is sealed when there is no secret. */
export function machineColumns(
  box: Pick<SecretBox, 'seal'>,
  orderId: string,
  settings: MachineSettings,
): MachineColumns {
  const names = Object.keys(settings.env).sort();
  const secret = names.length > 0 || settings.startupScript !== null;
  const sealed = secret
    ? box.seal(
        JSON.stringify({ env: settings.env, startupScript: settings.startupScript } satisfies MachineSecrets),
        orderId,
      )
    : null;
  return {
    machineImage: settings.image,
    machineEnvNames: names.length ? names : null,
    machinePorts: settings.ports.length ? [...settings.ports] : null,
    machineDiskGb: settings.diskGb,
    machineSecretsEnc: sealed?.ciphertext ?? null,
    machineSecretsKid: sealed?.keyId ?? null,
    startupScriptSha256: settings.startupScript === null ? null : scriptSha256(settings.startupScript),
  };
}

/** The settings stored on `order`, secrets opened: what provisioning hands the provider (script as the agent wrote it). */
export function machineSettingsOf(
  box: Pick<SecretBox, 'open'>,
  order: Pick<Order, 'id'> & MachineColumns,
): MachineSettings {
  const secrets: MachineSecrets =
    order.machineSecretsEnc && order.machineSecretsKid
      ? (JSON.parse(box.open(order.machineSecretsEnc, order.machineSecretsKid, order.id)) as MachineSecrets)
      : { env: {}, startupScript: null };
  return {
    ...DEFAULT_MACHINE_SETTINGS,
    image: order.machineImage,
    env: secrets.env,
    startupScript: secrets.startupScript,
    ports: order.machinePorts ?? [],
    diskGb: order.machineDiskGb,
  };
}

/**
 * The agent's script as the machine runs it: it first records its start in
 * {@link STARTUP_MARKER_PATH} (which provisioning checks over SSH before ACTIVE), then runs the
 * agent's script in the background (under its own interpreter line, else `sh`) with its output in
 * `~/.gpr/startup.log`. The script text travels base64-encoded, so no quoting of it can break out
 * of the wrapper. Run it as the machine's SSH user, with the rental's environment.
 */
export function wrapStartupScript(script: string): string {
  const body = Buffer.from(script, 'utf8').toString('base64');
  return [
    '#!/bin/sh',
    'mkdir -p "$HOME/.gpr"',
    `printf '%s\\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$HOME/${STARTUP_MARKER_PATH}"`,
    `echo '${body}' | base64 -d > "$HOME/.gpr/startup.sh"`,
    'chmod 700 "$HOME/.gpr/startup.sh"',
    // A script with its own interpreter line runs under it; any other under sh.
    'if [ "$(head -c 2 "$HOME/.gpr/startup.sh")" = "#!" ]; then set -- "$HOME/.gpr/startup.sh"; else set -- sh "$HOME/.gpr/startup.sh"; fi',
    'nohup "$@" > "$HOME/.gpr/startup.log" 2>&1 &',
    '',
  ].join('\n');
}
