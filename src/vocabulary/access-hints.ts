/**
 * How to call the API at all: the Idempotency-Key a write carries and the API key every call
 * sends, in the words of the service's refusals, `/llms.txt`, the skill and the clients.
 */

/** Commands that print a fresh UUID on any machine with Node or Linux (uuidgen is often absent). */
export const UUID_RECIPE =
  '`node -e "console.log(crypto.randomUUID())"`, `python3 -c "import uuid; print(uuid.uuid4())"` or `cat /proc/sys/kernel/random/uuid`';

/** The shell substitution the quickstart uses for a fresh key: works wherever Node runs. */
export const UUID_SHELL = `$(node -e "console.log(crypto.randomUUID())")`;

/** What an Idempotency-Key is, that a retry reuses it, and how to make one. */
export const IDEMPOTENCY_KEY_HINT =
  'Idempotency-Key is a header of 1 to 128 printable characters that names this one intent, e.g. a UUID. ' +
  'Send a new one for each new request; when retrying the same request, send the same key and body, so it is done once. ' +
  `Make one with ${UUID_RECIPE}.`;

/** How to send an API key and how to get one; the 401 message carries it for every cause alike. */
export const AUTH_HINT =
  'Send the key as `Authorization: Bearer gpr_<prefix>.<secret>`. ' +
  "A key that worked before and now gets this was revoked: ask the account owner for a new key or a setup code (signing up instead makes a new, unfunded account unrelated to the owner's). " +
  'No key yet: POST /api/v1/signup creates an account and a key (no key needed), or exchange a setup code from the account owner with POST /api/v1/agent-setups/exchange (or `gpr setup <code>`).';
