import { terminateMessage } from '../../../vocabulary/rental-hints.js';
import type { Viewer } from '../../keys/visibility.js';
import type { Deployment } from '../store/deployment.entity.js';
import type { TerminateAccepted } from '../wire/rentals.dto.js';

/** Who acts on a deployment: an agent key its own deployments, the account holder the whole account's. */
export type DeploymentActor = Viewer;

/** What a terminate request answers, first or repeated: the deployment as it stands after it. */
export function terminateAnswer(d: Deployment): TerminateAccepted {
  return {
    accepted: true,
    deploymentId: d.id,
    rentalId: d.orderId,
    status: d.status,
    terminateRequestedAt: d.terminateRequestedAt?.toISOString() ?? null,
    message: terminateMessage(d.status, d.orderId),
  };
}
