export interface CardCheckoutRequest {
  /**
   * The exact offer to rent; never substituted.
   * @pattern ^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$
   */
  offerId: string;
  /**
   * USD cents for the whole rental (500 = $5.00): at least 500, as for every rental (422
   * BUDGET_TOO_SMALL below), and at most floor(pricePerHourMinor * maximumDurationSeconds / 3600)
   * for the offer. Whole hours are bought: the card is charged hours * pricePerHourMinor, where
   * hours = min(floor(budgetMinor / pricePerHourMinor), floor(maximumDurationSeconds / 3600)).
   * @isInt
   * @maximum 1000000000
   */
  budgetMinor: number;
}

export interface CardCheckoutQuote {
  /** @isInt */
  hourlyPriceMinor: number;
  /**
   * Whole purchased hours, in seconds.
   * @isInt
   */
  durationSeconds: number;
  /**
   * What the card is charged.
   * @isInt
   */
  totalMinor: number;
  currency: string;
}

export interface CardCheckoutResponse {
  /** The rental id; wait with GET /api/v1/rentals/{orderId}?waitFor=ACTIVE,FAILED. */
  orderId: string;
  /**
   * The hosted payment page a human opens to pay. Success here means the checkout exists, not
   * that payment or provisioning is complete.
   * @format uri
   */
  checkoutUrl: string;
  /** @format date-time */
  expiresAt: string | null;
  quote: CardCheckoutQuote;
}
