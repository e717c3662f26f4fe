import { isIPv4, isIPv6 } from 'node:net';

/** An SSH endpoint a cloud reported for an instance. */
export interface SshEndpoint {
  host: string;
  port: number;
  user: string;
}

// A login name as clouds hand them out (`root`, `ubuntu`, RunPod's `<pod>-<hex>`): never starting
// with `-`, so no client can read it as an option.
const USER = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/;
const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;

function isHostName(host: string): boolean {
  if (host.length > 253) return false;
  const labels = host.replace(/\.$/, '').split('.');
  return labels.length > 0 && labels.every((l) => LABEL.test(l));
}

/**
 * Why `ssh` can't be handed on as it is, or undefined when it can. What a cloud reports reaches
 * agents' `ssh` command lines and files (through the credentials view and the clients), so it is
 * held to what a host, port and user can be: a DNS name or an IP address, 1-65535, a login name.
 */
export function sshEndpointProblem(ssh: SshEndpoint): string | undefined {
  if (typeof ssh.user !== 'string' || !USER.test(ssh.user)) return 'user is not a login name';
  if (typeof ssh.host !== 'string' || !(isIPv4(ssh.host) || isIPv6(ssh.host) || isHostName(ssh.host)))
    return 'host is neither a host name nor an IP address';
  if (!Number.isInteger(ssh.port) || ssh.port < 1 || ssh.port > 65535) return 'port is not 1-65535';
  return undefined;
}

/** A short, inert rendering of an untrusted endpoint for a log line. */
export function describeUntrustedEndpoint(ssh: SshEndpoint): string {
  return JSON.stringify({ host: String(ssh.host).slice(0, 80), port: ssh.port, user: String(ssh.user).slice(0, 80) });
}
