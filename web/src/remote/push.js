// pushToHub: outputs to a Hub repo in one commit, through @huggingface/hub's commit (preupload, LFS batch, basic
// or multipart PUTs, the NDJSON commit). What this file adds around the library:
//   - contents that are not in memory: a Node file path, or a function returning a fresh stream of a known size
//     (our outputs are deterministic), as Blobs whose stream() / slice() read again. The library hashes every
//     LFS file in one streaming pass (sha256 and size go in the LFS batch call) and uploads it in a second
//     pass, so nothing is held whole; the upload of a generated file replays it once, parts in order.
//   - retries of the storage and API calls (the library has none), as the core's one retry decision says
//     (net/http_retry.h, through the WASM module: docs/remote.md); the commit call itself is not retried (it may
//     have been applied): a failed push leaves no commit, and a second push reuses the LFS objects the first
//     uploaded.
//   - the deadlines of every request (PB_HTTP_IDLE_MS, PB_HTTP_MIN_RATE, PB_HTTP_TOTAL_MS): the core's
//     net::HttpCallClock (src/net/http_policy.h), which the native CLI's push runs too, so a Hub that accepts the
//     connection and never answers fails the call instead of hanging.
//   - byte progress, abort, repo and branch creation, and errors as SafetensorsError (IoError / InvalidArgument).
// The library is imported on first use, so loading the package never needs it (a bundled app passes it as `hub`).
import { SafetensorsError, abortReason, errorFromHandle, throwIfAborted } from '../errors.js';
import { defaultEndpoint } from './hub.js';
import { getModule } from '../init.js';
import { KIND, LIMIT_OPTIONS, limitsText, transportKind } from './range-client.js';
import { requireLocalFiles } from '../io/sources.js';

const PIECE = 4 << 20; // bytes read from a file per step

/** How uploads (PUTs of a Blob) are sent when no `fetch` is given: node.js installs node-upload.js. */
let uploadTransport = null;
/** Installs the upload transport (the Node entry and the npm CLI do). Internal. */
export function setUploadTransport(transport) {
  uploadTransport = transport;
}

let hubLibrary = null;
/**
 * @huggingface/hub, imported once. The specifier is held in a variable so that bundlers (esbuild in wrangler, Vite,
 * webpack) leave it alone: the package's exports map gives them its Node build (fs, stream, os), which a worker or
 * a browser bundle cannot hold. Node and import maps resolve it at run time; a bundled app passes the module it
 * bundled (`import * as hub from '@huggingface/hub'`, the browser build) as the `hub` option.
 */
async function loadHub() {
  const specifier = '@huggingface/hub';
  hubLibrary ??= import(/* webpackIgnore: true */ /* @vite-ignore */ specifier).catch((error) => {
    hubLibrary = null;
    throw new SafetensorsError(
      'InvalidArgument',
      `pushToHub needs the @huggingface/hub package: install it, or pass the module as the \`hub\` option (${error?.message ?? error})`,
      { cause: error },
    );
  });
  return hubLibrary;
}

/**
 * Why `repo` is not a Hub repo id `owner/name`, or null: huggingface_hub's validate_repo_id rules, as the CLIs
 * check `--push-to` (src/app/push_target.cc, the same messages): each part 1-96 letters, digits, '-', '_' or
 * '.', starting and ending with a letter, digit or '_', no '--' or '..', the name not ending in .git.
 */
export function repoIdProblem(repo) {
  if (typeof repo !== 'string') return 'repo must be a string OWNER/NAME';
  const shown = `\`${repo.length > 200 ? `${repo.slice(0, 200)}…` : repo}\``;
  const parts = repo.split('/');
  if (parts.length !== 2) return `${shown} is not a repo id: expected OWNER/NAME`;
  for (const part of parts) {
    if (
      !/^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$/.test(part) ||
      part.includes('--') ||
      part.includes('..')
    ) {
      return `${shown} is not a repo id: OWNER and NAME are 1-96 letters, digits, '-', '_' or '.', starting and ending with a letter, digit or '_', without '--' or '..'`;
    }
  }
  if (parts[1].endsWith('.git')) return `${shown} is not a repo id: NAME may not end in .git`;
  return null;
}

const isNode = typeof process !== 'undefined' && !!process.versions?.node && typeof window === 'undefined';
const isWorkerd = typeof navigator !== 'undefined' && navigator.userAgent === 'Cloudflare-Workers';
// @huggingface/hub hashes a file of this size or more with node:crypto (Node) or hash-wasm (browsers); workerd has
// neither (its browser build's Node hashing chunk is empty, and workerd compiles no WebAssembly at run time).
const LIBRARY_STREAMING_HASH_SIZE = 10_000_000;

/**
 * A Blob whose bytes are read on demand: `open(start, end)` gives an async iterable of Uint8Array chunks for
 * [start, end). slice() is another ReplayBlob over the same source; stream() opens it afresh each time.
 */
class ReplayBlob extends Blob {
  /** @param {number} size @param {(start: number, end: number) => AsyncIterable<Uint8Array>} open */
  constructor(size, open, start = 0, end = size, counter = null, lock = null) {
    super([]);
    this._open = open;
    /** Shared by the slices of a generated file: its uploads go one at a time, in the order they start. */
    this._lock = lock;
    this._start = start;
    this._end = end;
    this._counter = counter;
  }
  get size() {
    return this._end - this._start;
  }
  get type() {
    return '';
  }
  slice(start = 0, end = this.size) {
    const clamp = (x) => Math.max(0, Math.min(this.size, x < 0 ? this.size + x : x));
    const a = clamp(start);
    const b = Math.max(a, clamp(end));
    return new ReplayBlob(this.size, this._open, this._start + a, this._start + b, this._counter, this._lock);
  }
  /** The same bytes, reporting each chunk read to `counter(n)` (upload progress). */
  counted(counter) {
    return new ReplayBlob(this.size, this._open, this._start, this._end, counter, this._lock);
  }
  stream() {
    let iterator = null;
    const { _start: start, _end: end, _counter: counter } = this;
    return new ReadableStream({
      pull: async (controller) => {
        iterator ??= this._open(start, end)[Symbol.asyncIterator]();
        const { value, done } = await iterator.next();
        if (done) {
          controller.close();
          return;
        }
        if (value.length) {
          counter?.(value.length);
          controller.enqueue(value);
        }
      },
      cancel: async () => {
        await iterator?.return?.();
      },
    });
  }
  async arrayBuffer() {
    const out = new Uint8Array(this.size);
    let at = 0;
    for await (const chunk of this._open(this._start, this._end)) {
      out.set(chunk, at);
      at += chunk.length;
    }
    if (at !== out.length) throw new SafetensorsError('IoError', `expected ${out.length} bytes, read ${at}`);
    return out.buffer;
  }
  async bytes() {
    return new Uint8Array(await this.arrayBuffer());
  }
  async text() {
    return new TextDecoder().decode(await this.arrayBuffer());
  }
}

/** Chunks of an async iterable / ReadableStream as Uint8Array. */
async function* chunksOf(source) {
  if (source && typeof source.getReader === 'function' && !(Symbol.asyncIterator in source)) {
    const reader = source.getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        yield value instanceof Uint8Array ? value : new Uint8Array(value);
      }
    } finally {
      reader.releaseLock?.();
    }
  }
  for await (const value of source) {
    if (typeof value === 'string') yield new TextEncoder().encode(value);
    else
      yield value instanceof Uint8Array
        ? value
        : new Uint8Array(value.buffer ?? value, value.byteOffset ?? 0, value.byteLength);
  }
}

/**
 * [start, end) of a generated file: a fresh run of `make()`, skipped to `start` and stopped at `end`. Reads
 * that continue where the last one stopped (an upload's parts, in order) go on with the same run, so an upload
 * replays the file once.
 */
function generatedOpener(path, size, make) {
  let live = null; // {iterator, position, carry}: the run the last read stopped in
  return async function* open(start, end) {
    let run = live && live.position <= start ? live : null;
    if (live && !run) await live.iterator.return?.();
    live = null;
    if (!run) {
      const produced = await make();
      if (
        produced == null ||
        (typeof produced[Symbol.asyncIterator] !== 'function' && typeof produced.getReader !== 'function')
      ) {
        throw new SafetensorsError(
          'InvalidArgument',
          `files: \`${path}\`: content() must return a ReadableStream or an async iterable`,
        );
      }
      run = { iterator: chunksOf(produced), position: 0, carry: null };
    }
    let finished = false;
    try {
      while (run.position < end) {
        let chunk = run.carry;
        run.carry = null;
        if (!chunk) {
          const next = await run.iterator.next();
          if (next.done)
            throw new SafetensorsError(
              'IoError',
              `files: \`${path}\`: content() gave ${run.position} bytes, not the ${size} promised`,
            );
          chunk = next.value;
        }
        const chunkStart = run.position;
        const chunkEnd = chunkStart + chunk.length;
        if (chunkEnd <= start) {
          run.position = chunkEnd;
          continue;
        }
        const from = Math.max(start, chunkStart) - chunkStart;
        const to = Math.min(end, chunkEnd) - chunkStart;
        if (to < chunk.length) run.carry = chunk.subarray(to);
        run.position = chunkStart + to;
        if (to > from) yield from === 0 && to === chunk.length ? chunk : chunk.subarray(from, to);
      }
      if (end === size && !run.carry) {
        const next = await run.iterator.next();
        if (!next.done && next.value.length)
          throw new SafetensorsError(
            'IoError',
            `files: \`${path}\`: content() gave more than the ${size} bytes promised`,
          );
      }
      finished = true;
    } finally {
      // a read that ended where it was asked to may be continued by the next; any other closes the run
      if (finished && run.position < size) live = run;
      else await run.iterator.return?.();
    }
  };
}

/** A Node file as a ReplayBlob read with positional reads. */
async function fileBlob(path) {
  const files = requireLocalFiles(path);
  const probe = await files.open(path);
  const size = probe.size;
  await probe.close();
  const open = async function* (start, end) {
    const file = await files.open(path);
    try {
      if (file.size !== size) throw new SafetensorsError('IoError', `\`${path}\` changed while being pushed`);
      for (let at = start; at < end;) {
        const piece = await file.read(at, Math.min(PIECE, end - at));
        if (!piece.length) throw new SafetensorsError('IoError', `\`${path}\` ended early while being pushed`);
        at += piece.length;
        yield piece;
      }
    } finally {
      await file.close();
    }
  };
  return new ReplayBlob(size, open);
}

/** One entry of `files` as {path, blob}. */
async function toBlob(entry, index) {
  const path = entry?.path;
  if (
    typeof path !== 'string' ||
    path === '' ||
    path.startsWith('/') ||
    path.split('/').some((p) => p === '' || p === '.' || p === '..')
  ) {
    throw new SafetensorsError(
      'InvalidArgument',
      `files[${index}].path must be a relative path inside the repo, got ${JSON.stringify(path)}`,
    );
  }
  const { content } = entry;
  if (typeof content === 'function') {
    const size = entry.size;
    if (!Number.isSafeInteger(size) || size < 0)
      throw new SafetensorsError(
        'InvalidArgument',
        `files[${index}] (\`${path}\`): a content() function needs its size in bytes`,
      );
    return {
      path,
      blob: new ReplayBlob(size, generatedOpener(path, size, content), 0, size, null, { tail: Promise.resolve() }),
    };
  }
  if (typeof content === 'string' || (typeof URL !== 'undefined' && content instanceof URL))
    return { path, blob: await fileBlob(content) };
  if (typeof Blob !== 'undefined' && content instanceof Blob) return { path, blob: content };
  if (content instanceof Uint8Array || content instanceof ArrayBuffer) return { path, blob: new Blob([content]) };
  throw new SafetensorsError(
    'InvalidArgument',
    `files[${index}] (\`${path}\`): content must be bytes, a Blob, a file path (Node) or a function returning a stream`,
  );
}

const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortReason(signal));
    const timer = setTimeout(done, ms);
    function done() {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }
    function onAbort() {
      clearTimeout(timer);
      reject(abortReason(signal));
    }
    signal?.addEventListener('abort', onAbort, { once: true });
  });

/** A Blob body as something this platform's fetch sends with its Content-Length, read as it goes. */
async function sendable(blob, counter) {
  if (!(blob instanceof ReplayBlob)) {
    if (!counter) return blob;
    if (!isNode) {
      counter(blob.size); // sent whole by the platform's fetch
      return blob;
    }
    // a plain Blob: count it as it is read (Node's fetch reads a Blob-like body through stream())
    const inner = blob;
    blob = new ReplayBlob(inner.size, (start, end) => chunksOf(inner.slice(start, end).stream()));
  }
  if (counter) blob = blob.counted(counter);
  if (isNode) return blob; // undici sends a Blob-like body from its stream(), with Content-Length: size
  if (typeof FixedLengthStream === 'function') {
    // workerd: a stream of a declared length (sent with Content-Length, not chunked)
    // eslint-disable-next-line no-undef
    const { readable, writable } = new FixedLengthStream(blob.size);
    blob
      .stream()
      .pipeTo(writable)
      .catch(() => {});
    return readable;
  }
  // browsers send a stream only over HTTP/2 and chunked; an upload URL wants Content-Length: read this part
  // (or this small file) into memory
  const bytes = new Uint8Array(await blob.arrayBuffer());
  counter?.(bytes.length);
  return bytes;
}

/** The answer's body read whole (answers to API calls and uploads are small), its bytes reported to `progress`;
 * more than `cap` bytes fail. */
async function readAnswer(response, progress, cap, what) {
  if (!response.body) return null;
  const parts = [];
  let size = 0;
  for await (const chunk of chunksOf(response.body)) {
    size += chunk.length;
    if (size > cap)
      throw new SafetensorsError('IoError', `${what}: the answer is larger than ${cap} bytes (PB_HTTP_MAX_JSON_BYTES)`);
    progress(chunk.length);
    parts.push(chunk);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * The fetch the library is given: retries (except the commit call), the deadlines of every request (the core's
 * HttpCallClock over `limits`: the PB_HTTP_* lines), byte progress of uploads, and bodies this platform can send.
 */
function makeFetch({ baseFetch, upload, module, limits, signal, onUpload, log }) {
  return async function pushFetch(url, init = {}) {
    const href = String(url);
    const isCommit =
      (init.method ?? 'GET') === 'POST' && /\/api\/[a-z]+s\/[^/]+\/[^/]+\/commit\//.test(new URL(href).pathname);
    const hint = init.progressHint;
    // a generated file's parts are sent one at a time, in the order the library starts them (taken before any
    // await), so that one replay of the file serves them all
    const lock = init.body instanceof ReplayBlob ? init.body._lock : null;
    let release = null;
    if (lock) {
      const previous = lock.tail;
      lock.tail = new Promise((resolve) => {
        release = resolve;
      });
      await previous;
    }
    try {
      return await attempt(url, init, href, isCommit, hint);
    } finally {
      release?.();
    }
  };

  async function attempt(url, init, href, isCommit, hint) {
    const method = init.method ?? 'GET';
    const clock = new module.HttpCall(`${method} ${href}`, limits, Date.now());
    if (!clock.ok()) {
      const error = errorFromHandle(clock);
      clock.delete();
      throw error;
    }
    try {
      let failures = 0;
      for (;;) {
        throwIfAborted(signal);
        clock.beginAttempt(Date.now());
        // One controller per attempt: the caller's abort, or a deadline of the clock, ends it.
        const controller = new AbortController();
        const onAbort = () => controller.abort(abortReason(signal));
        signal?.addEventListener('abort', onAbort, { once: true });
        let expired = null;
        let timer = null;
        const watch = () => {
          timer = setTimeout(
            () => {
              if (clock.expired(Date.now())) {
                expired = { error: errorFromHandle(clock), total: clock.total() };
                controller.abort(expired.error);
              } else watch(); // progress moved the deadline on
            },
            Math.max(0, clock.deadline() - Date.now()),
          );
        };
        watch();
        const progress = (n) => clock.onProgress(Date.now(), n);
        let sent = 0;
        let response = null;
        let failure = null;
        try {
          let body = init.body;
          if (typeof Blob !== 'undefined' && body instanceof Blob) {
            body = await sendable(body, (n) => {
              progress(n);
              if (hint?.path) {
                sent += n;
                onUpload(hint.path, n);
              }
            });
          }
          const { progressHint, ...rest } = init;
          const request = { ...rest, body, signal: controller.signal };
          if (body && typeof body.getReader === 'function') request.duplex = 'half';
          const put =
            upload &&
            (request.method ?? 'GET') === 'PUT' &&
            typeof Blob !== 'undefined' &&
            request.body instanceof Blob;
          const answer = await (put ? upload(url, request) : baseFetch(url, request));
          clock.onHead(Date.now());
          const bytes = await readAnswer(answer, progress, clock.maxJsonBytes(), `${method} ${href}`);
          const empty = bytes === null || [204, 205, 304].includes(answer.status);
          response = new Response(empty ? null : bytes, {
            status: answer.status,
            statusText: answer.statusText,
            headers: answer.headers,
          });
        } catch (error) {
          if (signal?.aborted) throw abortReason(signal);
          if (expired) failure = expired.error;
          else if (error?.name === 'AbortError') throw error;
          else failure = error;
        } finally {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
        }
        // Whether and when to try again is the core's one retry decision (net/http_retry.h), as for every request.
        if (failure === null && isCommit) return response;
        const final = () => {
          if (failure instanceof SafetensorsError) throw failure;
          const text = failure?.cause?.message ?? failure?.message;
          if (failure) throw new SafetensorsError('IoError', `${method} ${href}: ${text}`, { cause: failure });
          return response;
        };
        if (isCommit || expired?.total) return final();
        const status = failure === null ? response.status : 0;
        const kind = failure === null || expired ? KIND.broken : transportKind(failure);
        const header = (name) => response?.headers.get(name) ?? null;
        const decision = clock.decideRetry(Date.now(), status, kind, header('retry-after'), header('date'), failures);
        if (!decision.retry) {
          // a reason only comes with an answer (a Retry-After longer than allowed): said with its status
          const reason = decision.reason;
          if (reason) throw new SafetensorsError('IoError', `${method} ${href}: HTTP ${response.status} (${reason})`);
          return final();
        }
        const wait = decision.wait;
        failures += 1;
        if (sent) onUpload(hint.path, -sent);
        log?.({ retry: failures, url: href, status: response?.status ?? null, error: failure?.message ?? null, wait });
        await sleep(wait, signal);
      }
    } finally {
      clock.delete();
    }
  }
}

/** The library's HubApiError (or a fetch failure) as our error: `WHAT: <the Hub's message> (HTTP <status>)`, the
 * words the native CLI uses (net::HubErrorText). */
function hubError(error, what) {
  if (error instanceof SafetensorsError || error?.name === 'AbortError') return error;
  const status = error?.statusCode;
  if (!status) {
    const code = error instanceof TypeError && !error.cause ? 'InvalidArgument' : 'IoError';
    return new SafetensorsError(code, `${what}: ${error?.message ?? String(error)}`, { cause: error });
  }
  const data = error.data ?? {};
  const detail =
    (typeof data.error === 'string' && data.error) || (typeof data.message === 'string' && data.message.trim()) || '';
  const code = status === 400 || status === 422 ? 'InvalidArgument' : 'IoError';
  return new SafetensorsError(code, detail ? `${what}: ${detail} (HTTP ${status})` : `${what}: HTTP ${status}`, {
    cause: error,
  });
}

/**
 * Pushes files to a Hub repo in one commit. See index.d.ts (PushOptions) and docs/push.md.
 * @returns {Promise<{commit: string, url: string, pullRequestUrl: string | null, branch: string,
 *   files: Array<{path: string, size: number, lfs: boolean}>}>}
 */
export async function pushToHub(options = {}) {
  const {
    repo,
    files,
    token,
    // HF_ENDPOINT in Node, as every other function and both CLIs read it: a private Hub's token stays there.
    endpoint = defaultEndpoint(),
    commitMessage,
    commitDescription,
    createPr = false,
    branch = 'main',
    createRepo = false,
    private: makePrivate = false,
    onProgress,
    signal,
    retries,
    retryDelay,
    useXet = false,
    fetch: customFetch,
    hub: givenHub,
  } = options;
  const baseFetch = customFetch ?? globalThis.fetch;
  const problem = repoIdProblem(repo);
  if (problem) throw new SafetensorsError('InvalidArgument', problem);
  if (typeof branch !== 'string' || branch === '' || /\s|\.\.|^\/|\/$|\/\//.test(branch)) {
    throw new SafetensorsError('InvalidArgument', `${JSON.stringify(branch)} is not a branch name`);
  }
  if (!Array.isArray(files) || files.length === 0)
    throw new SafetensorsError('InvalidArgument', 'files must be a non-empty array of {path, content}');
  if (!token)
    throw new SafetensorsError(
      'InvalidArgument',
      'pushing needs a token with write access (token, or HF_TOKEN in the CLIs)',
    );
  if (retries !== undefined && (!Number.isSafeInteger(retries) || retries < 0))
    throw new SafetensorsError('InvalidArgument', 'retries must be a whole number ≥ 0');
  // The HTTP policy's limits (retries, backoff, deadlines: docs/remote.md), as every remote read takes them.
  const limitOptions = { http: options.http };
  for (const name of Object.keys(LIMIT_OPTIONS)) if (options[name] !== undefined) limitOptions[name] = options[name];
  const limits = limitsText(limitOptions);
  const module = await getModule();
  {
    const probe = new module.HttpCall('', limits, 0); // a bad limit fails before any request
    const error = probe.ok() ? null : errorFromHandle(probe);
    probe.delete();
    if (error) throw error;
  }
  let hubUrl;
  try {
    const u = new URL(endpoint);
    if (!/^https?:$/.test(u.protocol) || u.username || u.password) throw new Error('not http(s)');
    hubUrl = u.href.replace(/\/+$/, '');
  } catch {
    throw new SafetensorsError('InvalidArgument', `\`${endpoint}\` is not an http(s) endpoint`);
  }
  throwIfAborted(signal);

  const blobs = [];
  const seen = new Set();
  for (const [i, entry] of files.entries()) {
    const item = await toBlob(entry, i);
    if (seen.has(item.path)) throw new SafetensorsError('InvalidArgument', `files: \`${item.path}\` is given twice`);
    seen.add(item.path);
    blobs.push(item);
  }
  const sizes = new Map(blobs.map((b) => [b.path, b.blob.size]));
  if (isWorkerd) {
    const big = blobs.find((b) => b.blob.size >= LIBRARY_STREAMING_HASH_SIZE);
    if (big) {
      throw new SafetensorsError(
        'InvalidArgument',
        `\`${big.path}\` is ${big.blob.size} bytes: in workerd, @huggingface/hub hashes only files under 10 MB (larger ones need node:crypto or run-time WebAssembly); push it from Node or a browser`,
      );
    }
  }
  const uploaded = new Map();
  const report = (event) => {
    try {
      onProgress?.(event);
    } catch {
      // a failing progress callback does not fail the push
    }
  };
  const fetchImpl = makeFetch({
    baseFetch: customFetch ?? baseFetch.bind(globalThis),
    upload: customFetch ? null : uploadTransport,
    module,
    limits,
    signal,
    onUpload: (path, n) => {
      const bytes = (uploaded.get(path) ?? 0) + n;
      uploaded.set(path, bytes);
      report({ phase: 'uploading', path, bytes, total: sizes.get(path) ?? 0 });
    },
    log: (event) => report({ phase: 'retry', ...event }),
  });

  const hub = givenHub ?? (await loadHub());
  if (typeof hub?.commitIter !== 'function')
    throw new SafetensorsError('InvalidArgument', 'the `hub` option must be the @huggingface/hub module');
  const credentials = { accessToken: token, hubUrl, fetch: fetchImpl };
  if (createRepo) {
    try {
      await hub.createRepo({ repo: { type: 'model', name: repo }, private: makePrivate, ...credentials });
      report({ phase: 'createdRepo', repo });
    } catch (error) {
      // huggingface_hub's create_repo(exist_ok=True), the core's rule (app::ClassifyCreateRepoAnswer): a repo that
      // exists is pushed to; a refusal to create (401, 402, 403) is one only if the repo does not exist either.
      const answer = module.createRepoAnswer(error?.statusCode ?? 0);
      const exists =
        answer === 'exists' ||
        (answer === 'ask' &&
          (await hub.repoExists({ repo: { type: 'model', name: repo }, ...credentials }).catch(() => false)));
      if (!exists) throw hubError(error, `creating ${repo}`);
    }
  }
  if (branch !== 'main' && !branch.startsWith('refs/')) {
    try {
      await hub.createBranch({ repo: { type: 'model', name: repo }, branch, ...credentials });
      report({ phase: 'createdBranch', branch });
    } catch (error) {
      if (error?.statusCode !== 409) throw hubError(error, `creating branch ${branch} of ${repo}`);
    }
  }

  const lfs = new Set();
  let result;
  try {
    const iterator = hub.commitIter({
      repo: { type: 'model', name: repo },
      ...credentials,
      title: commitMessage ?? `Upload ${blobs.length === 1 ? blobs[0].path : `${blobs.length} files`} with peft-bridge`,
      description: commitDescription,
      branch,
      isPullRequest: createPr,
      abortSignal: signal,
      useXet,
      operations: blobs.map(({ path, blob }) => ({ operation: 'addOrUpdate', path, content: blob })),
    });
    for (;;) {
      const next = await iterator.next();
      if (next.done) {
        result = next.value;
        break;
      }
      const event = next.value;
      if (event.event === 'phase') report({ phase: event.phase });
      else if (event.state === 'hashing') {
        lfs.add(event.path);
        const total = sizes.get(event.path) ?? 0;
        report({ phase: 'hashing', path: event.path, bytes: Math.round(event.progress * total), total });
      } else if (event.state === 'error') throw new SafetensorsError('IoError', `uploading ${event.path} failed`);
    }
  } catch (error) {
    if (signal?.aborted) throw abortReason(signal);
    throw hubError(
      error,
      `pushing to ${repo}${createPr ? ` (pull request on ${branch})` : branch !== 'main' ? `@${branch}` : ''}`,
    );
  }
  const commit = result?.commit?.oid ?? '';
  report({ phase: 'done', commit });
  return {
    commit,
    url: result?.commit?.url ?? '',
    pullRequestUrl: result?.pullRequestUrl ?? null,
    branch,
    files: blobs.map(({ path, blob }) => ({ path, size: blob.size, lfs: lfs.has(path) })),
  };
}

/** Internal, for tests: the replayable Blob and the generated-content opener. */
export const _internal = { ReplayBlob, generatedOpener };
