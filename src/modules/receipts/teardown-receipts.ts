import type { DestructionEvidence } from '../../providers/destruction-verifier.js';
import type { LedgerRepository } from '../billing/ledger.repository.js';
import type { Deployment } from '../rentals/store/deployment.entity.js';
import type { Order } from '../rentals/store/order.entity.js';
import type { ReceiptsRepository } from './receipts.repository.js';

/** The repositories of the transaction a receipt is written in: its own, and the ledger it reads the charge from. */
export interface ReceiptRepos {
  receipts: ReceiptsRepository;
  ledger: Pick<LedgerRepository, 'sumOfRental'>;
}

/** The deployment as the TERMINATED transaction holds it locked. */
export type ReceiptDeployment = Pick<
  Deployment,
  'id' | 'orderId' | 'providerId' | 'instanceId' | 'label' | 'startedAt'
>;

/** Writes one rental's receipt in the caller's transaction; a second call for it writes nothing. */
export type IssueReceipt = (r: ReceiptRepos, deployment: ReceiptDeployment, endedAt: Date) => Promise<void>;

/**
 * What termination asks of receipts (the receipts service answers): it prepares the signer before
 * its TERMINATED transaction and issues the receipt inside it, so a receipt exists exactly when a
 * verified destruction's TERMINATED has committed, and a crash or a re-run never makes another.
 */
export interface TeardownReceipts {
  /**
   * The issuer of a verified destruction's receipt, with the signing key opened; null for a rental
   * that gets none (paid by card: its money is the card payment's, not the ledger's).
   */
  issuerFor(order: Pick<Order, 'funding' | 'currency'>, evidence: DestructionEvidence): Promise<IssueReceipt | null>;
}
