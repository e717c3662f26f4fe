import type { Request } from 'express';
import { AppError } from '../errors/app-error.js';

/**
 * Action endpoints without a body (terminate, reveal) refuse a JSON Content-Type (docs/api.md,
 * Deployments), so a client that thinks it is sending parameters learns that nothing is read.
 */
export function assertBodyless(req: Request): void {
  const type = req.header('content-type');
  if (type && /(^|[/+])json\b/i.test(type.split(';')[0].trim())) {
    throw new AppError('INVALID_REQUEST', 'This request takes no body; send it without a JSON Content-Type.');
  }
}
