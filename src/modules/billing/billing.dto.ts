import type { LedgerKind } from './ledger-entry.entity.js';

export interface LedgerEntryDto {
  id: number;
  kind: LedgerKind;
  /** Signed cents: credits positive, debits negative. */
  amountMinor: number;
  balanceAfterMinor: number;
  description: string;
  /** The rental this entry belongs to, if any. */
  rentalId: string | null;
  keyId: string | null;
  /** @format date-time */
  createdAt: string;
}

export interface BalanceResponse {
  /** Account credits in cents. */
  creditsMinor: number;
  currency: string;
  frozen: boolean;
  /** The calling key's remaining budget: lifetime budget minus net rental debits. */
  keyRemainingBudgetMinor: number;
  /** Most recent entries first. */
  entries: LedgerEntryDto[];
}
