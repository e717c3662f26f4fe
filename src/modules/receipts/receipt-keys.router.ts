import { Router, type Request, type Response } from 'express';
import { RECEIPT_KEYS_PATH } from '../../vocabulary/receipts.js';
import type { ReceiptsService } from './receipts.service.js';

/**
 * How long a copy of the key set may be used: a new key appears with the first receipt it signs
 * after a SECRETS_KEY rotation, so a stale copy must not stay long (a verifier that meets an
 * unknown key id fetches the set again).
 */
const KEYS_CACHE_CONTROL = 'public, max-age=60';

/**
 * The receipt keys at {@link RECEIPT_KEYS_PATH}: a JWK Set (RFC 7517) of every key that ever
 * signed a receipt, retired ones included, readable by anyone from anywhere (no credential, no
 * envelope: the form verifiers and JOSE libraries read).
 */
export function receiptKeysRouter(receipts: Pick<ReceiptsService, 'keySet'>): Router {
  const router = Router();
  router.get(RECEIPT_KEYS_PATH, async (_req: Request, res: Response) => {
    const set = await receipts.keySet();
    res.setHeader('Cache-Control', KEYS_CACHE_CONTROL);
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.type('application/jwk-set+json').send(JSON.stringify(set));
  });
  return router;
}
