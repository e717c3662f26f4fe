/** A rejection by the API: the `{error:{code,message,requestId}}` envelope plus the HTTP status. */
export class GprApiError extends Error {
  override readonly name = 'GprApiError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly requestId: string | null,
    /** Seconds the server asked to wait (429 `Retry-After`), when it said. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }

  /** Reads the error envelope of a failed response; a body that is not one still yields an error. */
  static async fromResponse(res: Response): Promise<GprApiError> {
    const text = await res.text().catch(() => '');
    let body: { error?: { code?: string; message?: string; requestId?: string } } = {};
    try {
      body = JSON.parse(text);
    } catch {
      // A proxy's HTML error page or an empty body: keep the status, say what came back.
    }
    const e = body.error ?? {};
    return new GprApiError(
      res.status,
      e.code ?? `HTTP_${res.status}`,
      e.message ?? (text.trim().slice(0, 200) || res.statusText || `HTTP ${res.status}`),
      e.requestId ?? res.headers.get('x-request-id'),
      retryAfterSeconds(res.headers.get('retry-after')),
    );
  }
}

/** The service could not be reached (refused, reset, DNS) after the allowed retries. */
export class GprNetworkError extends Error {
  override readonly name = 'GprNetworkError';
  readonly code = 'NETWORK_ERROR';
  constructor(
    message: string,
    readonly url: string,
    override readonly cause?: unknown,
  ) {
    super(message);
  }
}

/** A request, or a wait for a state, did not finish in the time allowed. */
export class GprTimeoutError extends Error {
  override readonly name = 'GprTimeoutError';
  readonly code = 'TIMEOUT';
}

/** A rental being waited on ended in a state the wait cannot reach any more (e.g. FAILED). */
export class GprRentalStateError extends Error {
  override readonly name = 'GprRentalStateError';
  constructor(
    readonly code: string,
    message: string,
    readonly rental: { rentalId: string; status: string },
  ) {
    super(message);
  }
}

/** `Retry-After` as delay-seconds or an HTTP-date; undefined when absent or unreadable. */
export function retryAfterSeconds(header: string | null): number | undefined {
  if (!header) return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim());
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}
