import type { IncomingMessage, ServerResponse } from 'node:http';
import inject from 'light-my-request';
import { markInProcessCaller } from '../../http/authentication.js';

/** Who an in-process call is made for: the AGENT key, and the client address its limits count. */
export interface InProcessCaller {
  keyId: string;
  remoteAddress: string;
}

/**
 * A `fetch` that answers from this process's own app, without a socket: the remote MCP
 * endpoint's tools call the API through the same SDK client a local gpr-mcp uses, and every
 * rule of the API (scopes, limits, validation, rate limits by key and by the caller's address)
 * applies as it does to any request. The request is marked as made by the caller's key
 * ({@link markInProcessCaller}); nothing from the network can carry that mark.
 */
export function inProcessFetch(
  app: (req: IncomingMessage, res: ServerResponse) => void,
  caller: InProcessCaller,
): typeof fetch {
  return async (input, init) => {
    const request = input instanceof Request ? input : new Request(input, init);
    const url = new URL(request.url);
    const body = request.body ? Buffer.from(await request.arrayBuffer()) : undefined;
    const headers: Record<string, string> = {};
    request.headers.forEach((value, name) => (headers[name] = value));
    headers.host = url.host;
    const answer = await inject(
      (req, res) => {
        markInProcessCaller(req, caller.keyId);
        // Express swaps the response's prototype for its own, which would drop the injected
        // response's capture of what is written: keep those methods on the object itself.
        const own = res as unknown as Record<string, unknown>;
        for (const name of ['write', 'end', 'writeHead', 'destroy'] as const) own[name] = res[name];
        app(req, res);
      },
      {
        method: request.method as 'GET',
        url: `${url.pathname}${url.search}`,
        headers,
        ...(body ? { payload: body } : {}),
        remoteAddress: caller.remoteAddress,
      },
    );
    const out = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [String(value)]) out.append(name, v);
    }
    const empty = answer.statusCode === 204 || answer.statusCode === 304 || request.method === 'HEAD';
    return new Response(empty ? null : answer.rawPayload, { status: answer.statusCode, headers: out });
  };
}
