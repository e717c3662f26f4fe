/** SSH checks (or samples) of one account in flight at once in one process, by default. */
export const CHECKS_PER_ACCOUNT = 2;

/** Limits of a {@link CheckSlots}. */
export interface CheckSlotLimits {
  /** Slots one account may hold at once. */
  perAccount: number;
  /** Slots of all accounts together; absent: no limit beyond the caller's own (a job's concurrency). */
  total?: number;
}

/**
 * The SSH checks in flight in this process, counted per account: a renter's machines may hold
 * as long as the check's bound, so without a count per account one account's hanging machines
 * could fill every slot a worker has and stall every other account's rentals. Taking a slot
 * never waits: a caller refused one does something else (looks again later).
 */
export class CheckSlots {
  private readonly byAccount = new Map<string, number>();
  private all = 0;

  constructor(private readonly limits: CheckSlotLimits = { perAccount: CHECKS_PER_ACCOUNT }) {}

  /** True when every slot of the process is taken: no account could take one now. */
  get full(): boolean {
    return this.limits.total !== undefined && this.all >= this.limits.total;
  }

  /** True when `accountId` could take a slot now. */
  free(accountId: string): boolean {
    return (
      (this.byAccount.get(accountId) ?? 0) < this.limits.perAccount &&
      (this.limits.total === undefined || this.all < this.limits.total)
    );
  }

  /** Takes a slot for `accountId`; answers its release (safe to call twice), or null when the account or the process is at its limit. */
  tryTake(accountId: string): (() => void) | null {
    if (!this.free(accountId)) return null;
    this.byAccount.set(accountId, (this.byAccount.get(accountId) ?? 0) + 1);
    this.all++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.all--;
      const left = (this.byAccount.get(accountId) ?? 1) - 1;
      if (left > 0) this.byAccount.set(accountId, left);
      else this.byAccount.delete(accountId);
    };
  }

  /** Slots held now: by `accountId`, or by everyone. */
  inFlight(accountId?: string): number {
    return accountId === undefined ? this.all : (this.byAccount.get(accountId) ?? 0);
  }
}
