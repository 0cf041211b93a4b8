// Who may spend a worker's Hub token. A worker deployed with HF_TOKEN must not lend it to anyone who knows its
// URL: the token is used only for requests that carry `Authorization: Bearer <the worker's secret>`. A request
// with another bearer value brings its own Hub token (forwarded to the Hub, which decides); a request without one
// is anonymous (public repos only). Shared by examples/edge-worker and examples/adapter-router, with the HTTP
// status an error answers with (workerErrorStatus) and the servers a request may make the worker read from
// (workerEndpoint, the core's rule).
import { SafetensorsError, errorFromValue } from '../errors.js';
import { getModule } from '../init.js';

/** Compares two strings in time that depends on their lengths only (a secret must not leak by timing). */
function sameSecret(a, b) {
  const x = new TextEncoder().encode(a);
  const y = new TextEncoder().encode(b);
  let diff = x.length ^ y.length;
  for (let i = 0; i < Math.max(x.length, y.length); ++i)
    diff |= (x[i % (x.length || 1)] ?? 0) ^ (y[i % (y.length || 1)] ?? 0);
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
    const error = new Error(
      'the worker has HF_TOKEN but no ACCESS_SECRET: set one (wrangler secret put ACCESS_SECRET) so that only its holders can use the token',
    );
    error.code = 'WorkerMisconfigured';
    throw error;
  }
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.get('Authorization') ?? '')?.[1];
  if (bearer !== undefined && secret && sameSecret(bearer, secret)) return { token: token || undefined, trusted: true };
  return { token: bearer, trusted: false };
}

/**
 * The server a worker reads an address from, when a request names one (a registration's `endpoint`): the worker's
 * own Hub endpoint (HF_ENDPOINT) when it names none or the same origin; another origin only when the deployment
 * lists it in `allowed` (ALLOWED_ENDPOINTS: origins separated by commas or spaces). Resolves to `{endpoint, own}`:
 * `own` is true for the worker's endpoint, the only one its Hub token may go to. Rejects with InvalidArgument
 * otherwise, so a request cannot make the worker read from (and send credentials to) a server of its choosing. The
 * rule is the core's (net::ChooseWorkerEndpoint), which compares origins as the adapter cache does when it decides
 * where its token goes.
 * @param {string | undefined | null} requested
 * @param {{endpoint: string, allowed?: string | string[]}} worker
 */
export async function workerEndpoint(requested, { endpoint, allowed } = {}) {
  if (requested !== undefined && requested !== null && typeof requested !== 'string')
    throw new SafetensorsError('InvalidArgument', '`endpoint` must be a string (an http(s) origin)');
  const module = await getModule();
  const list = Array.isArray(allowed) ? allowed.join(',') : String(allowed ?? '');
  const r = module.workerEndpoint(requested ?? null, String(endpoint), list);
  if (!r.ok) throw errorFromValue(r);
  return { endpoint: r.endpoint, own: r.own };
}

/**
 * The HTTP status a worker answers an error with: the Hub's own 401 / 403 / 404 when that is what failed, 502 for
 * other I/O failures, 400 for a bad request (InvalidArgument, TypeError, a malformed percent-encoding: URIError),
 * 413 for a request beyond a configured bound (LimitExceeded: a composition's rank or size), 422 for inputs the
 * core refuses (an adapter that does not fit its base...), 500 for anything else (WorkerMisconfigured included).
 */
export function workerErrorStatus(error) {
  const upstream = error?.status;
  if (upstream === 401 || upstream === 403 || upstream === 404) return upstream;
  if (error instanceof SafetensorsError) {
    if (error.code === 'IoError') return 502;
    if (error.code === 'InvalidArgument') return 400;
    if (error.code === 'LimitExceeded') return 413;
    return 422;
  }
  if (error instanceof TypeError || error instanceof URIError) return 400;
  return 500;
}
