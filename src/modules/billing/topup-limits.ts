/**
 * Top-up bounds in cents (docs/api.md, Limits). `TopupRequest.amountMinor` in billing.dto.ts declares
 * the same numbers for the OpenAPI document (a test holds them equal); the bot imports these.
 */
export const TOPUP_LIMITS = { minimumMinor: 500, maximumMinor: 50_000 } as const;
