import type { SshEvidenceOutcome } from '../../providers/destruction-verifier.js';

/** What the provider's last read said about the instance, as the verified destruction saw it. */
export interface ReceiptProviderAnswerDto {
  /** Our state for the instance: always `gone` on a receipt (a destruction is verified only then). */
  state: 'gone';
  /**
   * The cloud's own word for it (e.g. `destroyed`, `not found`), when the plugin gave one; null otherwise.
   * @example "not found"
   */
  providerState: string | null;
  /**
   * The HTTP status of that read (e.g. 404), when the plugin knows it; null otherwise.
   * @isInt
   * @example 404
   */
  httpStatus: number | null;
  /**
   * When the provider was asked.
   * @format date-time
   */
  checkedAt: string;
}

/** The SSH evidence of the verified destruction. */
export interface ReceiptSshEvidenceDto {
  outcome: SshEvidenceOutcome;
  /**
   * When the login was tried; null for `no_address`.
   * @format date-time
   */
  checkedAt: string | null;
}

/** What the rental was charged, from the ledger, as of the receipt. */
export interface ReceiptChargeDto {
  /**
   * The rental's net charge in cents: its debits and usage less what was given back, as its key's
   * spend counts them.
   * @isInt
   * @example 598
   */
  totalMinor: number;
  currency: string;
}

/** The signed facts of one verified teardown (format version 1, docs/teardown-receipts.md). */
export interface TeardownReceiptDto {
  /**
   * The receipt format: 1.
   * @isInt
   * @example 1
   */
  version: number;
  /** Always `gpr.teardown-receipt`. */
  type: 'gpr.teardown-receipt';
  /**
   * The service that signed it (its public address); its keys are at `/.well-known/gpr-receipt-keys.json` there.
   * @format uri
   * @example "https://gpu.example.com"
   */
  issuer: string;
  rentalId: string;
  deploymentId: string;
  /**
   * The provider plugin that ran the machine.
   * @example "lambda"
   */
  providerId: string;
  /**
   * The provider's id of the machine.
   * @example "0920582c7ff041399e34823a0be62549"
   */
  instanceId: string;
  /**
   * The label the service gave the machine at the provider; null when it had none.
   * @example "gpr-3f6c2a9e-8d41-4b7a-9c2e-5d1f0a7b6e42-1"
   */
  label: string | null;
  /**
   * When the rental became ACTIVE; null when it ended before.
   * @format date-time
   */
  startedAt: string | null;
  /**
   * The verified destruction time (the rental's `endedAt`).
   * @format date-time
   */
  endedAt: string;
  provider: ReceiptProviderAnswerDto;
  ssh: ReceiptSshEvidenceDto;
  charged: ReceiptChargeDto;
  /**
   * When the receipt was signed.
   * @format date-time
   */
  issuedAt: string;
  /**
   * The signing key's id, the same as `signature.keyId`.
   * @example "rk_uqgekfn5j3bokvqe"
   */
  keyId: string;
}

/** How the receipt was signed. */
export interface ReceiptSignatureDto {
  /** Always `Ed25519`. */
  alg: 'Ed25519';
  /**
   * The key, among those at `/.well-known/gpr-receipt-keys.json`.
   * @example "rk_uqgekfn5j3bokvqe"
   */
  keyId: string;
  /**
   * The Ed25519 signature of the receipt's canonical form (keys sorted, no whitespace, UTF-8), unpadded base64url.
   * @pattern ^[A-Za-z0-9_-]{86}$
   * @example "cv47aYl0xHVe1k2bwBlTJRxL5s6fkukEbbgdch0H-W7_dEfz61YVRxstH4vk3ok34j4Vv_E7RFagjzz5Dw6WBg"
   */
  value: string;
}

/** A teardown receipt and its signature: save `data` as it is to show or verify it later. */
export interface SignedReceiptDto {
  receipt: TeardownReceiptDto;
  signature: ReceiptSignatureDto;
}
