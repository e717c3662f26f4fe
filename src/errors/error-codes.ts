/**
 * Every error code the API can return, mapped to its HTTP status: a code always comes with the
 * same status. docs/errors.md is generated from this table and {@link ERROR_DESCRIPTIONS}.
 */
export const ERROR_STATUS = {
  INVALID_REQUEST: 400,
  UNAUTHENTICATED: 401,
  INSUFFICIENT_CREDITS: 402,
  ACCOUNT_FROZEN: 402,
  FORBIDDEN: 403,
  KEY_LIMIT_EXCEEDED: 403,
  NOT_FOUND: 404,
  OFFER_NOT_FOUND: 404,
  IDEMPOTENCY_CONFLICT: 409,
  SIGNUP_ALREADY_COMPLETED: 409,
  AGENT_SETUP_INVALID: 409,
  AGENT_AUTHORIZATION_PENDING: 409,
  CONCURRENCY_LIMIT_REACHED: 409,
  DEPLOYMENT_NOT_ACTIVE: 409,
  TOPUP_EXPIRED: 410,
  VALIDATION_FAILED: 422,
  BUDGET_REQUIRED: 422,
  BUDGET_TOO_SMALL: 422,
  NO_MATCHING_OFFER: 422,
  EMAIL_REQUIRED: 422,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  INTERNAL: 500,
  AGENTS_DISABLED: 503,
  UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/**
 * When each code is answered, in words a client can act on. `npm run docs` renders these into
 * docs/errors.md; a test fails when the page and this table differ.
 */
export const ERROR_DESCRIPTIONS: Record<ErrorCode, string> = {
  INVALID_REQUEST:
    'The request itself is malformed: JSON that does not parse or is nested deeper than 32 levels, a corrupt compressed body, a malformed percent-escape in the path, a missing or malformed `Idempotency-Key` (a UUID for signup, 1 to 128 characters elsewhere) or other header, a JSON `Content-Type` on a call that takes no body (terminate, reveal), an unreadable `cursor`, or a payment webhook without a valid signature.',
  UNAUTHENTICATED:
    'No usable API key: absent, malformed, unknown or revoked keys all get the same body, with `WWW-Authenticate: Bearer`. Also a Telegram webhook call without the right secret token.',
  INSUFFICIENT_CREDITS:
    "The account's credits not yet reserved by running rentals do not cover what this rental needs (the debit of a prepaid rental, the reservation of a metered one). The message says who can add credits.",
  ACCOUNT_FROZEN:
    'The account is frozen or its credits are negative: it starts no rentals and brings in no new agents (approving, issuing agent keys) until it is topped up or unfrozen.',
  FORBIDDEN:
    'The key is valid but may not do this: it lacks the scope the route needs, an agent key called an owner-only route, an agent key tried to set the account e-mail, or an owner asked for agent scopes beyond its own.',
  KEY_LIMIT_EXCEEDED:
    "The request is well-formed but goes beyond a key's limits: a prepaid debit above the key's per-rental cap, a rental that needs more than the key's remaining lifetime budget, or an agent key with limits larger than the owner key issuing or approving it.",
  NOT_FOUND:
    "Nothing the calling key may see has this id (other accounts' and other agents' resources are not found either), or no route has this path. Also a rental's teardown receipt that does not exist (yet): the message says why, and for a rental still running or ending that it is issued when the rental becomes TERMINATED.",
  OFFER_NOT_FOUND:
    'A rental named an offer id the inventory never had. An offer that was listed but has since gone is admitted and then fails in provisioning with `failureCode: OFFER_NOT_FOUND` on the rental.',
  IDEMPOTENCY_CONFLICT:
    '`Idempotency-Key` reused with a different body, or by a different key of the account: nothing was done. Send a new key for a new request.',
  SIGNUP_ALREADY_COMPLETED:
    'A signup was repeated with an `Idempotency-Key` that already created an account (the key is not shown again: use it if kept, else sign up with a new `Idempotency-Key` or ask the owner for a setup code), or a signup carried a working API key of an existing account, which it would have duplicated as a second, empty account.',
  AGENT_SETUP_INVALID:
    'A setup code is unknown, expired (10 minutes) or already exchanged, or an authorization session was already approved or has expired.',
  AGENT_AUTHORIZATION_PENDING:
    'The owner has not approved the authorization session yet: poll the exchange again after `Retry-After` seconds.',
  CONCURRENCY_LIMIT_REACHED:
    'The key already has `maxConcurrentDeployments` rentals that are not finished (unpaid card orders included): terminate one first.',
  DEPLOYMENT_NOT_ACTIVE:
    "A deployment's credentials asked for while it is not `ACTIVE`; the message gives its status. While it is `PENDING` or `PROVISIONING` it is starting: retry after `Retry-After` seconds. `AWAITING_PAYMENT` starts once its card payment arrives. `TERMINATING`, `TERMINATED` and `FAILED` never become `ACTIVE` again: do not retry.",
  TOPUP_EXPIRED: 'The top-up link of this `Idempotency-Key` expired unpaid: ask for a new top-up with a new key.',
  VALIDATION_FAILED:
    "The body or query does not fit the schema: the message names each offending field (its unit or form when that is what is wrong), both shapes of a body that mixes them, and for properties the route does not know the first five and how many more. Also a webhook endpoint past its key's limit of 10.",
  BUDGET_REQUIRED: 'A rental on a `LEGACY_PREPAID` account came without `budgetMinor`.',
  BUDGET_TOO_SMALL:
    '`budgetMinor` is under 500 cents ($5.00) on any rental, or buys no whole hour of the offer for a prepaid rental or a card checkout.',
  NO_MATCHING_OFFER:
    'A GPU-intent rental found nothing to rent; the message says why: an unknown model (with the closest known ones), none on offer now, not with that GPU count (with the counts there are), or all above the price ceiling (with the cheapest price).',
  EMAIL_REQUIRED: 'A card checkout on an account without an e-mail: set one with `PUT /api/v1/me/email` first.',
  PAYLOAD_TOO_LARGE:
    "The body is larger than the route's limit: 8 KiB for API routes; for `POST /api/v1/rentals` what a 16,384-byte script and 32,768 bytes of variables need however they are escaped (about 297 KiB); 256 KiB for the payment webhook. The message names the route's largest fields and their own limits.",
  UNSUPPORTED_MEDIA_TYPE:
    'The body uses a charset other than UTF-8, a `Content-Encoding` other than gzip, deflate and br, or a media type other than JSON (a body sent without `Content-Type`, or labelled as a form or plain text, is read as JSON when it parses).',
  RATE_LIMITED:
    "Too many requests of this kind from this client address, or across the service (signups): wait `Retry-After` seconds. Also: more event streams and waiting reads open than a key, a client address or the process allows (close one); more webhook redeliveries than a delivery or a key may ask for in an hour; and on a rental, a key whose last 3 rentals within 24 hours failed after their machines ran its script or image without passing the service's check: it may rent again after `Retry-After` seconds.",
  INTERNAL:
    'A fault of the service, never of the request: the message is generic, and the cause is logged under the request id.',
  AGENTS_DISABLED:
    'Agent creation is switched off on this service (`AGENT_V1_ENABLED=false`): signup, authorization sessions and setup-code exchange are refused.',
  UNAVAILABLE:
    "The database or the payment provider cannot be reached right now, or the database is not migrated yet: retry later, with the same `Idempotency-Key` for a create. On a rental, also while billing catches up with the account's running rentals (the service's metering is behind): retry after `Retry-After` seconds.",
};
