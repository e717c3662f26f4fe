// The owner bot's deep links (`https://t.me/<bot>?start=<payload>`): built by the pages and the
// remote MCP endpoint, read by the bot's /start, by these rules alone.

/** `/start approve_<approval code>`: the pending agent authorization, to approve with limits. */
export const approvePayload = (approvalCode: string) => `approve_${approvalCode}`;

/** `/start topup_<cents>`: a card payment link for that many cents of credits. */
export const topupPayload = (amountMinor: number) => `topup_${amountMinor}`;
/** Reads a top-up payload; the amount's range is the top-up's own rule. */
export const TOPUP_PAYLOAD = /^topup_(\d{1,9})$/;

/** The link that opens the bot `botUsername` with `payload`. */
export function deepLink(botUsername: string, payload: string): string {
  return `https://t.me/${encodeURIComponent(botUsername)}?start=${encodeURIComponent(payload)}`;
}
