import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import { AppError } from '../../errors/app-error.js';
import type { DestructionEvidence } from '../../providers/destruction-verifier.js';
import {
  canonicalJson,
  RECEIPT_SIGNATURE_ALG,
  RECEIPT_TYPE,
  RECEIPT_VERSION,
  type ReceiptKeySet,
} from '../../vocabulary/receipts.js';
import { isOneOf, LIVE_STATUSES, type RentalStatus } from '../../vocabulary/statuses.js';
import { rentalSpentMinor } from '../billing/ledger.service.js';
import type { SecretBox } from '../credentials/secret-box.js';
import type { Principal } from '../keys/principal.js';
import { newSigningPair, publishedKey, receiptSigner, signingKeyBinding, type ReceiptSigner } from './receipt-keys.js';
import type { ReceiptSigningKey } from './receipt-signing-key.entity.js';
import type { ReceiptsRepository } from './receipts.repository.js';
import type { SignedReceiptDto, TeardownReceiptDto } from './receipts.dto.js';
import type { IssueReceipt, TeardownReceipts } from './teardown-receipts.js';
import type { TeardownReceipt } from './teardown-receipt.entity.js';

/** The rental a receipt is asked for, as the rental read shows it to the caller (its access rule). */
export interface ReadableRental {
  rentalId: string;
  deploymentId: string | null;
  status: RentalStatus;
  funding: 'CREDITS' | 'CARD';
}

/**
 * The rental read's access rule: the rental `id` names (a rental or a deployment id) as `principal`
 * may read it; 404 NOT_FOUND when it may not.
 */
export type RentalAccess = (principal: Principal, id: string) => Promise<ReadableRental>;

export interface ReceiptsOptions {
  /** The service's public address, named in every receipt as its issuer. */
  issuer: string;
}

/**
 * Teardown receipts: the signed record of a verified destruction, issued in the transaction that
 * makes the rental TERMINATED, served to whoever can read the rental, and checked offline against
 * the keys this service publishes. The signing key is the pair active under the current
 * SECRETS_KEY id; the first signing under a new id makes a pair and retires the others, erasing
 * their private halves (their public halves stay published, so every receipt keeps verifying).
 */
export class ReceiptsService implements TeardownReceipts {
  /** This process's opened signing key, made once (again after a failure). */
  private signing?: Promise<ReceiptSigner>;

  constructor(
    private readonly store: Store<{ receipts: ReceiptsRepository }>,
    private readonly clock: Clock,
    private readonly box: SecretBox,
    private readonly readRental: RentalAccess,
    private readonly options: ReceiptsOptions,
  ) {}

  /**
   * The signer of the key active under the current SECRETS_KEY id, making that key when there is
   * none. Processes racing to make it keep one (the unique index); each then retires every key
   * active under another id, so after a rotation no signing secret stays under an earlier
   * SECRETS_KEY. Opened once per process: a rotation takes effect as processes restart with the
   * new key, and a process not yet restarted signs with its key, which stays published.
   */
  signer(): Promise<ReceiptSigner> {
    const opening = (this.signing ??= this.openSigner());
    opening.catch(() => {
      if (this.signing === opening) this.signing = undefined;
    });
    return opening;
  }

  private async openSigner(): Promise<ReceiptSigner> {
    const kid = this.box.currentKeyId;
    for (let tries = 1; ; tries++) {
      const key = (await this.store.read((r) => r.receipts.activeKey(kid))) ?? (await this.makeKey(kid));
      const d = this.privateHalf(key);
      if (d !== null) {
        await this.store.read((r) => r.receipts.retireOthers(kid, this.clock.now()));
        return receiptSigner(key.id, key.publicKey, d);
      }
      // Sealed under this id by another key (an id reused for a new SECRETS_KEY), or re-sealed
      // under a key this process lacks: it can sign nothing here, so it is retired for a new one.
      if (tries >= 2) throw new Error(`the receipt signing key ${key.id} cannot be opened with SECRETS_KEY id ${kid}`);
      await this.store.read((r) => r.receipts.retireKey(key.id, this.clock.now()));
    }
  }

  /** A new pair, active under `kid`: ours, or the one a process racing to make it added first. */
  private async makeKey(kid: string): Promise<ReceiptSigningKey> {
    const pair = newSigningPair();
    const sealed = this.box.seal(pair.privateD, signingKeyBinding(pair.id));
    await this.store.read((r) =>
      r.receipts.addKey({
        id: pair.id,
        publicKey: pair.publicKey,
        privateKeySealed: sealed.ciphertext,
        kid: sealed.keyId,
        createdAt: this.clock.now(),
      }),
    );
    const key = await this.store.read((r) => r.receipts.activeKey(kid));
    if (!key) throw new Error(`no receipt signing key is active under SECRETS_KEY id ${kid} after adding one`);
    return key;
  }

  /** The key's private half (its JWK `d`), or null when this process's keys cannot open it. */
  private privateHalf(key: ReceiptSigningKey): string | null {
    if (!key.privateKeySealed || !key.privateKeyKid) return null;
    try {
      return this.box.open(key.privateKeySealed, key.privateKeyKid, signingKeyBinding(key.id));
    } catch {
      return null;
    }
  }

  async issuerFor(
    order: { funding: 'CREDITS' | 'CARD'; currency: string },
    evidence: DestructionEvidence,
  ): Promise<IssueReceipt | null> {
    if (order.funding !== 'CREDITS') return null;
    const signer = await this.signer();
    return async (r, d, endedAt) => {
      // Every verified destruction has both; a row without them has nothing a receipt could name.
      if (!d.providerId || !d.instanceId) return;
      const receipt: TeardownReceiptDto = {
        version: RECEIPT_VERSION,
        type: RECEIPT_TYPE,
        issuer: this.options.issuer,
        rentalId: d.orderId,
        deploymentId: d.id,
        providerId: d.providerId,
        instanceId: d.instanceId,
        label: d.label,
        startedAt: d.startedAt ? d.startedAt.toISOString() : null,
        endedAt: endedAt.toISOString(),
        provider: {
          state: evidence.provider.state,
          providerState: evidence.provider.providerState,
          httpStatus: evidence.provider.httpStatus,
          checkedAt: evidence.provider.checkedAt.toISOString(),
        },
        ssh: { outcome: evidence.ssh.outcome, checkedAt: evidence.ssh.checkedAt?.toISOString() ?? null },
        charged: { totalMinor: await rentalSpentMinor(r.ledger, d.orderId), currency: order.currency },
        issuedAt: this.clock.now().toISOString(),
        keyId: signer.keyId,
      };
      await r.receipts.addReceipt({
        deploymentId: d.id,
        rentalId: d.orderId,
        body: canonicalJson(receipt),
        signingKeyId: signer.keyId,
        signature: signer.sign(receipt),
        issuedAt: new Date(receipt.issuedAt),
      });
    };
  }

  /**
   * The receipt of the rental `id` names (a rental or a deployment id), to whoever can read the
   * rental; 404 NOT_FOUND when they cannot, or when it has none yet, saying why and when one comes.
   */
  async forRental(principal: Principal, id: string): Promise<SignedReceiptDto> {
    const rental = await this.readRental(principal, id);
    const deploymentId = rental.deploymentId;
    const stored = deploymentId ? await this.store.read((r) => r.receipts.receiptOf(deploymentId)) : null;
    if (!stored) throw new AppError('NOT_FOUND', noReceiptYet(rental));
    return signedReceiptOf(stored);
  }

  /** Every receipt key ever made, active and retired, as a JWK Set (public halves only). */
  async keySet(): Promise<ReceiptKeySet> {
    return { keys: (await this.store.read((r) => r.receipts.publicKeys())).map(publishedKey) };
  }
}

/** A stored receipt as served: the body exactly as signed, and its signature. */
export function signedReceiptOf(stored: TeardownReceipt): SignedReceiptDto {
  return {
    receipt: JSON.parse(stored.body) as TeardownReceiptDto,
    signature: { alg: RECEIPT_SIGNATURE_ALG, keyId: stored.signingKeyId, value: stored.signature },
  };
}

/** Why a rental the caller can read has no receipt, and whether and when it will. */
function noReceiptYet(r: ReadableRental): string {
  if (r.funding === 'CARD')
    return `Rental ${r.rentalId} was paid by card: teardown receipts are issued for rentals paid from credits only.`;
  if (isOneOf(LIVE_STATUSES, r.status))
    return `Rental ${r.rentalId} is ${r.status}: its teardown receipt is issued when it becomes TERMINATED, once the provider reports its machine gone and a login with the rental's key no longer gets in. Ask again then (GET /api/v1/rentals/${r.rentalId}?waitFor=TERMINATED waits for it).`;
  if (r.status === 'FAILED')
    return `Rental ${r.rentalId} FAILED: receipts are issued only for rentals that end TERMINATED after a verified destruction, so it will have none.`;
  return `Rental ${r.rentalId} ended without a verified destruction of a machine (it never had one, or it ended before this service issued receipts), so it has no receipt and will not get one.`;
}
