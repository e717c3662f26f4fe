import assert from 'node:assert/strict';
import { checksRevocationInTransaction } from '../../src/http/authentication.js';
import { ROUTE_FACTS, specRoutes } from '../../src/http/route-facts.js';

describe('discovery: index, llms.txt and the OpenAPI document', () => {
  it('lets only admission, which re-reads the revocation under its account lock, use a key read moments ago', () => {
    const stating = specRoutes().filter((r) => r.operation[ROUTE_FACTS.revocationCheckedInTransaction] === true);
    assert.deepEqual(
      stating.map((r) => `${r.method.toUpperCase()} ${r.path}`),
      ['POST /api/v1/rentals'],
    );
    assert.ok(checksRevocationInTransaction('POST /api/v1/rentals'));
    for (const route of [
      'GET /api/v1/rentals',
      'GET /api/v1/rentals/:id',
      'POST /api/v1/deployments/:id/terminate',
      'POST /api/v1/orders/checkout',
    ]) {
      assert.ok(!checksRevocationInTransaction(route), route);
    }
  });
});
