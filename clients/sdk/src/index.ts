export * from './client.js';
export * from './errors.js';
export {
  type EventPage,
  type EventType,
  type GprEvent,
  parseSse,
  type SseMessage,
  type StreamOptions,
} from './events.js';
export { retryingFetch, type RetryPolicy } from './transport.js';
export type { paths, components } from './generated/openapi.js';
export * from './config-file.js';
export * from './ssh-target.js';
export * from './receipts.js';
// The vocabulary the service speaks too (statuses, limits, money, durations, hints), kept below
// both in the repository's src/vocabulary/ and compiled into this package.
export * from '../../../src/vocabulary/statuses.js';
export * from '../../../src/vocabulary/limits.js';
export * from '../../../src/vocabulary/money.js';
export { formatUsd as formatCents } from '../../../src/vocabulary/money.js';
export * from '../../../src/vocabulary/durations.js';
export * from '../../../src/vocabulary/access-hints.js';
export * from '../../../src/vocabulary/budget-hints.js';
export * from '../../../src/vocabulary/rental-hints.js';
export * from '../../../src/vocabulary/machine-hints.js';
export * from '../../../src/vocabulary/webhooks.js';
export * from '../../../src/vocabulary/releases.js';
export * from '../../../src/vocabulary/receipts.js';
