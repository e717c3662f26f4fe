import { formatCents, GprApiError, type Topup } from '@gpu-rental/sdk';
import {
  type CallToolResult,
  type InputRequiredResult,
  inputRequired,
  inputResponse,
} from '@modelcontextprotocol/server';
import { openTopup, TOPUP_MAX_MINOR, TOPUP_MIN_MINOR } from './account-tools.js';
import { apiFailureText } from './guard.js';
import type { CallExtra } from './rental-steps.js';
import type { ToolDeps } from './tool.js';

// create_rental refused for credits: a top-up link for a human, asked for inside the conversation.

/** What a link is for when the refusal does not say how much is short. */
export const DEFAULT_TOPUP_MINOR = 2000;

/** The key of the URL elicitation among a call's input requests and the client's answers. */
const TOPUP_INPUT = 'topup';

/** What a round of create_rental leaves for the next one: the rental's key and the link it offered. */
interface FundingState {
  idempotencyKey: string;
  /** Absent when the link was the owner's (the key makes no top-up links of its own). */
  topupId?: string;
}

/**
 * The top-up that would lift a credit refusal of create_rental, in cents, or null when `err` is
 * not one. INSUFFICIENT_CREDITS says what the rental needs and what the account has free; a
 * negative balance (ACCOUNT_FROZEN) says its debt. A frozen account is not lifted by paying.
 */
export function topupFor(err: unknown): number | null {
  if (!(err instanceof GprApiError)) return null;
  if (err.code === 'INSUFFICIENT_CREDITS') {
    const m = /needs (\d+) cents of credits; the account has (-?\d+)(?: \((\d+) of them reserved)?/.exec(err.message);
    if (!m) return DEFAULT_TOPUP_MINOR;
    const free = Number(m[2]) - Number(m[3] ?? 0);
    return linkAmount(Number(m[1]) - free);
  }
  if (err.code === 'ACCOUNT_FROZEN') {
    const m = /credits are negative \((-\d+) cents\)/.exec(err.message);
    return m ? linkAmount(-Number(m[1]) + DEFAULT_TOPUP_MINOR) : null;
  }
  return null;
}

/** A shortfall as a link's amount: whole dollars, within what one link may ask for. */
const linkAmount = (shortMinor: number): number =>
  Math.min(TOPUP_MAX_MINOR, Math.max(TOPUP_MIN_MINOR, Math.ceil(shortMinor / 100) * 100));

/**
 * The human's answer to the link an earlier round of this call offered (`accept`: they went to
 * open it), or null on a first round.
 */
export function topupAnswer(extra: CallExtra | undefined): 'accept' | 'decline' | 'cancel' | null {
  const view = inputResponse(extra?.inputResponses, TOPUP_INPUT);
  return view.kind === 'elicit' ? view.action : null;
}

/**
 * What an earlier round left, if it reads as one. The client sends it back, so it is trusted for
 * nothing the model could not ask for itself: a rental key it could pass as input, and a top-up
 * id the service reads only for this key's account.
 */
export function fundingState(extra: CallExtra | undefined): FundingState | null {
  if (!extra?.requestState) return null;
  try {
    const s = JSON.parse(extra.requestState) as Partial<FundingState>;
    const printable = (v: unknown, max: number) =>
      typeof v === 'string' && v.length >= 1 && v.length <= max && !/[\x00-\x1f\x7f]/.test(v);
    if (!printable(s.idempotencyKey, 128)) return null;
    if (s.topupId === undefined) return { idempotencyKey: s.idempotencyKey! };
    if (printable(s.topupId, 100) && /^[A-Za-z0-9_-]+$/.test(s.topupId!))
      return { idempotencyKey: s.idempotencyKey!, topupId: s.topupId! };
  } catch {
    // Not ours: the call goes on as a first round would.
  }
  return null;
}

/**
 * The answer to a create_rental refused for credits. A top-up link is made for the shortfall
 * (the one an earlier round offered, while it can still be paid); a client that can show a human
 * a URL is asked to, once, through URL-mode elicitation, after which the call runs again; any
 * other client gets the link in the refusal. When no link can be made, the refusal says to call
 * create_topup_link.
 */
export async function creditRefusal(
  err: GprApiError,
  amountMinor: number,
  idempotencyKey: string,
  deps: ToolDeps,
  extra: CallExtra | undefined,
): Promise<CallToolResult | InputRequiredResult> {
  const answer = topupAnswer(extra);
  const offered = answer ? fundingState(extra)?.topupId : undefined;
  let topup: Topup;
  try {
    topup = await linkFor(deps, amountMinor, offered);
  } catch (linkErr) {
    const noBilling = linkErr instanceof GprApiError && linkErr.code === 'FORBIDDEN';
    const owners = noBilling ? deps.ownerTopupUrl?.(amountMinor) : null;
    if (owners) return ownerFunding(err, amountMinor, owners, idempotencyKey, deps, extra, answer);
    if (noBilling) {
      // No link of the owner's to send (no bot): only the owner can add credits; say how.
      const next = `This key cannot add credits; the account owner can (POST /api/v1/billing/topups with an owner key, then paying the link). Ask them to add ${formatCents(amountMinor)}, then call create_rental again with idempotencyKey ${idempotencyKey}.`;
      return { isError: true, content: [{ type: 'text', text: apiFailureText(err, next) }] };
    }
    const why = linkErr instanceof GprApiError ? `${linkErr.code}: ${linkErr.message}` : (linkErr as Error).message;
    return {
      isError: true,
      content: [
        {
          type: 'text',
          text: apiFailureText(
            err,
            `No top-up link could be made here (${why}). Call create_topup_link with amountMinor ${amountMinor} and ask a human to pay the link, then call create_rental again with idempotencyKey ${idempotencyKey}.`,
          ),
        },
      ],
    };
  }
  const url = topup.paymentUrl!;
  const price = formatCents(topup.amountMinor);
  if (extra?.urlElicitation && !answer) {
    deps.log(`create_rental: ${err.code}: asking the human to pay a top-up link`);
    return inputRequired({
      inputRequests: {
        [TOPUP_INPUT]: inputRequired.elicitUrl({
          message: `This GPU rental needs more credits. Paying ${price} on the service's payment page adds them; only a payment there does.`,
          url,
        }),
      },
      requestState: JSON.stringify({ idempotencyKey, topupId: topup.topupId } satisfies FundingState),
    });
  }
  const shown =
    topup.topupId !== offered
      ? ''
      : answer === 'accept'
        ? 'The human was shown this link and it is not paid yet. '
        : `The human was shown this link and ${answer === 'decline' ? 'declined' : 'dismissed'} it. `;
  const next =
    `${shown}A top-up link for ${price} is ready: give ${url} to a human to pay (only their payment adds credits${topup.expiresAt ? `; it expires at ${topup.expiresAt}` : ''}). ` +
    `Once they have paid, call create_rental again with idempotencyKey ${idempotencyKey}.`;
  return {
    isError: true,
    content: [{ type: 'text', text: apiFailureText(err, next) }],
    structuredContent: {
      code: err.code,
      topupUrl: url,
      topup: {
        topupId: topup.topupId,
        amountMinor: topup.amountMinor,
        status: topup.status,
        expiresAt: topup.expiresAt,
      },
      idempotencyKey,
      next,
    },
  };
}

/**
 * The answer for a key that makes no top-up links (no `billing` scope, as every agent key an owner
 * approved): the owner's own way to add credits, by URL, asked for as a top-up link would be.
 */
function ownerFunding(
  err: GprApiError,
  amountMinor: number,
  url: string,
  idempotencyKey: string,
  deps: ToolDeps,
  extra: CallExtra | undefined,
  answer: ReturnType<typeof topupAnswer>,
): CallToolResult | InputRequiredResult {
  const price = formatCents(amountMinor);
  if (extra?.urlElicitation && !answer) {
    deps.log(`create_rental: ${err.code}: asking the owner to add credits`);
    return inputRequired({
      inputRequests: {
        [TOPUP_INPUT]: inputRequired.elicitUrl({
          message: `This GPU rental needs more credits, which only the account owner can add: this link asks the owner's Telegram bot for a ${price} card payment link.`,
          url,
        }),
      },
      requestState: JSON.stringify({ idempotencyKey } satisfies FundingState),
    });
  }
  const shown = answer
    ? `The human was shown this link and ${answer === 'accept' ? 'opened it; credits have not arrived yet' : 'did not open it'}. `
    : '';
  const next =
    `${shown}This key cannot add credits; the account owner can: give ${url} to the owner (it asks their Telegram bot for a ${price} card payment link; only that payment adds credits). ` +
    `Once they have paid, call create_rental again with idempotencyKey ${idempotencyKey}.`;
  return {
    isError: true,
    content: [{ type: 'text', text: apiFailureText(err, next) }],
    structuredContent: { code: err.code, topupUrl: url, idempotencyKey, next },
  };
}

/** The link an earlier round offered while it can still be paid, else a new one; always with its URL. */
async function linkFor(deps: ToolDeps, amountMinor: number, offered: string | undefined): Promise<Topup> {
  const client = deps.client();
  if (offered) {
    const earlier = await client.getTopup(offered).catch(() => null);
    if (earlier?.status === 'OPEN' && earlier.paymentUrl) return earlier;
  }
  const topup = await openTopup(deps, amountMinor, crypto.randomUUID());
  // The link is written a moment after the top-up; read once more before giving up on it.
  const ready = topup.paymentUrl ? topup : await client.getTopup(topup.topupId);
  if (!ready.paymentUrl) throw new Error(`top-up ${topup.topupId} has no payment link yet`);
  return ready;
}
