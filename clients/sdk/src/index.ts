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
export * from './money.js';
export * from './duration.js';
export * from './hints.js';
export * from './webhook-hints.js';
export { retryingFetch, type RetryPolicy } from './transport.js';
export type { paths, components } from './generated/openapi.js';
export * from './config-file.js';
export * from './ssh-target.js';
