/**
 * What the RunPod fake answers on the paths of APIs RunPod has retired, and on GraphQL, which it
 * does not serve.
 *
 * REST v1 (`rest.runpod.io/v1`) stopped serving traffic on 2026-11-15 and answers 410 Gone, as
 * RunPod's retirement notice says (quoted, with where, in `test/fixtures/providers/runpod/SOURCES.md`).
 * No body of a retired call was recorded, so this form is a choice, made this way:
 * - **410, not 404.** The notice names 410; a 404 from RunPod means "no such pod", and a client
 *   reading a retired list as empty would think every pod gone.
 * - **An RFC 9457 problem document** (`application/problem+json`, `title`, `status`, `detail`):
 *   the form every RunPod REST error takes. Its words are this fake's; they name the retirement and
 *   the successor, as a retired API's answer would.
 * - **Every method, before the key is checked**: a service that "stops serving traffic" answers the
 *   same whatever is sent. Cloudflare's User-Agent gate still answers first: the edge stands in
 *   front of every RunPod path.
 * - The fake serves one origin, so `/v1/...` on it stands for the retired host.
 *
 * GraphQL (`api.runpod.io/graphql`) still answers live until its announced retirement in 2027, but
 * no call of the plugin uses it (`docs/providers/runpod.md`, "REST v1 retired"), so the fake does not
 * serve it: `/graphql` answers 404 with a detail saying so, and a test that reaches for it fails
 * naming why.
 */

/** The day RunPod's REST v1 stopped serving traffic. */
export const RUNPOD_V1_RETIRED_ON = '2026-11-15';

/** A problem document for a path the fake refuses before anything else. */
export interface RetiredPathAnswer {
  status: number;
  title: string;
  detail: string;
}

/** The answer for a retired or unserved `path`, or null for a path the fake routes as usual. */
export function retiredPathAnswer(path: string): RetiredPathAnswer | null {
  if (path === '/v1' || path.startsWith('/v1/'))
    return {
      status: 410,
      title: 'Gone',
      detail: `REST API v1 was retired on ${RUNPOD_V1_RETIRED_ON} and no longer serves requests. Use REST API v2 at https://api.runpod.io/v2.`,
    };
  if (path === '/graphql' || path.startsWith('/graphql/'))
    return {
      status: 404,
      title: 'Not Found',
      detail: 'this fake serves no GraphQL: the RunPod plugin makes no GraphQL call',
    };
  return null;
}
