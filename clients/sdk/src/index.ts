export * from './client.js';
export * from './errors.js';
export * from './money.js';
export * from './duration.js';
export * from './hints.js';
export { retryingFetch, type RetryPolicy } from './transport.js';
export type { paths, components } from './generated/openapi.js';
export * from './config-file.js';
export * from './ssh-target.js';
