import { requestPinned, type PostLimits, type Resolver } from '../webhooks/destination.js';

/**
 * How the authorization server fetches a Client ID Metadata Document: by the rules webhooks are
 * sent by (no private, loopback or reserved address unless they are allowed, the address pinned
 * once resolved, no redirect followed) and within size and time bounds.
 */
export interface MetadataFetchOptions {
  /** Private destinations allowed (WEBHOOK_ALLOW_PRIVATE_DESTINATIONS: off in production). */
  allowPrivate: boolean;
  limits: PostLimits;
  resolve?: Resolver;
  /** Certificates TLS trusts instead of the system's: a test's own authority. */
  ca?: string | Buffer;
}

/** A metadata document is small (a few hundred bytes); this much is plenty, and the rest is refused. */
export const METADATA_LIMITS: PostLimits = { connectMs: 2000, totalMs: 3000, maxBodyBytes: 8 * 1024 };

/** The library's `fetch` for client metadata documents, answered through {@link requestPinned}. */
export async function fetchClientMetadata(
  url: string,
  _init: RequestInit,
  options: MetadataFetchOptions,
): Promise<Response> {
  const headers: Record<string, string> = { accept: 'application/json', 'user-agent': 'gpu-rental-oauth' };
  const answer = await requestPinned(
    new URL(url),
    { method: 'GET', headers, ...(options.ca ? { ca: options.ca } : {}) },
    options.allowPrivate,
    options.limits,
    options.resolve,
  );
  if (answer.truncated)
    throw new Error(`the client metadata document is larger than ${options.limits.maxBodyBytes} bytes`);
  const out = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) out.append(name, v);
  }
  return new Response(answer.status === 204 || answer.status === 304 ? null : answer.body, {
    status: answer.status,
    headers: out,
  });
}
