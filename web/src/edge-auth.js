// Who may spend a worker's Hub token. A worker deployed with HF_TOKEN must not lend it to anyone who knows its
// URL: the token is used only for requests that carry `Authorization: Bearer <the worker's secret>`. A request
// with another bearer value brings its own Hub token (forwarded to the Hub, which decides); a request without one
// is anonymous (public repos only). Shared by examples/edge-worker and examples/adapter-router, with the HTTP
// status an error answers with (workerErrorStatus).
import { SafetensorsError } from './errors.js';

/** Compares two strings in time that depends on their lengths only (a secret must not leak by timing). */
function sameSecret(a, b) {
  const x = new TextEncoder().encode(a);
  const y = new TextEncoder().encode(b);
  let diff = x.length ^ y.length;
  for (let i = 0; i < Math.max(x.length, y.length); ++i) diff |= (x[i % (x.length || 1)] ?? 0) ^ (y[i % (y.length || 1)] ?? 0);
  return diff === 0;
}

/**
 * What a worker request may do with the Hub: `{token, trusted}`. `trusted` is true when the request carries the
 * worker's secret; `token` is then the worker's Hub token, else the request's own bearer value (or undefined).
 * Throws an Error with code 'WorkerMisconfigured' when the worker holds a Hub token but no secret to guard it
 * with (serving with it would make every private repo the token reaches public).
 * @param {Request} request
 * @param {{token?: string, secret?: string}} worker the worker's HF_TOKEN and its ACCESS_SECRET bindings
 */
export function workerHubAccess(request, { token, secret } = {}) {
  if (token && !secret) {
    const error = new Error('the worker has HF_TOKEN but no ACCESS_SECRET: set one (wrangler secret put ACCESS_SECRET) so that only its holders can use the token');
    error.code = 'WorkerMisconfigured';
    throw error;
  }
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.get('Authorization') ?? '')?.[1];
  if (bearer !== undefined && secret && sameSecret(bearer, secret)) return { token: token || undefined, trusted: true };
  return { token: bearer, trusted: false };
}

/**
 * The HTTP status a worker answers an error with: the Hub's own 401 / 403 / 404 when that is what failed, 502 for
 * other I/O failures, 400 for a bad request (InvalidArgument, TypeError), 422 for inputs the core refuses (an
 * adapter that does not fit its base...), 500 for anything else (WorkerMisconfigured included).
 */
export function workerErrorStatus(error) {
  const upstream = error?.status;
  if (upstream === 401 || upstream === 403 || upstream === 404) return upstream;
  if (error instanceof SafetensorsError) return error.code === 'IoError' ? 502 : error.code === 'InvalidArgument' ? 400 : 422;
  if (error instanceof TypeError) return 400;
  return 500;
}
