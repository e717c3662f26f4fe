import { failureNext, type Rental } from '@gpu-rental/sdk';
import {
  CLIENT_CAPABILITIES_META_KEY,
  type CallToolResult,
  type ClientCapabilities,
  type ServerContext,
  type ServerNotification,
} from '@modelcontextprotocol/server';
import { refusal } from './guard.js';

// What the rental tools tell the model to do next, and how they report a wait's progress.

/**
 * What a tool call carries besides its arguments, whatever the protocol era: the client's
 * progress token and a way to notify it, what the client can be asked, and what it answered to
 * an earlier round of the same call.
 */
export interface CallExtra {
  _meta?: { progressToken?: string | number };
  sendNotification: (n: ServerNotification) => Promise<void>;
  /** The client declared URL-mode elicitation (`capabilities.elicitation.url`): it can show a human a link to open. */
  urlElicitation: boolean;
  /** The client's answers to the input an earlier round of this call asked for, by key; untrusted. */
  inputResponses?: Record<string, unknown>;
  /** The state an earlier round of this call returned, as the client sent it back; untrusted. */
  requestState?: string;
}

/**
 * The one place the SDK's handler context becomes a {@link CallExtra}. A 2026-07-28 request
 * carries the client's capabilities itself; a 2025-era connection declared them once, at
 * `initialize`, which `connectionCapabilities` reads.
 */
export function callExtra(ctx: ServerContext, connectionCapabilities: () => ClientCapabilities | undefined): CallExtra {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  const capabilities =
    (envelope?.[CLIENT_CAPABILITIES_META_KEY] as ClientCapabilities | undefined) ?? connectionCapabilities();
  const progressToken = ctx.mcpReq._meta?.progressToken;
  const state = ctx.mcpReq.requestState();
  return {
    ...(progressToken === undefined ? {} : { _meta: { progressToken } }),
    sendNotification: (n) => ctx.mcpReq.notify(n),
    urlElicitation: capabilities?.elicitation?.url !== undefined,
    ...(ctx.mcpReq.inputResponses ? { inputResponses: ctx.mcpReq.inputResponses } : {}),
    ...(typeof state === 'string' ? { requestState: state } : {}),
  };
}

/**
 * Reports a wait's progress to a client that asked for it (a progress token in the call): one
 * notification per change of the rental's status or phase, `progress` growing, `total` unknown.
 * `sent` resolves once every notification so far is written: the tool's answer must follow them,
 * since a client stops listening for a call's progress when its answer arrives.
 */
export function progressReporter(extra: CallExtra | undefined): {
  report?: (r: Rental) => void;
  sent: () => Promise<void>;
} {
  const progressToken = extra?._meta?.progressToken;
  if (progressToken === undefined) return { sent: async () => undefined };
  let progress = 0;
  let last: Promise<void> = Promise.resolve();
  return {
    report: (r) => {
      const message = `rental ${r.status}${r.phase ? ` (phase ${r.phase})` : ''}`;
      const previous = last;
      const sending = extra!
        .sendNotification({
          method: 'notifications/progress',
          params: { progressToken, progress: ++progress, message },
        })
        .catch(() => undefined);
      last = Promise.all([previous, sending]).then(() => undefined);
    },
    sent: () => last,
  };
}

/** reveal_ssh_credentials and terminate_deployment take the rental by either of its ids, as the HTTP routes do. */
export type RentalTarget = { rentalId?: string; deploymentId?: string };

/** The one id a call named, or null when it named none or two. */
export function targetId(a: RentalTarget): string | null {
  return a.rentalId && a.deploymentId ? null : (a.rentalId ?? a.deploymentId ?? null);
}

export const targetRefusal = (tool: string): CallToolResult =>
  refusal(
    `${tool} needs exactly one of rentalId (from create_rental or list_rentals) or deploymentId. Nothing was done.`,
  );

const FAILURE_HOW = {
  rent: 'call create_rental',
  offers: 'list_offers',
  waitForCapacity: 'waitForCapacitySeconds and a gpuModel',
};

/** What the model should do about a rental as it is now. */
export function nextStep(r: Rental): string {
  switch (r.status) {
    case 'ACTIVE':
      return `Usable: reveal_ssh_credentials for SSH${r.endpoints?.length ? '; endpoints give the URL of each exposed port' : ''}${r.endsAt ? `; terminated at endsAt (${r.endsAt}) unless terminate_deployment comes first` : '; terminate_deployment when done, charges run until then'}.`;
    case 'PENDING':
    case 'PROVISIONING':
      return r.phase === 'waiting_for_capacity' && r.waitForCapacityUntil
        ? `Waiting for an eligible offer until ${r.waitForCapacityUntil}: call get_rental with waitFor ["ACTIVE", "FAILED"] again (it fails with NO_CAPACITY then).`
        : `Starting${r.phase ? ` (phase ${r.phase})` : ''}: call get_rental with waitFor ["ACTIVE", "FAILED"] again.`;
    case 'FAILED':
      return (
        failureNext(r.failureCode ?? '', FAILURE_HOW) ??
        'It never became ACTIVE: failureReason says why; any debit is returned (reversalStatus). Rent again with create_rental if still needed.'
      );
    case 'AWAITING_PAYMENT':
      return 'It starts once its card payment arrives.';
    default:
      return r.status === 'TERMINATED'
        ? 'Finished: the machine is destroyed (endedAt).'
        : `Terminating: call get_rental with rentalId ${r.rentalId} and waitFor ["TERMINATED"].`;
  }
}
