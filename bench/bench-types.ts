/*
 * Types the benches and their child processes share, below both: a funded bench client, and what
 * each child process (bench/service-process.ts, bench/express-floor-process.ts) is asked and
 * answers over IPC.
 */
import type { Offer } from '../src/modules/inventory/offer.entity.js';

/** One funded bench account and its agent key (made by support.ts's makeClients). */
export interface Client {
  auth: string;
  accountId: string;
  keyId: string;
}

/** What a bench asks its service process (bench/service-process.ts). */
export type ServiceRequest =
  | { type: 'stats' }
  | { type: 'profile-start'; intervalUs: number }
  | { type: 'profile-stop'; path: string }
  | { type: 'close' };

/** What the service process answers: `ready` once, then one answer per request. */
export type ServiceMessage =
  | { type: 'ready'; base: string }
  | { type: 'stats'; userUs: number; systemUs: number; statements: number; requests: number; deadlocks: number }
  | { type: 'profile-started' }
  | { type: 'profile-stopped' }
  | { type: 'closed' };

/** What the bench sends the floor process (bench/express-floor-process.ts). */
export type FloorRequest =
  { type: 'clients'; clients: Client[]; offer: Offer; answer: string } | { type: 'stats' } | { type: 'close' };

/** What the floor process answers: `ready` once, then one answer per request. */
export type FloorMessage =
  | { type: 'ready'; base: string }
  | { type: 'clients-set' }
  | { type: 'stats'; userUs: number; systemUs: number }
  | { type: 'closed' };
