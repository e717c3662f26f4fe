import { CredentialReveal } from '../../../src/modules/credentials/credential-reveal.entity.js';
import type {
  CredentialRevealsRepository,
  RefusedReveal,
  RevealRow,
} from '../../../src/modules/credentials/credential-reveals.repository.js';
import type { CredentialsRepository } from '../../../src/modules/credentials/credentials.repository.js';
import type { Viewer } from '../../../src/modules/keys/visibility.js';
import { Deployment } from '../../../src/modules/rentals/store/deployment.entity.js';
import { Order } from '../../../src/modules/rentals/store/order.entity.js';
import type { RentalStatus } from '../../../src/vocabulary/statuses.js';
import type { MemoryTables } from './memory-store.js';

type Row = Record<string, unknown> & { id: string };

/** `credential_reveals` in memory, with the unique (key, refusal, window) of refused calls. */
export class MemoryCredentialReveals implements CredentialRevealsRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get reveals() {
    return this.tables.table<CredentialReveal>('credential_reveals');
  }

  async lockDeploymentFor(viewer: Viewer, id: string): Promise<Deployment | null> {
    const deployments = this.tables.table<Deployment>('deployments');
    const visible = (d: Deployment) =>
      d.accountId === viewer.accountId && (viewer.kind === 'OWNER' || d.keyId === viewer.keyId);
    return (
      deployments.first((d) => visible(d) && d.id === id) ??
      deployments.first((d) => visible(d) && d.orderId === id) ??
      null
    );
  }

  async insertReveal(row: RevealRow): Promise<void> {
    const id = this.reveals.nextId();
    this.reveals.insert(
      id,
      Object.assign(new CredentialReveal(), {
        id,
        ...row,
        outcome: 'REVEALED' as const,
        refusal: null,
        refusalWindow: null,
        refusedCalls: 1,
        lastCalledAt: null,
      }),
    );
  }

  async countRefused(r: RefusedReveal): Promise<void> {
    // DATETIME without fractions: the window is stored to the second.
    const window = new Date(Math.floor(r.window.getTime() / 1000) * 1000);
    const [key] = this.reveals.keysWhere(
      (x) => x.keyId === r.keyId && x.refusal === r.refusal && x.refusalWindow?.getTime() === window.getTime(),
    );
    const row = key === undefined ? undefined : this.reveals.get(key);
    if (key !== undefined && row) {
      this.reveals.update(key, { refusedCalls: row.refusedCalls + 1, lastCalledAt: r.at });
      return;
    }
    const id = this.reveals.nextId();
    this.reveals.insert(
      id,
      Object.assign(new CredentialReveal(), {
        id,
        deploymentId: r.deploymentId,
        accountId: r.accountId,
        keyId: r.keyId,
        requestId: r.requestId,
        outcome: 'REFUSED' as const,
        refusal: r.refusal,
        refusalWindow: window,
        refusedCalls: 1,
        calledAt: r.at,
        lastCalledAt: r.at,
      }),
    );
  }

  async ofKey(keyId: string): Promise<CredentialReveal[]> {
    return this.reveals.where((r) => r.keyId === keyId).sort((a, b) => Number(a.id) - Number(b.id));
  }
}

/** The credentials aggregate in memory. */
export class MemoryCredentialsRepository implements CredentialsRepository {
  readonly reveals: CredentialRevealsRepository;

  constructor(tables: MemoryTables) {
    this.reveals = new MemoryCredentialReveals(tables);
  }
}

/** A rental, as {@link memoryCredentialsSeed} writes it. */
interface MemorySeededRental {
  accountId: string;
  keyId: string;
  orderId: string;
  deploymentId: string;
  status: RentalStatus;
  sshKey?: { sealed: Buffer; keyId: string };
  machineSecrets?: { sealed: Buffer; keyId: string };
}

/**
 * Writes rows of other aggregates into the memory tables, as their memory repositories keep them
 * (entities keyed by id): the deployments a reveal opens and the sealed columns re-sealing walks.
 */
export function memoryCredentialsSeed(tables: MemoryTables) {
  return {
    async rental(r: MemorySeededRental): Promise<void> {
      tables.table<Order>('orders').put(
        r.orderId,
        Object.assign(new Order(), {
          id: r.orderId,
          accountId: r.accountId,
          keyId: r.keyId,
          status: r.status,
          machineSecretsEnc: r.machineSecrets?.sealed ?? null,
          machineSecretsKid: r.machineSecrets?.keyId ?? null,
        }),
      );
      tables.table<Deployment>('deployments').put(
        r.deploymentId,
        Object.assign(new Deployment(), {
          id: r.deploymentId,
          orderId: r.orderId,
          accountId: r.accountId,
          keyId: r.keyId,
          status: r.status,
          sshPrivateKeyEnc: r.sshKey?.sealed ?? null,
          sshKeyKid: r.sshKey?.keyId ?? null,
        }),
      );
    },
    async webhookEndpoint(e: { id: string; accountId: string; sealed: Buffer; keyId: string }): Promise<void> {
      tables
        .table<Row>('webhook_endpoints')
        .put(e.id, { id: e.id, accountId: e.accountId, keyId: null, secretSealed: e.sealed, secretKeyId: e.keyId });
    },
    async receiptSigningKey(id: string, value: { sealed: Buffer; keyId: string }): Promise<void> {
      tables.table<Row>('receipt_signing_keys').put(id, {
        id,
        publicKey: Buffer.alloc(32),
        privateKeySealed: value.sealed,
        privateKeyKid: value.keyId,
        activeForKid: null,
        createdAt: new Date(),
        retiredAt: null,
      });
    },
  };
}
