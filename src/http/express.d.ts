import type { Caller } from './authentication.js';

declare global {
  namespace Express {
    interface Request {
      requestId: string;
      user?: Caller;
      rawBody?: Buffer;
    }
  }
}
export {};
