import type { Clock } from '../../clock.js';
import { AppError } from '../../errors/app-error.js';
import type { RateLimiter } from '../../http/rate-limiter.js';
import { checkProviders, type ProviderCheckReport } from '../../providers/provider-checks.js';
import { SharedRead } from '../../providers/provider-http.js';
import type { ProviderRegistry } from '../../providers/provider-registry.js';
import { isOperator, type Principal } from '../keys/principal.js';

/**
 * How long one run of the checks answers every operator: it calls every cloud, and the service's
 * own calls share each cloud's rate limit. `checkedAt` says when it ran.
 */
export const PROVIDER_CHECK_CACHE_MS = 30_000;

/** Checks one key may ask for per minute, answered from a fresh run or from the one above. */
export const PROVIDER_CHECKS_PER_KEY_PER_MINUTE = 6;

/**
 * `GET /api/v1/providers/check`: the providers' read-only checks for an operator. Every process
 * runs the checks at most once per {@link PROVIDER_CHECK_CACHE_MS} (callers meanwhile share the run
 * in flight, then its report), and each key may ask {@link PROVIDER_CHECKS_PER_KEY_PER_MINUTE}
 * times a minute, so the route cannot be made to hammer the clouds.
 */
export class ProviderChecksService {
  private readonly report: SharedRead<ProviderCheckReport>;

  constructor(
    providers: Pick<ProviderRegistry, 'registered'>,
    private readonly rateLimiter: Pick<RateLimiter, 'hit'>,
    clock: Clock,
    options: { cacheMs?: number; timeoutMs?: number } = {},
  ) {
    this.report = new SharedRead(
      () => checkProviders(providers.registered(), { now: () => clock.now(), timeoutMs: options.timeoutMs }),
      options.cacheMs ?? PROVIDER_CHECK_CACHE_MS,
    );
  }

  /** The report, for an operator's key only (403 otherwise); 429 past the key's limit. */
  async checkFor(principal: Principal): Promise<ProviderCheckReport> {
    if (!isOperator(principal))
      throw new AppError(
        'FORBIDDEN',
        'Checking the providers needs an OWNER key with admin (made on the server with: owner create --admin).',
      );
    await this.rateLimiter.hit(
      `provider-checks:${principal.keyId}`,
      PROVIDER_CHECKS_PER_KEY_PER_MINUTE,
      60,
      'provider checks',
    );
    return this.report.get();
  }
}
