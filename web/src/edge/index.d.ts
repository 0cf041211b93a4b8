// Types of the `peft-bridge/edge` entry (edge/index.js): the adapter cache (declared with the root entry's types,
// which export it too) and the helpers of a worker that serves it.
export { AdapterCache, createAdapterCache } from '../index.js';
export type {
  AdapterCacheOptions,
  AdapterCacheStats,
  AdapterRegistration,
  CacheDtype,
  CachedModule,
  CachedModuleInfo,
  ComposedDelta,
  RegisteredAdapter,
} from '../index.js';

/** What a worker request may do with the Hub: with `Authorization: Bearer <secret>` the worker's own `token`
 * (`trusted: true`); with another bearer value that value, as the caller's own Hub token; with none, no token.
 * Throws (code `WorkerMisconfigured`) when a token is given without a secret to guard it. */
export function workerHubAccess(
  request: { headers: { get(name: string): string | null } },
  worker?: { token?: string; secret?: string },
): { token: string | undefined; trusted: boolean };

/** `promise`, settled in the caller's request: in workerd, what follows a promise another request settled runs in
 * that request's context (and its I/O dies with it), so there this waits by polling a timer of its own; elsewhere it
 * is the promise itself. For workers that share work between requests (the adapter cache uses it). */
export function inOwnRequest<T>(promise: Promise<T>): Promise<T>;

/** The HTTP status a worker answers an error with: the Hub's 401 / 403 / 404, 502 for other I/O failures, 400 for
 * a bad request (a malformed percent-encoding too), 413 for LimitExceeded, 422 for inputs the core refuses, 500
 * otherwise. */
export function workerErrorStatus(error: unknown): number;

/** The server a worker reads an address a request names from: its own Hub `endpoint` when the request names none
 * (or the same origin), else an origin `allowed` lists (ALLOWED_ENDPOINTS: comma- or space-separated); any other
 * rejects with InvalidArgument. `own`: the worker's endpoint, the only one its Hub token may go to. The core's rule,
 * which compares origins as the adapter cache does when it decides where its token goes. */
export function workerEndpoint(
  requested: string | undefined | null,
  worker: { endpoint: string; allowed?: string | string[] },
): Promise<{ endpoint: string; own: boolean }>;
