// How a webhook receiver checks a delivery, in words and as code: for `/llms.txt` and the skill.

/** How a receiver checks a delivery (Standard Webhooks), for `/llms.txt` and the skill. */
export const WEBHOOK_VERIFY_RULE =
  'Each delivery is a POST of one event (`{id, type, createdAt, data}`, as GET /api/v1/events shows it) signed per Standard Webhooks: ' +
  'headers `webhook-id` (the event id, the same on every retry: drop ids you already have), `webhook-timestamp` (unix seconds) and `webhook-signature` ' +
  "(`v1,` and the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<raw body>`, keyed by the base64-decoded part of the endpoint's `secret` after `whsec_`; " +
  'several space-separated when the secret rotates). Accept a delivery when one signature matches (compare in constant time) and the timestamp is within 5 minutes of now; ' +
  'answer 2xx within 10 s, or it is retried for 24 hours.';

/** The same check as code a receiver can paste (Node.js). */
export const WEBHOOK_VERIFY_SNIPPET = [
  "import { createHmac, timingSafeEqual } from 'node:crypto';",
  '// secret: the whsec_... the endpoint was created with; headers: lower-case names; body: the raw request body as a string',
  'function verified(secret, headers, body) {',
  "  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');",
  "  const expected = Buffer.from(`v1,${createHmac('sha256', key).update(`${headers['webhook-id']}.${headers['webhook-timestamp']}.${body}`).digest('base64')}`);",
  "  const fresh = Math.abs(Date.now() / 1000 - Number(headers['webhook-timestamp'])) <= 300;",
  "  return fresh && String(headers['webhook-signature']).split(' ').some((s) => s.length === expected.length && timingSafeEqual(Buffer.from(s), expected));",
  '}',
].join('\n');
