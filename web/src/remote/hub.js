// Remote files: http(s) URLs and Hugging Face Hub addresses, read with Range requests so that a header costs one
// request (two when it is longer than the first range) however large the file. How reads retry, resume, pin the
// ETag, follow redirects, scope the token and time out is the HTTP policy's (src/net/http_policy.h), run by the
// `fetch` transport in range-client.js: the same code runs in Node, browsers and edge workers, and the native
// CLI runs the same policy behind libcurl.
import { SafetensorsError, errorFromValue, throwIfAborted } from '../errors.js';
import { getModule } from '../init.js';
import { RangeClient, RemoteFile } from './range-client.js';

export { RemoteFile };

export const DEFAULT_ENDPOINT = 'https://huggingface.co';
/** The first request asks for this many bytes: nearly every header fits, so one request is the usual cost. */
export const FIRST_RANGE = 64 * 1024;
const MAX_HEADER_SIZE = 100_000_000; // the core's kMaxHeaderSize: a longer header is refused, never fetched

const invalid = (message) => new SafetensorsError('InvalidArgument', message);

export function defaultEndpoint() {
  const env = typeof process !== 'undefined' ? process.env?.HF_ENDPOINT : undefined;
  return env || DEFAULT_ENDPOINT;
}

// '.' and '..' segments would be resolved away by URL parsing (even percent-encoded) and address another file.
function checkSegments(what, value) {
  if (typeof value !== 'string' || value === '') throw invalid(`${what} must be a non-empty string`);
  for (const s of value.split('/'))
    if (s === '' || s === '.' || s === '..') throw invalid(`${what} \`${value}\` has an empty, '.' or '..' segment`);
}

const encodeSegments = (p) => p.split('/').map(encodeURIComponent).join('/');

/**
 * The Hub's download URL of a file: `{endpoint}/{repo}/resolve/{revision}/{path}`. Path segments are
 * percent-encoded one by one; the revision as a whole (so `refs/pr/1` stays one segment, as the Hub expects).
 * @param {{repo: string, revision?: string, path: string, endpoint?: string}} address
 */
export function hubUrl(address) {
  const { repo, revision = 'main', path, endpoint } = hubAliases(address);
  checkSegments('repo', repo);
  checkSegments('path', path);
  if (typeof revision !== 'string' || revision === '') throw invalid('revision must be a non-empty string');
  const base = String(endpoint ?? defaultEndpoint()).replace(/\/+$/, '');
  return `${base}/${encodeSegments(repo)}/resolve/${encodeURIComponent(revision)}/${encodeSegments(path)}`;
}

/**
 * The Hub API's listing of a repo folder (its direct entries): `{endpoint}/api/models/{repo}/tree/{revision}[/{folder}]`,
 * encoded as {@link hubUrl} encodes. Internal.
 */
export function hubTreeUrl({ repo, revision = 'main', folder, endpoint }) {
  checkSegments('repo', repo);
  if (folder !== undefined && folder !== null) checkSegments('subfolder', folder);
  if (typeof revision !== 'string' || revision === '') throw invalid('revision must be a non-empty string');
  const base = String(endpoint ?? defaultEndpoint()).replace(/\/+$/, '');
  return `${base}/api/models/${encodeSegments(repo)}/tree/${encodeURIComponent(revision)}${folder ? `/${encodeSegments(folder)}` : ''}`;
}

/** True for what the remote readers take: an http(s) or hf:// URL (string or URL) or a Hub address object. */
export function isRemote(source) {
  if (typeof source === 'string') return /^(https?|hf):\/\//i.test(source);
  if (typeof URL !== 'undefined' && source instanceof URL) return /^https?:$/.test(source.protocol);
  return (
    !!source &&
    typeof source === 'object' &&
    typeof source.repo === 'string' &&
    typeof source.path === 'string' &&
    typeof source.read !== 'function' &&
    typeof source.getReader !== 'function'
  );
}

/**
 * huggingface.js's option names, accepted as aliases: `accessToken` for `token`, `hubUrl` for `endpoint` (our own
 * names win when both are given). For options and Hub addresses alike. Internal.
 */
export function hubAliases(o) {
  if (!o || typeof o !== 'object' || (o.accessToken === undefined && o.hubUrl === undefined)) return o;
  return { ...o, token: o.token ?? o.accessToken, endpoint: o.endpoint ?? o.hubUrl };
}

/** {url, label, token, tokenOrigin}: what to fetch, how errors name it, the token and the origin it may go to. */
function target(module, source, givenOptions) {
  const options = hubAliases(givenOptions);
  if (isRemote(source) && typeof source === 'object' && !(source instanceof URL)) source = hubAliases(source);
  const originOf = (url) => module.urlOrigin(String(url));
  if (typeof source === 'string' && /^hf:\/\//i.test(source)) {
    // The core reads hf:// addresses for every client (src/net/remote_address.h), so both CLIs and this API
    // request the same URL.
    const endpoint = options.endpoint ?? defaultEndpoint();
    const r = module.remoteFileAddress(source, String(endpoint));
    if (!r.ok) throw errorFromValue(r);
    return { url: r.url, label: r.label, token: options.token, tokenOrigin: originOf(endpoint) };
  }
  if (typeof source === 'string' || source instanceof URL) {
    const text = String(source);
    // A token given with a plain URL is for that URL's server (or the endpoint's, when one is named), never another.
    return { url: text, label: text, token: options.token, tokenOrigin: originOf(options.endpoint ?? text) };
  }
  if (typeof source.url === 'string' && typeof source.label === 'string') {
    // A file the CLI's shared rules named (src/net/remote_address.h): the token is the endpoint's, as for hf://.
    return {
      url: source.url,
      label: source.label,
      token: options.token,
      tokenOrigin: originOf(options.endpoint ?? defaultEndpoint()),
    };
  }
  const url = hubUrl(source);
  return {
    url,
    label: url,
    token: source.token ?? options.token,
    tokenOrigin: originOf(source.endpoint ?? defaultEndpoint()),
  };
}

/** A remote file opened without any request yet (its first read sends the first). Internal. */
export async function openFile(source, options) {
  throwIfAborted(options.signal);
  const module = await getModule();
  const t = target(module, source, options);
  // The file's clients wait on a signal of the file's own, which follows the caller's while reads run: one
  // listener on the caller's signal per file being read, not one per read in flight.
  const follow = new AbortController();
  return new RemoteFile(new RangeClient(module, t, { ...options, signal: follow.signal }), t, {
    readers: options.readers,
    signal: options.signal,
    follow,
  });
}

/**
 * Opens a remote file: sends the first ranged request (the first 64 KiB), which tells the size and the ETag the
 * later reads are held to. The result is a `{size, read(offset, length)}` source (when the size is known) that
 * every reading function accepts; close() it to cancel a body still open.
 * @param {string | URL | {repo: string, path: string, revision?: string, endpoint?: string, token?: string}} source
 * @param {{token?: string, endpoint?: string, signal?: AbortSignal, retries?: number, retryDelay?: number,
 *   idleTimeout?: number, timeout?: number, minRate?: number, rateWindow?: number, maxRedirects?: number,
 *   maxJsonBytes?: number, http?: Record<string, string>, fetch?: typeof fetch}} [options]
 *   The limits of the HTTP policy (docs/remote.md); `http` takes them by their PB_HTTP_* names.
 */
export async function openRemote(source, options = {}) {
  const file = await openFile(source, options);
  try {
    await file.fetchFirst(FIRST_RANGE);
    return file;
  } catch (error) {
    await file.close();
    throw error;
  }
}

/** Runs `fn(file)` on an opened remote file with its header fetched, closing the file afterwards. Internal. */
export async function withRemoteHeader(source, options, fn) {
  const file = await openRemote(source, options);
  try {
    await file.fetchHeader(MAX_HEADER_SIZE);
    return await fn(file);
  } finally {
    await file.close();
  }
}

/**
 * A whole remote file: {bytes, commit}. JSON (an index, a config) is held to the JSON cap (PB_HTTP_MAX_JSON_BYTES,
 * option maxJsonBytes); pass `cap` for another. Internal.
 */
export async function readRemoteWhole(source, options = {}, cap = undefined) {
  const file = await openFile(source, options);
  try {
    const bytes = await file.readWhole(cap);
    return { bytes, commit: file.commit };
  } finally {
    await file.close();
  }
}
