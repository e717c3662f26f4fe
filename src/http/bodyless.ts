import type { Request } from 'express';
import { AppError } from '../errors/app-error.js';

/**
 * Action endpoints without a body (terminate, reveal) refuse a JSON body that says something
 * (docs/api.md, Deployments), so a client that thinks it is sending parameters learns that
 * nothing is read. An empty body or an empty object, which many clients send with a JSON
 * Content-Type by default, says nothing and is ignored.
 */
export function assertBodyless(req: Request): void {
  const type = req.header('content-type');
  if (!type || !/(^|[/+])json\b/i.test(type.split(';')[0].trim())) return;
  const body: unknown = req.body;
  const empty =
    body === undefined ||
    (body !== null && typeof body === 'object' && !Array.isArray(body) && Object.keys(body).length === 0);
  if (!empty)
    throw new AppError(
      'INVALID_REQUEST',
      'This request takes no body and reads nothing of it: send it without one (an empty body or {} is ignored).',
    );
}
