import type { ErrorRequestHandler, NextFunction, Request, RequestHandler, Response, Router } from 'express';

/** A route's method, path and handlers, as the generated routes register them. */
export interface RegisteredRoute {
  method: string;
  path: string;
  handlers: RequestHandler[];
}

type Registrar = (router: Router) => void;

/**
 * The handlers `register` (tsoa's RegisterRoutes) gives `method path`: the same authentication,
 * validation and controller call the app's router runs for it. Throws when it registers no such
 * route, so a renamed route fails at start-up instead of silently losing its direct path.
 */
export function registeredRoute(register: Registrar, method: string, path: string): RegisteredRoute {
  let found: RequestHandler[] | undefined;
  const record =
    (m: string) =>
    (p: unknown, ...handlers: unknown[]) => {
      if (m === method && p === path) found = handlers.flat() as RequestHandler[];
    };
  const recorder = {
    get: record('get'),
    post: record('post'),
    put: record('put'),
    patch: record('patch'),
    delete: record('delete'),
  };
  register(recorder as unknown as Router);
  if (!found) throw new Error(`the generated routes register no ${method.toUpperCase()} ${path}`);
  return { method, path, handlers: found };
}

/** What a direct route runs: the middleware that applies to its path, its own handlers, and the error handlers. */
export interface DirectRouteChain {
  /** The app's middleware that applies to this route, in the app's order. */
  middleware: RequestHandler[];
  /** Answers a request nothing answered (the app's 404). */
  notFound: RequestHandler;
  errorHandlers: ErrorRequestHandler[];
}

/**
 * One hot route (`POST /api/v1/rentals`) run through a fixed list of handlers, ahead of the app's
 * router: the same middleware functions the app mounts, then the route's generated handlers, then
 * the same error handler, called one after another as Express would call them, without walking
 * every mounted layer and sub-router to find them (each layer's path test, per request, costs more
 * than the route's own middleware). Only the exact path is taken; any other spelling Express
 * would match (a trailing slash, another case, a query string) goes the usual way, to the same
 * handlers. The caller lists the middleware: whatever cannot apply to this path (other paths'
 * routers and pages, CORS of the public reads) is left out of it.
 */
export function directRoute(route: RegisteredRoute, chain: DirectRouteChain): RequestHandler {
  const method = route.method.toUpperCase();
  const handlers = [...chain.middleware, ...route.handlers];
  // What `req.route` is after Express matched the route: authentication and the request metrics read its path.
  const matched = Object.freeze({ path: route.path, methods: Object.freeze({ [route.method]: true }) });
  return (req: Request, res: Response, next: NextFunction) => {
    if (req.method !== method || req.url !== route.path) return next();
    req.route = matched;
    req.params = {};
    let i = 0;
    let e = 0;
    const fail = (err: unknown): void => {
      const handler = chain.errorHandlers[e++];
      if (!handler) return next(err);
      try {
        handler(err, req, res, (again?: unknown) => fail(again ?? err));
      } catch (thrown) {
        fail(thrown);
      }
    };
    const step = (err?: unknown): void => {
      if (err !== undefined && err !== null) return fail(err);
      const handler = handlers[i++] ?? chain.notFound;
      if (i > handlers.length + 1) return next();
      try {
        const result = handler(req, res, step) as unknown;
        // Express 5 passes a handler's rejected promise to the error handlers; so does this.
        if (result instanceof Promise)
          result.then(undefined, (rejected: unknown) =>
            step(rejected ?? new Error('a handler rejected without a reason')),
          );
      } catch (thrown) {
        step(thrown);
      }
    };
    step();
  };
}
