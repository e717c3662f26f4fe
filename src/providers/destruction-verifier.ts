import type { Logger } from '../logger.js';
import type { Provider } from './provider.js';
import { sshProbe, type SshTarget } from './ssh-probe.js';

/** What one verification found. */
export interface DestructionCheck {
  /** True only when the provider reports the instance `gone` and the SSH login failed. */
  verified: boolean;
  /** State the provider reported (`unknown` when asking it failed). */
  providerState: string;
  /** True when an SSH login was attempted and did not get in; false when it got in or was not tried. */
  sshRefused: boolean;
  /** Human-readable account for logs and the deployment record; never contains key material. */
  detail: string;
}

export interface DestructionVerifierOptions {
  /** Limit for the SSH login attempt (connect, handshake, authentication; held by a timer of our own). Default 3000 ms. */
  sshTimeoutMs?: number;
}

/** Who asks, for the log line of a changed host key. */
export interface VerifyContext {
  logger: Pick<Logger, 'warn'>;
  deploymentId: string;
}

/**
 * Decides whether a destroyed instance is really gone, the same way for every plugin: the
 * provider's word is not enough, because a provider can forget a machine that keeps running.
 * Destruction counts only when `provider.get()` reports `gone` AND a login with the deployment's
 * own key no longer gets in (refused, rejected or timed out). Safe to call repeatedly; it only reads.
 */
export class DestructionVerifier {
  constructor(private readonly options: DestructionVerifierOptions = {}) {}

  /**
   * @param provider the plugin that owned the instance
   * @param instanceId the provider's instance id
   * @param ssh the endpoint recorded while the instance ran, with the deployment's private key and
   *   the host key pinned for its machine: a server at that address showing another host key is
   *   another machine, so our key no longer gets in to ours (logged through `context`)
   */
  async verify(
    provider: Provider,
    instanceId: string,
    ssh: SshTarget,
    context?: VerifyContext,
  ): Promise<DestructionCheck> {
    let providerState: string;
    try {
      providerState = (await provider.get(instanceId)).state;
    } catch (err) {
      return {
        verified: false,
        providerState: 'unknown',
        sshRefused: false,
        detail: `provider ${provider.id} get failed: ${(err as Error).message}`,
      };
    }
    // Until the provider says gone the answer is no anyway; skipping the probe keeps polling cheap.
    if (providerState !== 'gone') {
      return {
        verified: false,
        providerState,
        sshRefused: false,
        detail: `provider ${provider.id} reports ${providerState}; SSH not probed`,
      };
    }
    const probe = await sshProbe(ssh, { timeoutMs: this.options.sshTimeoutMs ?? 3000 });
    const where = `${ssh.user}@${ssh.host}:${ssh.port}`;
    if (probe.ok) {
      return {
        verified: false,
        providerState,
        sshRefused: false,
        detail: `provider ${provider.id} reports gone but SSH login to ${where} still succeeds`,
      };
    }
    if (probe.reason === 'host_key') {
      const detail = `provider ${provider.id} reports gone; ${where} answers with host key ${probe.hostKey}, not the pinned ${ssh.hostKey}: another machine has the address`;
      context?.logger.warn(
        { deploymentId: context.deploymentId, provider: provider.id, pinned: ssh.hostKey, seen: probe.hostKey },
        "a destroyed machine's SSH address answers with another host key; counted as our key no longer getting in",
      );
      return { verified: true, providerState, sshRefused: true, detail };
    }
    return {
      verified: true,
      providerState,
      sshRefused: true,
      detail: `provider ${provider.id} reports gone; SSH to ${where} failed (${probe.reason}: ${probe.detail})`,
    };
  }
}
