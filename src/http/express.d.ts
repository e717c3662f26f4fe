import type { Principal } from './principal.js';

declare global {
  namespace Express {
    interface Request {
      requestId: string;
      user?: Principal;
      rawBody?: Buffer;
    }
  }
}
export {};
