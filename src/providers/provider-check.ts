import type { ProviderErrorClass } from './error-class.js';

/**
 * Why a check's call failed: a {@link ProviderErrorClass}, or `user_agent` when the edge in front
 * of the cloud's API (a CDN's bot gate) refused the request before the API saw it, so the key was
 * not even read.
 */
export type ProviderCheckErrorClass = ProviderErrorClass | 'user_agent';

/** One read-only call a provider check made, as it went. */
export interface ProviderCheckCall {
  /** The call, method and path as a template (`GET /api/v0/users/current/`); never a secret. */
  name: string;
  ok: boolean;
  /** Wall time from sending the request to the whole answer, in milliseconds. */
  ms: number;
  /** The HTTP status, when an answer came. */
  status?: number;
  /** Why it failed, when it did. */
  errorClass?: ProviderCheckErrorClass;
  /** What the answer said, one line without secrets. */
  detail: string;
  /** What to change when it failed, when the plugin can say (one clause: "set X to ..."). */
  fix?: string;
}

/** Whether the cloud took the configured credentials. */
export interface ProviderCheckCredentials {
  accepted: boolean;
  /** The exact class of the refusal, when not accepted. */
  errorClass?: ProviderCheckErrorClass;
  detail: string;
  /** What to change, when not accepted. */
  fix?: string;
}

/** The account's balance or credit at the cloud, as the cloud tells it. */
export interface ProviderCheckBalance {
  /** In minor units of `currency` (cents), rounded down; null when the answer did not carry it. */
  amountMinor: number | null;
  /** ISO currency code, or null with `amountMinor`. */
  currency: string | null;
  detail: string;
  /** What to do when the balance leaves nothing to rent with. */
  fix?: string;
}

/** What one inventory read of the cloud gave: how many asks became offers, and why the others did not. */
export interface ProviderCheckOffers {
  /** Asks (or catalog entries) the cloud answered with. */
  considered: number;
  /** Of those, how many became offers. */
  parsed: number;
  /** How many were left out, per stable reason code of the plugin (`traffic_price_above_limit`). */
  dropped: Record<string, number>;
  /** What each reason means for the operator, or what to change (only reasons the plugin can say something about). */
  hints: Record<string, string>;
  /** Anything else about the read (a search limit reached), or why no offers could be read. */
  detail?: string;
}

/** Whether registering an SSH key, which a launch needs, would be possible (proved read-only). */
export interface ProviderCheckSshKeys {
  possible: boolean;
  detail: string;
  fix?: string;
}

/** The User-Agent the plugin's client sends and whether the edge let it through. */
export interface ProviderCheckUserAgent {
  /** The header sent on every call; null for a plugin that makes no HTTP calls. */
  sent: string | null;
  /** True when an answer came past the edge (any answer of the API itself). */
  accepted: boolean;
  detail: string;
  fix?: string;
}

/**
 * What `Provider.check` answers: whether the configured account can be used, learned through
 * read-only calls only (never a create, destroy, registration or deletion).
 */
export interface ProviderCheck {
  /** Every call made, in order, with its time. */
  calls: ProviderCheckCall[];
  credentials: ProviderCheckCredentials;
  /** Absent: the cloud does not tell a balance through any read-only call of its API. */
  balance?: ProviderCheckBalance;
  offers: ProviderCheckOffers;
  /** Only for clouds whose launches need a registered SSH key (Lambda). */
  sshKeys?: ProviderCheckSshKeys;
  userAgent: ProviderCheckUserAgent;
}
