import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { publishedKey, receiptKeyId, receiptSigner } from '../../src/modules/receipts/receipt-keys.js';
import type { TeardownReceiptDto } from '../../src/modules/receipts/receipts.dto.js';

/** A signing pair of the service's kind: its key id, private key, published key and signer. No database. */
export function receiptKeyPair() {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const x = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url');
  const id = receiptKeyId(x);
  return {
    id,
    privateKey,
    key: publishedKey({ id, publicKey: x, createdAt: new Date('2026-05-01T00:00:00.000Z'), retiredAt: null }),
    signer: receiptSigner(id, x, privateKey.export({ format: 'jwk' }).d!),
  };
}

/** A teardown receipt as the service issues one, for key `keyId`, with `over` in place of its fields. */
export function sampleReceipt(keyId: string, over: Partial<TeardownReceiptDto> = {}): TeardownReceiptDto {
  return {
    version: 1,
    type: 'gpr.teardown-receipt',
    issuer: 'https://gpu.example.com',
    rentalId: randomUUID(),
    deploymentId: randomUUID(),
    providerId: 'runpod',
    instanceId: 'pod-ab12',
    label: 'gpr-0123-1',
    startedAt: '2026-05-01T10:00:00.000Z',
    endedAt: '2026-05-01T11:00:00.000Z',
    provider: { state: 'gone', providerState: 'not found', httpStatus: 404, checkedAt: '2026-05-01T10:59:58.000Z' },
    ssh: { outcome: 'timed_out', checkedAt: '2026-05-01T10:59:59.000Z' },
    charged: { totalMinor: 299, currency: 'USD' },
    issuedAt: '2026-05-01T11:00:00.000Z',
    keyId,
    ...over,
  };
}
