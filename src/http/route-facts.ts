import spec from '../generated/swagger.json' with { type: 'json' };

/**
 * Facts a route states about itself with tsoa's `@Extension(name, value)`, next to its method,
 * path and security; the generated spec carries them on the operation. They are the service's
 * own: the served document says each its own way (see src/http/openapi.ts) and drops the names.
 * tsoa reads decorator arguments from the source text, so routes write the names out literally.
 */
export const ROUTE_FACTS = {
  /** `true`: needs an OWNER key; an agent key is refused with 403 FORBIDDEN. */
  ownerOnly: 'x-owner-only',
  /** `true`: answers from the ETag'd inventory snapshot (ETag on 200, 304 for a current If-None-Match). */
  etagged: 'x-etagged',
  /** Statuses besides 429 whose answer may say when to ask again (`Retry-After`), e.g. `[409]`. */
  retryAfter: 'x-retry-after',
  /**
   * `true`: the handler reads the key's revocation again in its own transaction before acting, so
   * its caller may be authenticated with a key this process read moments ago.
   */
  revocationCheckedInTransaction: 'x-revocation-checked-in-transaction',
} as const;

/** The name of one route fact. */
export type RouteFact = (typeof ROUTE_FACTS)[keyof typeof ROUTE_FACTS];

/** HTTP methods tsoa routes use, as the spec spells them. */
export const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;

/** One route of the generated spec: method and path as the spec spells them, and its operation. */
export interface SpecRoute {
  method: (typeof METHODS)[number];
  path: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  operation: Record<string, any>;
}

/** Every route of the generated spec. */
export function specRoutes(): SpecRoute[] {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const paths = spec.paths as Record<string, Record<string, any>>;
  return Object.entries(paths).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m]).map((method) => ({ method, path, operation: item[method] })),
  );
}

/**
 * The routes stating `fact`, as Express names a matched route (`POST /api/v1/rentals/:id`): the
 * key an Express handler can build from `req.method` and `req.route.path`.
 */
export function expressRoutesStating(fact: RouteFact): Set<string> {
  return new Set(
    specRoutes()
      .filter((r) => r.operation[fact] !== undefined && r.operation[fact] !== false)
      .map((r) => `${r.method.toUpperCase()} ${r.path.replace(/\{(\w+)\}/g, ':$1')}`),
  );
}
