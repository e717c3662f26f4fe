import { bool, int, optInt, type Env } from '../config-values.js';

/** Agent creation from outside, and its rate. */
export interface AgentsConfig {
  /** AGENT_V1_ENABLED: false switches off signup, authorization sessions and setup-code exchange. */
  v1Enabled: boolean;
  /** Per client address: agent authorizations begun plus setup-code exchanges per minute. */
  setupRatePerMinute: number;
  /** Per client address: OAuth client registrations plus authorization requests (remote MCP) per minute. */
  oauthRatePerMinute: number;
}

/** Headless signup's rates. */
export interface SignupConfig {
  /** Signups per minute across every process and address: the ceiling. */
  ratePerMinute: number;
  /** Signups per minute from one client address (an IPv6 client's /64), so one client cannot use up the ceiling. */
  ratePerAddressPerMinute: number;
}

/**
 * Event streams plus waiting reads one api process holds at once: per key, per client address (an
 * IPv6 client's /64), in all (unset: from its open-file limit).
 */
export interface PushConfig {
  perKey: number;
  perAddress: number;
  open: number | undefined;
}

/** AGENT_V1_ENABLED, AGENT_SETUP_RATE_PER_MINUTE and OAUTH_RATE_PER_MINUTE. */
export function readAgents(env: Env): AgentsConfig {
  return {
    v1Enabled: bool(env, 'AGENT_V1_ENABLED', true),
    setupRatePerMinute: int(env, 'AGENT_SETUP_RATE_PER_MINUTE', 60, 1, 1_000_000),
    oauthRatePerMinute: int(env, 'OAUTH_RATE_PER_MINUTE', 30, 1, 1_000_000),
  };
}

/** SIGNUP_RATE_PER_MINUTE and SIGNUP_RATE_PER_ADDRESS_PER_MINUTE. */
export function readSignup(env: Env): SignupConfig {
  return {
    ratePerMinute: int(env, 'SIGNUP_RATE_PER_MINUTE', 30, 1, 1_000_000),
    ratePerAddressPerMinute: int(env, 'SIGNUP_RATE_PER_ADDRESS_PER_MINUTE', 5, 1, 1_000_000),
  };
}

/** PUSH_MAX_PER_KEY, PUSH_MAX_PER_ADDRESS and PUSH_MAX_OPEN. */
export function readPush(env: Env): PushConfig {
  return {
    perKey: int(env, 'PUSH_MAX_PER_KEY', 20, 1, 100_000),
    perAddress: int(env, 'PUSH_MAX_PER_ADDRESS', 200, 1, 1_000_000),
    open: optInt(env, 'PUSH_MAX_OPEN', 1, 1_000_000),
  };
}
