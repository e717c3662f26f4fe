import { providerCallDuration, providerCalls, secondsSince } from '../metrics/registry.js';
import type { Provider, ProviderErrorClass } from './provider.js';

/** The plugin calls that reach a cloud, each counted and timed by operation. */
const OPERATIONS = new Set([
  'listOffers',
  'create',
  'findByLabel',
  'get',
  'destroy',
  'listInstances',
  'afterDestroyed',
]);

const METERED = Symbol('metered provider');
const TIMED = Symbol('timed call');

type Fn = ((...args: unknown[]) => unknown) & { [TIMED]?: true };

/** The outcome label of a failed call: the error class a plugin's ProviderApiError carries, else `internal`. */
function failureOutcome(err: unknown): ProviderErrorClass {
  const errorClass = (err as { errorClass?: unknown } | null)?.errorClass;
  return typeof errorClass === 'string' ? (errorClass as ProviderErrorClass) : 'internal';
}

/** The outcome label of a call that answered: a create's result kind, `ok` for the rest. */
function successOutcome(operation: string, result: unknown): string {
  if (operation !== 'create') return 'ok';
  const kind = (result as { kind?: unknown } | null)?.kind;
  return typeof kind === 'string' ? kind : 'ok';
}

function timed(provider: string, operation: string, fn: Fn, target: Provider): Fn {
  const wrapped: Fn = async (...args: unknown[]) => {
    const start = process.hrtime.bigint();
    let outcome = 'internal';
    try {
      const result = await fn.apply(target, args);
      outcome = successOutcome(operation, result);
      return result;
    } catch (err) {
      outcome = failureOutcome(err);
      throw err;
    } finally {
      providerCalls.inc({ provider, operation, outcome });
      providerCallDuration.observe({ provider, operation, outcome }, secondsSince(start));
    }
  };
  wrapped[TIMED] = true;
  return wrapped;
}

/**
 * `provider` with each cloud call counted and timed by provider id, operation and outcome (the
 * one place provider calls are measured: the registry wraps every provider it holds). Everything
 * else, and a method a test replaces on it, passes through to the plugin; wrapping twice is a no-op.
 */
export function meteredProvider(provider: Provider): Provider {
  if ((provider as unknown as Record<symbol, unknown>)[METERED]) return provider;
  const wrappers = new Map<string, { fn: Fn; wrapped: Fn }>();
  return new Proxy(provider, {
    get(target, prop) {
      if (prop === METERED) return true;
      const value = Reflect.get(target, prop, target) as unknown;
      if (typeof prop !== 'string' || !OPERATIONS.has(prop) || typeof value !== 'function' || (value as Fn)[TIMED])
        return value;
      let w = wrappers.get(prop);
      if (w?.fn !== value) {
        w = { fn: value as Fn, wrapped: timed(target.id, prop, value as Fn, target) };
        wrappers.set(prop, w);
      }
      return w.wrapped;
    },
  });
}
