import type { Logger } from '../logger.js';
import type { InstanceInfo, Provider } from './provider.js';
import { sshProbe, type SshLoginFailure, type SshTarget } from './ssh-probe.js';

/**
 * How the login with the rental's own key failed after the provider said gone: `refused` (nothing
 * listening, connection reset), `key_rejected` (a server answered and turned the key down),
 * `timed_out` (no login within the bound), `host_key_changed` (another machine answers at the
 * address), `unreachable` (any other network failure), or `no_address` (the provider never gave the
 * machine an SSH address, so nobody had one to log in with, and none was tried).
 */
export type SshEvidenceOutcome =
  'refused' | 'key_rejected' | 'timed_out' | 'host_key_changed' | 'unreachable' | 'no_address';

/** The probe's failure in the evidence's words. */
const SSH_OUTCOMES: Record<SshLoginFailure, SshEvidenceOutcome> = {
  refused: 'refused',
  auth: 'key_rejected',
  timeout: 'timed_out',
  host_key: 'host_key_changed',
  error: 'unreachable',
};

/** What a verified destruction rests on, as a teardown receipt records it: no address, no key material. */
export interface DestructionEvidence {
  /** The provider's final read of the instance. */
  provider: { state: 'gone'; providerState: string | null; httpStatus: number | null; checkedAt: Date };
  /** How the login with the deployment's key failed, and when (null when none was tried: `no_address`). */
  ssh: { outcome: SshEvidenceOutcome; checkedAt: Date | null };
}

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
  /** On a verified check only: what the provider and the login answered, and when. */
  evidence?: DestructionEvidence;
}

export interface DestructionVerifierOptions {
  /** Limit for the SSH login attempt (connect, handshake, authentication; held by a timer of our own). Default 3000 ms. */
  sshTimeoutMs?: number;
}

/** Who asks, for the log line of a changed host key, and the clock the evidence is timed by. */
export interface VerifyContext {
  logger: Pick<Logger, 'warn'>;
  deploymentId: string;
  /** The caller's clock (the wall clock without one). */
  now?: () => Date;
}

/** The provider's answer as evidence: only a `gone` one is ever recorded. */
function providerAnswer(info: InstanceInfo, checkedAt: Date): DestructionEvidence['provider'] {
  return { state: 'gone', providerState: info.providerState ?? null, httpStatus: info.httpStatus ?? null, checkedAt };
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
    const now = context?.now ?? (() => new Date());
    // Until the provider says gone the answer is no anyway; skipping the probe keeps polling cheap.
    const asked = await this.askProvider(provider, instanceId, now, 'SSH not probed');
    if ('verified' in asked) return asked;
    const { info, askedAt } = asked;
    const providerState: string = info.state;
    const probedAt = now();
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
    const evidence: DestructionEvidence = {
      provider: providerAnswer(info, askedAt),
      ssh: { outcome: SSH_OUTCOMES[probe.reason], checkedAt: probedAt },
    };
    if (probe.reason === 'host_key') {
      const detail = `provider ${provider.id} reports gone; ${where} answers with host key ${probe.hostKey}, not the pinned ${ssh.hostKey}: another machine has the address`;
      context?.logger.warn(
        { deploymentId: context.deploymentId, provider: provider.id, pinned: ssh.hostKey, seen: probe.hostKey },
        "a destroyed machine's SSH address answers with another host key; counted as our key no longer getting in",
      );
      return { verified: true, providerState, sshRefused: true, detail, evidence };
    }
    return {
      verified: true,
      providerState,
      sshRefused: true,
      detail: `provider ${provider.id} reports gone; SSH to ${where} failed (${probe.reason}: ${probe.detail})`,
      evidence,
    };
  }

  /**
   * The check of an instance the provider never gave an SSH address: nobody could have logged in,
   * so the provider's `gone` is the whole check (evidence `no_address`). Only reads.
   */
  async verifyWithoutAddress(
    provider: Provider,
    instanceId: string,
    context?: VerifyContext,
  ): Promise<DestructionCheck> {
    const now = context?.now ?? (() => new Date());
    const asked = await this.askProvider(provider, instanceId, now, 'it never reported an SSH address');
    if ('verified' in asked) return asked;
    const { info, askedAt } = asked;
    return {
      verified: true,
      providerState: info.state,
      sshRefused: false,
      detail: 'provider reports gone; it never reported an SSH address',
      evidence: { provider: providerAnswer(info, askedAt), ssh: { outcome: 'no_address', checkedAt: null } },
    };
  }

  /**
   * The provider's answer about the instance and when it was asked, or the failed check when it
   * could not answer or does not say `gone` (`notGone` ends that check's detail).
   */
  private async askProvider(
    provider: Provider,
    instanceId: string,
    now: () => Date,
    notGone: string,
  ): Promise<{ info: InstanceInfo; askedAt: Date } | DestructionCheck> {
    const askedAt = now();
    let info: InstanceInfo;
    try {
      info = await provider.get(instanceId);
    } catch (err) {
      return {
        verified: false,
        providerState: 'unknown',
        sshRefused: false,
        detail: `provider ${provider.id} get failed: ${(err as Error).message}`,
      };
    }
    if (info.state !== 'gone')
      return {
        verified: false,
        providerState: info.state,
        sshRefused: false,
        detail: `provider ${provider.id} reports ${info.state}; ${notGone}`,
      };
    return { info, askedAt };
  }
}
