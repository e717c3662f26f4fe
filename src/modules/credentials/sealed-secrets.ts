import type { SealedColumn } from '../../db/sealed-column.js';
import { signingKeyBinding } from '../receipts/receipt-keys.js';
import type { ReceiptsRepository } from '../receipts/receipts.repository.js';
import type { RentalsRepository } from '../rentals/store/rentals.repository.js';
import type { WebhooksRepository } from '../webhooks/webhooks.repository.js';
import { secretBinding } from '../webhooks/webhooks.service.js';

// Every column that holds a SecretBox ciphertext, with the key id stored beside it: the one list
// that re-sealing after a SECRETS_KEY rotation walks. Each column is walked through the aggregate
// that owns its rows (their statements are that aggregate's). A new sealed column joins this
// list, or a rotation would leave its secrets under a key the operator is told they may drop.

export type { SealedSecret } from '../../db/sealed-column.js';

/** The aggregates whose sealed columns re-sealing walks, each through its own repository. */
export interface SealedColumnRepositories {
  rentals: Pick<RentalsRepository, 'sealed'>;
  webhooks: Pick<WebhooksRepository, 'sealed'>;
  receipts: Pick<ReceiptsRepository, 'sealed'>;
}

/** One kind of sealed secret: what its ciphertext is bound to and where it is stored. */
export interface SealedSecretKind {
  /** What the secrets are, in reports. */
  name: string;
  /** The additional data each row's ciphertext was sealed with (see its sealer). */
  binding: (id: string) => string;
  /** The column that holds them, in the repositories of the aggregate that owns their rows. */
  column: (r: SealedColumnRepositories) => SealedColumn;
}

export const SEALED_SECRET_KINDS: readonly SealedSecretKind[] = [
  {
    // Sealed by provisioning (lifecycle/provisioning.ts), bound to the deployment's id.
    name: 'deployment SSH private keys',
    binding: (id) => id,
    column: (r) => r.rentals.sealed.sshKeys,
  },
  {
    // Sealed at admission (rentals/store/machine-secrets.ts), bound to the order's id.
    name: 'machine variables and startup scripts',
    binding: (id) => id,
    column: (r) => r.rentals.sealed.machineSecrets,
  },
  {
    name: 'webhook signing secrets',
    binding: secretBinding,
    column: (r) => r.webhooks.sealed.signingSecrets,
  },
  {
    // Sealed when a pair is made (receipts/receipts.service.ts), bound to the key's id. Re-sealing
    // keeps an active pair's private half openable; retiring a pair erases it.
    name: 'receipt signing keys',
    binding: signingKeyBinding,
    column: (r) => r.receipts.sealed.signingKeys,
  },
];
