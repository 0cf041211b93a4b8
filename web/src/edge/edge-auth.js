// Who may spend a worker's Hub token. A worker deployed with HF_TOKEN must not lend it to anyone who knows its
// URL: the token is used only for requests that carry `Authorization: Bearer <the worker's secret>`. A request
// with another bearer value brings its own Hub token (forwarded to the Hub, which decides); a request without one
// is anonymous (public repos only). Shared by examples/edge-worker and examples/adapter-router, with the HTTP
// status an error answers with (workerErrorStatus) and the servers a request may make the worker read from
// (workerEndpoint).
import { SafetensorsError } from '../errors.js';

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

/** The origin of an http(s) URL, or null. */
function httpOrigin(text) {
  try {
    const u = new URL(String(text));
    return /^https?:$/.test(u.protocol) && !u.username && !u.password ? u.origin : null;
  } catch {
    return null;
  }
}

/**
 * The server a worker reads an address from, when a request names one (a registration's `endpoint`): the worker's
 * own Hub endpoint (HF_ENDPOINT) when it names none or the same origin; another origin only when the deployment
 * lists it in `allowed` (ALLOWED_ENDPOINTS: origins separated by commas or spaces). `{endpoint, own}`: `own` is
 * true for the worker's endpoint, the only one its Hub token may go to. Throws InvalidArgument otherwise, so a
 * request cannot make the worker read from (and send credentials to) a server of its choosing.
 * @param {string | undefined | null} requested
 * @param {{endpoint: string, allowed?: string | string[]}} worker
 */
export function workerEndpoint(requested, { endpoint, allowed } = {}) {
  const home = httpOrigin(endpoint);
  if (!home)
    throw new SafetensorsError('InvalidArgument', `the worker's Hub endpoint \`${endpoint}\` is not an http(s) URL`);
  if (requested === undefined || requested === null || requested === '') return { endpoint, own: true };
  if (typeof requested !== 'string')
    throw new SafetensorsError('InvalidArgument', '`endpoint` must be a string (an http(s) origin)');
  const origin = httpOrigin(requested);
  if (origin === home) return { endpoint, own: true };
  const list = (Array.isArray(allowed) ? allowed : String(allowed ?? '').split(/[\s,]+/))
    .filter(Boolean)
    .map(httpOrigin);
  const shown = requested.length > 200 ? `${requested.slice(0, 200)}…` : requested;
  if (origin === null || !list.includes(origin))
    throw new SafetensorsError(
      'InvalidArgument',
      `\`endpoint\` \`${shown}\` is not allowed: this worker reads from its Hub (${home})${list.length ? ` and ${list.join(', ')}` : ''} only (ALLOWED_ENDPOINTS lists other servers)`,
    );
  return { endpoint: origin, own: false };
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
