import type { Logger } from '../../../logger.js';
import type { InstanceInfo } from '../../../providers/provider.js';
import { describeUntrustedEndpoint, sshEndpointProblem } from '../../../providers/ssh-endpoint.js';
import type { Deployment } from '../store/deployment.entity.js';
import type { Order } from '../store/order.entity.js';

/**
 * The endpoints the provider reported for ports the rental asked for, when they are plain
 * http(s) URLs without credentials; anything else is left out with a warning naming the cloud.
 */
export function acceptedEndpoints(
  logger: Logger,
  d: Deployment,
  order: Order,
  info: InstanceInfo,
): { port: number; url: string }[] {
  const asked = new Set(order.machinePorts ?? []);
  return (info.endpoints ?? []).filter((e) => {
    let ok = false;
    try {
      const u = new URL(e.url);
      ok =
        asked.has(e.port) &&
        (u.protocol === 'http:' || u.protocol === 'https:') &&
        !u.username &&
        !u.password &&
        e.url.length <= 512;
    } catch {
      ok = false;
    }
    if (!ok)
      logger.warn(
        { deploymentId: d.id, providerId: d.providerId, port: e.port },
        'the provider reported an endpoint that cannot be handed on; not using it',
      );
    return ok;
  });
}

/**
 * The instance's SSH endpoint when it is one we may hand to agents; otherwise none (the machine
 * then never becomes ACTIVE and fails at the provisioning bound), with a warning naming the cloud.
 */
export function acceptedEndpoint(logger: Logger, d: Deployment, info: InstanceInfo): InstanceInfo['ssh'] {
  if (!info.ssh) return undefined;
  const problem = sshEndpointProblem(info.ssh);
  if (!problem) return info.ssh;
  logger.warn(
    { deploymentId: d.id, providerId: d.providerId, endpoint: describeUntrustedEndpoint(info.ssh) },
    `the provider reported an SSH endpoint that cannot be handed on (${problem}); not using it`,
  );
  return undefined;
}
