// Remote files: http(s) URLs and Hugging Face Hub addresses, read with Range requests so that a header costs one
// request (two when it is longer than the first range) however large the file. Reads follow redirects, retry
// network errors and 5xx answers with exponential backoff, resume at the byte reached, and pin the first answer's
// ETag (and size) so a file that changes between two requests fails cleanly instead of mixing two versions.
// Only `fetch` is used: the same code runs in Node, browsers and edge workers.
import { SafetensorsError, abortReason, errorFromHandle, throwIfAborted } from './errors.js';
import { concat } from './handles.js';
import { getModule } from './init.js';
import { inspectRendered } from './inspect.js';
import { openSource, raceAbort } from './sources.js';

export const DEFAULT_ENDPOINT = 'https://huggingface.co';
/** The first request asks for this many bytes: nearly every header fits, so one request is the usual cost. */
export const FIRST_RANGE = 64 * 1024;
const MAX_HEADER_SIZE = 100_000_000; // the core's kMaxHeaderSize: a longer header is refused, never fetched
const INDEX = 'model.safetensors.index.json';
const MAX_RETRY_AFTER = 10; // seconds: a server asking for a longer pause gets an error now instead
const TRANSIENT = Symbol('transient'); // on errors worth retrying; its value is the Retry-After in seconds, or null

const invalid = (message) => new SafetensorsError('InvalidArgument', message);

function defaultEndpoint() {
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
export function hubUrl({ repo, revision = 'main', path, endpoint }) {
  checkSegments('repo', repo);
  checkSegments('path', path);
  if (typeof revision !== 'string' || revision === '') throw invalid('revision must be a non-empty string');
  const base = String(endpoint ?? defaultEndpoint()).replace(/\/+$/, '');
  return `${base}/${encodeSegments(repo)}/resolve/${encodeURIComponent(revision)}/${encodeSegments(path)}`;
}

/**
 * Parses `hf://owner/repo/path[@revision]`. The revision follows the last '@' of the path (it may contain '/',
 * as `refs/pr/1`); a file name containing '@' therefore needs an explicit revision.
 * @param {string} text
 */
export function parseHfUrl(text) {
  if (!/^hf:\/\//i.test(text)) throw invalid(`\`${text}\` is not an hf:// address`);
  const rest = text.slice(5);
  const parts = rest.split('/');
  if (parts.length < 3) throw invalid(`\`${text}\` must look like hf://owner/repo/path[@revision]`);
  const repo = `${parts[0]}/${parts[1]}`;
  let path = parts.slice(2).join('/');
  let revision = 'main';
  const at = path.lastIndexOf('@');
  if (at !== -1) {
    revision = path.slice(at + 1);
    path = path.slice(0, at);
    if (revision === '') throw invalid(`\`${text}\` has an empty revision`);
  }
  return { repo, path, revision };
}

/** True for what the remote readers take: an http(s) or hf:// URL (string or URL) or a Hub address object. */
export function isRemote(source) {
  if (typeof source === 'string') return /^(https?|hf):\/\//i.test(source);
  if (typeof URL !== 'undefined' && source instanceof URL) return /^https?:$/.test(source.protocol);
  return (
    !!source && typeof source === 'object' && typeof source.repo === 'string' && typeof source.path === 'string' &&
    typeof source.read !== 'function' && typeof source.getReader !== 'function'
  );
}

/** {url, label, token}: what to fetch, how errors name it, and the token for it. */
function target(source, options) {
  if (typeof source === 'string' && /^hf:\/\//i.test(source))
    return { url: hubUrl({ ...parseHfUrl(source), endpoint: options.endpoint }), label: source, token: options.token };
  if (typeof source === 'string' || source instanceof URL) {
    const text = String(source);
    return { url: text, label: text, token: options.token };
  }
  const url = hubUrl(source);
  return { url, label: url, token: source.token ?? options.token };
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortReason(signal));
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortReason(signal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

const stripWeak = (etag) => (etag ? etag.replace(/^W\//, '') : null);

/** One open response body, positioned at `pos` in the file; it delivers bytes up to `end` (exclusive). */
class Body {
  constructor(response, pos, end) {
    this.reader = response.body.getReader();
    this.pos = pos;
    this.end = end;
    this.pending = null; // bytes read past what the last take() wanted
  }

  /** Up to `max` bytes at this.pos, or null at the end of the body. */
  async take(max, signal) {
    let chunk = this.pending;
    this.pending = null;
    if (!chunk) {
      const { done, value } = await raceAbort(this.reader.read(), signal);
      if (done) return null;
      chunk = value;
    }
    if (chunk.length > max) {
      this.pending = chunk.subarray(max);
      chunk = chunk.subarray(0, max);
    }
    this.pos += chunk.length;
    return chunk;
  }

  cancel(reason) {
    return this.reader.cancel(reason).catch(() => {});
  }
}

/**
 * A file read over HTTP by ranges. Use {@link openRemote}. Reads are served from what the first request
 * fetched when they can, run one at a time, and reuse an open body when the next read continues it (a server
 * that ignores Range is read as one stream, only as far as needed).
 */
export class RemoteFile {
  constructor(source, options = {}) {
    const t = target(source, options);
    this.url = t.url;
    this.label = t.label;
    this.token = t.token ?? null;
    this.signal = options.signal;
    this.retries = options.retries ?? 5;
    this.retryDelay = options.retryDelay ?? 250;
    this.fetch = options.fetch ?? ((url, init) => globalThis.fetch(url, init));
    /** Total size, once an answer told it (null while unknown: a 200 without Content-Length). */
    this.size = null;
    /** The first answer's ETag: every later answer must carry the same. */
    this.etag = null;
    /** X-Repo-Commit of the first answer, when the server exposes it (the Hub does for files it serves itself). */
    this.commit = null;
    /** HTTP requests made so far (redirects followed by fetch count as one). */
    this.requests = 0;
    this.head = new Uint8Array(0); // the file's first bytes, as far as fetched for the header
    this.body = null;
    this.queue = Promise.resolve();
    this.answered = false;
  }

  /** `length` bytes at `offset`: fewer only at the end of the file. */
  read(offset, length) {
    const run = this.queue.then(() => this.readNow(offset, length));
    this.queue = run.catch(() => {});
    return run;
  }

  async readNow(offset, length) {
    const end = offset + length;
    if (end <= this.head.length) return this.head.slice(offset, end);
    const cached = offset < this.head.length ? this.head.slice(offset) : null;
    const rest = await this.fetchRange(cached ? this.head.length : offset, end);
    return cached ? concat([cached, rest]) : rest;
  }

  /** Bytes [start, end) of the file (clamped to its size), with retries that resume where the last try stopped. */
  async fetchRange(start, end) {
    const parts = [];
    let pos = start;
    let failures = 0;
    for (;;) {
      const stop = this.size === null ? end : Math.min(end, this.size);
      if (pos >= stop) break;
      throwIfAborted(this.signal);
      try {
        if (!this.body || this.body.pos > pos || pos >= this.body.end) {
          await this.dropBody();
          if (!(await this.request(pos, stop))) break; // 416: nothing at pos
        }
        // A body may start before pos (a 200 to a ranged request starts at byte 0): skip to pos, then read.
        const body = this.body;
        const skipping = body.pos < pos;
        const chunk = await body.take(skipping ? pos - body.pos : Math.min(stop, body.end) - pos, this.signal);
        if (chunk === null) {
          this.body = null;
          if (body.pos >= body.end) continue; // that answer is used up: ask for the rest
          if (body.end === Infinity) {
            this.size = body.pos; // a body of unknown length ended: so does the file
            continue;
          }
          throw Object.assign(new Error(`the connection closed at byte ${body.pos} of ${body.end}`), { [TRANSIENT]: null });
        }
        if (!skipping) {
          parts.push(chunk);
          pos += chunk.length;
          failures = 0;
        }
      } catch (error) {
        await this.dropBody();
        if (this.signal?.aborted) throw abortReason(this.signal);
        if (error instanceof SafetensorsError && !(TRANSIENT in error)) throw error;
        const retryAfter = error?.[TRANSIENT] ?? null;
        if (failures >= this.retries || (retryAfter !== null && retryAfter > MAX_RETRY_AFTER)) throw this.failure(error);
        failures += 1;
        await sleep(retryAfter !== null ? retryAfter * 1000 : Math.min(this.retryDelay * 2 ** (failures - 1), 8000), this.signal);
      }
    }
    return concat(parts) ?? new Uint8Array(0);
  }

  /** Sends one ranged GET for [pos, stop) and opens its body. False on 416 (nothing at pos). */
  async request(pos, stop) {
    const headers = { Range: `bytes=${pos}-${stop - 1}` };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    this.requests += 1;
    const response = await this.fetch(this.url, { headers, redirect: 'follow', signal: this.signal });
    const h = response.headers;
    if (response.status === 416) {
      await response.body?.cancel().catch(() => {});
      const total = /^bytes \*\/(\d+)$/.exec(h.get('content-range') ?? '');
      if (!total) throw this.httpError(response);
      this.pin(h, Number(total[1]));
      return false;
    }
    if (response.status !== 200 && response.status !== 206) {
      await response.body?.cancel().catch(() => {});
      throw this.httpError(response);
    }
    let size = null;
    let body;
    if (response.status === 206) {
      const range = h.get('content-range') ?? '';
      const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(range);
      const length = h.get('content-length');
      if (!m || Number(m[1]) !== pos || Number(m[2]) >= stop || Number(m[2]) < pos ||
          (length !== null && Number(length) !== Number(m[2]) - pos + 1)) {
        await response.body?.cancel().catch(() => {});
        throw new SafetensorsError('IoError', `cannot read \`${this.label}\`: wrong Content-Range \`${range}\` in answer to bytes=${pos}-${stop - 1}`);
      }
      if (m[3] !== '*') size = Number(m[3]);
      body = new Body(response, pos, Number(m[2]) + 1);
    } else {
      // The whole file from byte 0 (the server ignored Range). Its length is the file's unless it is compressed.
      const encoding = h.get('content-encoding');
      const length = h.get('content-length');
      if (length !== null && (!encoding || encoding === 'identity')) size = Number(length);
      body = new Body(response, 0, size ?? Infinity);
    }
    this.body = body; // set first, so that a failed check below cancels it
    this.pin(h, size);
    return true;
  }

  /** Pins the first answer's ETag and size; a later answer with others means the file changed. */
  pin(headers, size) {
    const etag = stripWeak(headers.get('etag'));
    if (!this.answered) {
      this.answered = true;
      this.etag = etag;
      this.commit = headers.get('x-repo-commit');
    } else if (etag !== null && this.etag !== null && etag !== this.etag) {
      throw new SafetensorsError('IoError', `\`${this.label}\` changed while being read (ETag ${this.etag} became ${etag})`);
    }
    if (size === null) return;
    if (this.size !== null && size !== this.size)
      throw new SafetensorsError('IoError', `\`${this.label}\` changed while being read (size ${this.size} became ${size})`);
    this.size = size;
  }

  httpError(response) {
    const status = response.status;
    const detail = response.headers.get('x-error-message');
    const hint = (status === 401 || status === 403) && !this.token ? ' (no token was sent)' : '';
    const e = new SafetensorsError(
      'IoError',
      `cannot ${this.answered ? 'read' : 'open'} \`${this.label}\`: HTTP ${status}${detail ? `: ${detail}` : ''}${hint}`,
    );
    e.status = status;
    if (status >= 500 || status === 429) {
      const after = response.headers.get('retry-after');
      e[TRANSIENT] = after !== null && /^\d+$/.test(after.trim()) ? Number(after) : null;
    }
    return e;
  }

  /** The error a read gives up with: HTTP errors as they are, network errors named after the file. */
  failure(error) {
    if (error instanceof SafetensorsError) return error;
    const reason = error?.cause?.message ?? error?.message ?? String(error);
    return new SafetensorsError('IoError', `cannot read \`${this.label}\`: ${reason}`, { cause: error });
  }

  async dropBody(reason) {
    const body = this.body;
    this.body = null;
    await body?.cancel(reason);
  }

  /** The first bytes, through the end of the header: at most one more request after the first. Internal. */
  async fetchHeader() {
    const head = this.head;
    if (head.length < 8) return;
    const n = new DataView(head.buffer, head.byteOffset, 8).getBigUint64(0, true);
    // A length the core will refuse (too large, or past the end of the file) is not fetched: the core reports it.
    if (n > BigInt(MAX_HEADER_SIZE)) return;
    const need = 8 + Number(n);
    if (need <= head.length || (this.size !== null && need > this.size)) return;
    this.head = concat([head, await this.fetchRange(head.length, need)]);
  }

  /** What inspect() reads the header from: a {size, read} source, or the header bytes when the size is unknown. */
  headerSource() {
    if (this.size === null) return [this.head];
    return { size: this.size, read: (offset, length) => this.read(offset, length) };
  }

  /** Cancels an open response body. */
  async close() {
    await this.queue;
    await this.dropBody();
  }
}

/**
 * Opens a remote file: sends the first ranged request (the first 64 KiB), which tells the size and the ETag the
 * later reads are held to. The result is a `{size, read(offset, length)}` source (when the size is known) that
 * every reading function accepts; close() it to cancel a body still open.
 * @param {string | URL | {repo: string, path: string, revision?: string, endpoint?: string, token?: string}} source
 * @param {{token?: string, endpoint?: string, signal?: AbortSignal, retries?: number, retryDelay?: number, fetch?: typeof fetch}} [options]
 */
export async function openRemote(source, options = {}) {
  throwIfAborted(options.signal);
  const file = new RemoteFile(source, options);
  try {
    file.head = await file.fetchRange(0, FIRST_RANGE);
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
    await file.fetchHeader();
    return await fn(file);
  } finally {
    await file.close();
  }
}

/**
 * The bytes of one tensor, reading nothing else after the header: a remote file costs the header's requests
 * plus one Range request (none when the first request already brought the tensor). Also takes local
 * random-access sources (bytes, Blob, {size, read}).
 * @param {any} source
 * @param {string} name
 * @param {object} [options] as for {@link openRemote}
 */
export async function readTensor(source, name, options = {}) {
  const run = async (headerSource, read) => {
    const { header } = await inspectRendered(headerSource, { signal: options.signal });
    const tensor = header.tensors.find((t) => t.name === name);
    if (!tensor) throw new SafetensorsError('InvalidArgument', `no tensor named \`${name}\``, { tensor: name });
    if (tensor.byteLength === 0) return new Uint8Array(0);
    const start = 8 + header.headerSize + tensor.dataOffsets[0];
    const bytes = await raceAbort(Promise.resolve(read(start, tensor.byteLength)), options.signal);
    if (bytes.length !== tensor.byteLength)
      throw new SafetensorsError('IoError', `the file ended inside tensor \`${name}\``, { tensor: name, offset: start + bytes.length });
    return bytes;
  };
  if (isRemote(source)) return withRemoteHeader(source, options, (file) => run(file.headerSource(), (o, n) => file.read(o, n)));
  const src = openSource(source);
  if (!src.random) throw new TypeError('peft-bridge: readTensor needs random access: bytes, a Blob, {size, read}, a URL or a Hub address');
  return run(source, async (o, n) => (await src.read(o, n)).slice());
}

/** Reads a whole (small) remote file: JSON such as an index. */
async function readWhole(file) {
  const parts = [file.head];
  for (let pos = file.head.length; file.size === null || pos < file.size; ) {
    const bytes = await file.read(pos, 1 << 20);
    if (bytes.length === 0) break;
    parts.push(bytes);
    pos += bytes.length;
  }
  return concat(parts);
}

// The index rules live in the core (src/merge/model_index.cc), shared with both merges: the JSON limits, a
// non-empty weight_map of plain .safetensors names, and, once the headers are read, every entry in its shard.
const checked = (r) => {
  if (!r.ok) throw errorFromHandle({ errorJson: () => r.errorJson, errorText: () => r.errorText });
  return r;
};

async function parseIndex(bytes) {
  let text;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new SafetensorsError('InvalidConfig', `${INDEX} is not valid UTF-8`);
  }
  const { shards } = checked((await getModule()).modelIndexShards(text));
  return { text, index: JSON.parse(text), names: JSON.parse(shards) };
}

/**
 * Inspects every shard of a model repo: reads model.safetensors.index.json (or, without one, takes the single
 * model.safetensors), checks the shard names, and inspects each shard's header, `concurrency` at a time, at the
 * commit the index came from when the server says which. Errors name the shard; the first one stops the rest.
 * @param {{repo: string, revision?: string, endpoint?: string, token?: string, concurrency?: number,
 *   signal?: AbortSignal, retries?: number, retryDelay?: number, fetch?: typeof fetch}} options
 */
export async function inspectRepo(options) {
  const { repo, revision = 'main', endpoint, token, concurrency = 4, signal } = options;
  const address = (path, rev) => ({ repo, revision: rev, path, endpoint, token });
  let index = null;
  let indexText = null;
  let names;
  let pinned = revision;
  let commit = null;
  try {
    const file = await openRemote(address(INDEX, revision), options);
    try {
      ({ text: indexText, index, names } = await parseIndex(await readWhole(file)));
      commit = file.commit;
    } finally {
      await file.close();
    }
    pinned = commit ?? revision; // every shard from the index's commit, even if the branch moves meanwhile
  } catch (error) {
    if (error?.status !== 404) throw error;
    names = ['model.safetensors'];
  }

  const controller = new AbortController();
  const onAbort = () => controller.abort(abortReason(signal));
  signal?.addEventListener('abort', onAbort, { once: true });
  if (signal?.aborted) onAbort();
  const shards = new Array(names.length);
  let next = 0;
  let failure = null;
  const worker = async () => {
    while (next < names.length && !failure) {
      const i = next++;
      try {
        const { header } = await inspectRendered(address(names[i], pinned), { ...options, signal: controller.signal });
        shards[i] = { path: names[i], header };
      } catch (error) {
        if (!failure) {
          failure = error instanceof SafetensorsError && !signal?.aborted
            ? new SafetensorsError(error.code, `${names[i]}: ${error.message}`, { tensor: error.tensor, offset: error.offset, cause: error })
            : error;
          controller.abort(failure);
        }
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, names.length)) }, worker));
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
  if (failure) throw failure;

  if (index) {
    const held = Object.fromEntries(shards.map((s) => [s.path, s.header.tensors.map((t) => t.name)]));
    checked((await getModule()).checkIndexShards(indexText, JSON.stringify(held)));
  }
  return { repo, revision: pinned, commit, index, shards };
}
