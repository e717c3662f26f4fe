import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AgentAuthorization } from '../../src/modules/agents/agent-authorization.entity.js';
import type { IssueAgentKeyRequest } from '../../src/modules/agents/agents.dto.js';
import type { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import { accountsWorld, ownerOf, refusal, rows, type AccountsWorld } from '../fakes/accounts-services.js';

const BODY: IssueAgentKeyRequest = {
  name: 'worker',
  scopes: ['rent', 'read'],
  maxPerRentalMinor: 500,
  budgetLimitMinor: 2000,
  maxConcurrentDeployments: 1,
};

describe('AgentKeysService (memory store)', () => {
  let w: AccountsWorld;
  let owner: Awaited<ReturnType<typeof ownerOf>>;
  beforeEach(async () => {
    w = accountsWorld();
    owner = await ownerOf(w);
  });

  const issue = (body: IssueAgentKeyRequest = BODY, idem: string = randomUUID()) =>
    w.agentKeys.issueAgentKey(owner.principal, idem, body);
  const stored = (id: string) => w.store.tables.table<ApiKey>('api_keys').get(id)!;

  describe('issuing agent keys', () => {
    it('issues an agent key from an owner key, shown once; a replay answers the same key without its token', async () => {
      const idem = randomUUID();
      const first = await issue(BODY, idem);
      assert.equal(first.created, true);
      assert.ok(first.issued.token);
      assert.deepEqual(first.issued.key.scopes, ['read', 'rent']);
      assert.equal(stored(first.issued.key.id).issuedByKeyId, owner.key.id);
      const again = await issue({ ...BODY, scopes: ['read', 'rent', 'read'] }, idem);
      assert.equal(again.created, false);
      assert.equal(again.issued.token, null);
      assert.equal(again.issued.key.id, first.issued.key.id);
      assert.equal(rows(w, 'api_keys').length, 2);
    });

    it('refuses the same Idempotency-Key with another body, and a missing one', async () => {
      const idem = randomUUID();
      await issue(BODY, idem);
      assert.equal((await refusal(issue({ ...BODY, budgetLimitMinor: 2001 }, idem))).code, 'IDEMPOTENCY_CONFLICT');
      assert.equal(
        (await refusal(w.agentKeys.issueAgentKey(owner.principal, undefined, BODY))).code,
        'INVALID_REQUEST',
      );
    });

    it('keeps an agent key within its issuer: owner keys only, its scopes, its limits', async () => {
      const { issued } = await issue();
      const agent = await w.keys.authenticate(`Bearer ${issued.token}`);
      assert.equal((await refusal(w.agentKeys.issueAgentKey(agent, randomUUID(), BODY))).code, 'FORBIDDEN');
      const narrow = { ...owner.principal, scopes: owner.principal.scopes.filter((s) => s !== 'billing') };
      const scopes = await refusal(
        w.agentKeys.issueAgentKey(narrow, randomUUID(), { ...BODY, scopes: ['read', 'billing'] }),
      );
      assert.equal(scopes.code, 'FORBIDDEN');
      assert.match(scopes.message, /lacks: billing/);
      const over = await refusal(issue({ ...BODY, maxConcurrentDeployments: owner.key.maxConcurrentDeployments + 1 }));
      assert.equal(over.code, 'KEY_LIMIT_EXCEEDED');
      assert.equal(rows(w, 'api_keys').length, 2);
    });

    it('refuses a frozen account (402) and a revoked issuing key (401)', async () => {
      const frozen = await ownerOf(w, { frozen: true });
      const err = await refusal(w.agentKeys.issueAgentKey(frozen.principal, randomUUID(), BODY));
      assert.equal(err.code, 'ACCOUNT_FROZEN');
      await w.keys.revoke(owner.account.id, owner.key.id);
      assert.equal((await refusal(issue())).code, 'UNAUTHENTICATED');
    });

    it('issues one key when its commit is lost once and it runs again', async () => {
      w.store.loseNextCommits(1);
      const { created, issued } = await issue();
      assert.equal(created, true);
      assert.equal(rows(w, 'api_keys').length, 2);
      assert.equal((await w.keys.authenticate(`Bearer ${issued.token}`)).keyId, issued.key.id);
    });
  });

  describe('listing and revoking', () => {
    it("lists the account's agent keys and owner keys, newest first, with their usage", async () => {
      const a = await issue();
      w.clock.advance(1000);
      const b = await issue();
      const agents = await w.agentKeys.listAgentKeysFor(owner.principal);
      assert.deepEqual(
        agents.map((k) => k.id),
        [b.issued.key.id, a.issued.key.id],
      );
      assert.equal(agents[0].remainingBudgetMinor, BODY.budgetLimitMinor);
      const owners = await w.agentKeys.listOwnerKeys(owner.account.id);
      assert.deepEqual(
        owners.map((k) => k.id),
        [owner.key.id],
      );
      const agent = await w.keys.authenticate(`Bearer ${a.issued.token}`);
      assert.equal((await refusal(w.agentKeys.listAgentKeysFor(agent))).code, 'FORBIDDEN');
    });

    it("revokes an agent key with its unfinished rentals listed, and never an owner key or another account's", async () => {
      const { issued } = await issue();
      w.rentalsOfKey.set(issued.key.id, [
        { deploymentId: 'dep-1', orderId: 'ord-1', keyId: issued.key.id, status: 'ACTIVE' },
      ]);
      const revoked = await w.agentKeys.revokeAgentKey(owner.account.id, issued.key.id);
      assert.equal(revoked.revokedAt, w.clock.now().toISOString());
      assert.deepEqual(revoked.liveRentals, [
        { rentalId: 'ord-1', deploymentId: 'dep-1', keyId: issued.key.id, status: 'ACTIVE' },
      ]);
      assert.equal(revoked.rentalsTerminated, false);
      assert.deepEqual(w.terminated, []);
      const ownerKey = await refusal(w.agentKeys.revokeAgentKey(owner.account.id, owner.key.id));
      assert.equal(ownerKey.code, 'NOT_FOUND');
      const stranger = await ownerOf(w);
      assert.equal((await refusal(w.agentKeys.revokeAgentKey(stranger.account.id, issued.key.id))).code, 'NOT_FOUND');
    });

    it('terminates the revoked key rentals on request, through the owner path', async () => {
      const { issued } = await issue();
      w.rentalsOfKey.set(issued.key.id, [
        { deploymentId: 'dep-2', orderId: 'ord-2', keyId: issued.key.id, status: 'PROVISIONING' },
      ]);
      const revoked = await w.agentKeys.revokeAgentKey(owner.account.id, issued.key.id, { terminateRentals: true });
      assert.deepEqual(w.terminated, ['dep-2']);
      assert.equal(revoked.rentalsTerminated, true);
      assert.equal(revoked.liveRentals[0].status, 'TERMINATING');
    });

    it('cannot terminate rentals when built without the rentals service', async () => {
      w = accountsWorld({ withoutRentals: true });
      owner = await ownerOf(w);
      const { issued } = await issue();
      w.rentalsOfKey.set(issued.key.id, [
        { deploymentId: 'dep-3', orderId: 'ord-3', keyId: issued.key.id, status: 'ACTIVE' },
      ]);
      await assert.rejects(
        w.agentKeys.revokeAgentKey(owner.account.id, issued.key.id, { terminateRentals: true }),
        /without the rentals service/,
      );
    });

    it('revokes an owner key with everything it let in: issued keys and unexchanged approvals', async () => {
      const { issued } = await issue();
      const session = await w.agents.beginAuthorization();
      await w.agents.approveWithKey(owner.principal, session.approvalUrl.split('/').pop()!, {
        maxPerRentalMinor: 500,
        budgetLimitMinor: 500,
        maxConcurrentDeployments: 1,
        maxRentalSeconds: null,
        idleTerminateMinutes: null,
      });
      const unrelated = await w.agentKeys.issueAgentKey((await ownerOf(w)).principal, randomUUID(), BODY);
      const out = await w.agentKeys.revokeOwnerKey(owner.account.id, owner.key.id);
      assert.equal(out.id, owner.key.id);
      assert.deepEqual(out.revokedAgentKeyIds, [issued.key.id]);
      assert.deepEqual(out.revokedAuthorizationIds, [session.authorizationId]);
      assert.ok(stored(owner.key.id).revokedAt);
      assert.ok(stored(issued.key.id).revokedAt);
      assert.equal(stored(unrelated.issued.key.id).revokedAt, null);
      const [row] = rows<AgentAuthorization>(w, 'agent_authorizations');
      assert.equal(row.status, 'REVOKED');
      assert.equal((await refusal(w.agents.exchange(session.setupCode))).code, 'AGENT_SETUP_INVALID');
      assert.equal((await refusal(w.keys.authenticate(`Bearer ${issued.token}`))).code, 'UNAUTHENTICATED');
    });

    it('repeats an owner key revocation: its time stays, and its rentals and its keys are listed again', async () => {
      const { issued } = await issue();
      const first = await w.agentKeys.revokeOwnerKey(owner.account.id, owner.key.id);
      w.clock.advance(60_000);
      w.rentalsOfKey.set(issued.key.id, [
        { deploymentId: 'dep-4', orderId: 'ord-4', keyId: issued.key.id, status: 'ACTIVE' },
      ]);
      const again = await w.agentKeys.revokeOwnerKey(owner.account.id, owner.key.id);
      assert.equal(again.revokedAt, first.revokedAt);
      assert.deepEqual(again.revokedAgentKeyIds, []);
      assert.equal(again.liveRentals.length, 1);
      const agentKey = await refusal(w.agentKeys.revokeOwnerKey(owner.account.id, issued.key.id));
      assert.equal(agentKey.code, 'NOT_FOUND');
    });
  });
});
