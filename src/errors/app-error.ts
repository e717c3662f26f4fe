import { ERROR_STATUS, type ErrorCode } from './error-codes.js';

/** The one error type services throw; the HTTP layer maps `code` to a status and the envelope. */
export class AppError extends Error {
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'AppError';
    this.status = ERROR_STATUS[code];
  }
}
