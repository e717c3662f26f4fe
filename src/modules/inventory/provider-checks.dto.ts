/**
 * Why a call failed: `auth` (the key was refused), `user_agent` (the edge in front of the API
 * refused the request by its signature before the API read the key), `rate_limited`,
 * `unavailable` (no answer), `timeout`, `bad_response` (an answer the plugin cannot read),
 * `request` (a request the cloud refused), `internal` (the plugin failed).
 */
export type ProviderCheckErrorClassDto =
  'auth' | 'user_agent' | 'rate_limited' | 'unavailable' | 'timeout' | 'bad_response' | 'request' | 'internal';

/** One read-only call a provider's check made. */
export interface ProviderCheckCallDto {
  /** The call, as a template: `GET /api/v0/users/current/`. */
  name: string;
  ok: boolean;
  /**
   * Milliseconds from sending to the whole answer (the client's own spacing of calls left out).
   * @isInt
   */
  ms: number;
  /**
   * The HTTP status, when an answer came.
   * @isInt
   */
  status?: number;
  errorClass?: ProviderCheckErrorClassDto;
  /** What the answer said, without secrets. */
  detail: string;
  /** What to change, when the plugin can say. */
  fix?: string;
}

/** Whether the cloud took the configured credentials. */
export interface ProviderCheckCredentialsDto {
  accepted: boolean;
  /** The exact class of the refusal, when not accepted. */
  errorClass?: ProviderCheckErrorClassDto;
  detail: string;
  fix?: string;
}

/** The account's balance or credit at the cloud. */
export interface ProviderCheckBalanceDto {
  /**
   * Minor units (cents) of `currency`, rounded down; null when the answer did not carry it.
   * @isInt
   */
  amountMinor: number | null;
  currency: string | null;
  detail: string;
  fix?: string;
}

/** One inventory read: asks that became offers, and why the others did not. */
export interface ProviderCheckOffersDto {
  /**
   * Asks (or catalog entries) the cloud answered with.
   * @isInt
   */
  considered: number;
  /**
   * Of those, how many became offers.
   * @isInt
   */
  parsed: number;
  /** Asks left out, per stable reason code of the plugin (`traffic_price_above_limit`: 700). */
  dropped: { [reason: string]: number };
  /** What each reason means, or what to change. */
  hints: { [reason: string]: string };
  detail?: string;
}

/** Whether registering an SSH key (which a launch needs) would be possible, proved read-only. */
export interface ProviderCheckSshKeysDto {
  possible: boolean;
  detail: string;
  fix?: string;
}

/** The User-Agent the plugin sends and whether the edge let it through. */
export interface ProviderCheckUserAgentDto {
  /** Null for a plugin that makes no HTTP calls. */
  sent: string | null;
  accepted: boolean;
  detail: string;
  fix?: string;
}

/** What one provider's check found. */
export interface ProviderCheckDto {
  calls: ProviderCheckCallDto[];
  credentials: ProviderCheckCredentialsDto;
  /** Absent: the cloud tells no balance through a read-only call. */
  balance?: ProviderCheckBalanceDto;
  offers: ProviderCheckOffersDto;
  /** Only for clouds whose launches need a registered SSH key (Lambda). */
  sshKeys?: ProviderCheckSshKeysDto;
  userAgent: ProviderCheckUserAgentDto;
}

/** One configured provider's check, and what it means. */
export interface ProviderCheckEntryDto {
  /** The provider's id, as on GET /api/v1/providers. */
  id: string;
  description: string;
  /** False for a plugin without a check: nothing is known of it, and that is no problem. */
  supported: boolean;
  /** True when nothing stops a rental on it (`problems` is empty). */
  usable: boolean;
  /**
   * Milliseconds the whole check took.
   * @isInt
   */
  ms: number;
  /** Null when the plugin has no check, or it timed out or failed. */
  check: ProviderCheckDto | null;
  /** One line each: `<id>: what is wrong: what to change`. */
  problems: string[];
  /** One line each: what leaves part of the market out without stopping rentals. */
  warnings: string[];
}

/** The check of every configured provider. */
export interface ProviderCheckReportDto {
  /**
   * When the checks ran: the report is reused for a short while.
   * @format date-time
   */
  checkedAt: string;
  /** True only when every configured provider is usable. */
  usable: boolean;
  providers: ProviderCheckEntryDto[];
  problems: string[];
  warnings: string[];
}
