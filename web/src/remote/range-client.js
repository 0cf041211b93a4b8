// The `fetch` transport of the HTTP policy. Every rule (what to request, what an answer means, which failures are
// retried and when, deadlines, redirects, the token's scope, the JSON cap) lives once in C++ (src/net/
// http_policy.h) and runs here through the WASM module, as it runs natively behind libcurl: this file only sends
// what the policy says, reports what came back, and keeps time.
//
// Redirects: requests go out with redirect: 'manual' and the policy follows each hop (so it counts them, refuses
// non-HTTP(S) targets, and sends the token to the endpoint's origin only), as the native CLI does. Node (undici)
// and workerd hand back the 3xx answer itself. A browser hands back an opaque redirect instead (no status, no
// Location); the transport then resends that request with redirect: 'follow' and reports where it landed
// (response.url), which the policy checks. In that mode the browser follows up to its own limit (20), and the
// Fetch standard has it drop the Authorization header on a redirect to another origin, so the token still never
// leaves the endpoint's origin.
//
// Deadlines: the policy gives one per step (idle, minimum rate, the read's total); the transport races each
// pending fetch / body read against a timer and reports OnTimer when it fires first. The caller's AbortSignal
// ends everything at once.
import { SafetensorsError, abortReason, errorFromHandle, throwIfAborted } from '../errors.js';
import { concat } from '../handles.js';
import { ModuleDiscarded } from '../module-guard.js';

/** The retry decision's TransportError kinds (net/http_retry.h). */
export const KIND = { resolve: 0, connect: 1, broken: 2, tls: 3 };

/** The JS option names of the policy's limits: option → the PB_HTTP_* name the C++ side parses. */
export const LIMIT_OPTIONS = {
  retries: 'PB_HTTP_RETRIES',
  retryDelay: 'PB_HTTP_BACKOFF_MS',
  idleTimeout: 'PB_HTTP_IDLE_MS',
  timeout: 'PB_HTTP_TOTAL_MS',
  minRate: 'PB_HTTP_MIN_RATE',
  rateWindow: 'PB_HTTP_RATE_WINDOW_MS',
  maxRedirects: 'PB_HTTP_MAX_REDIRECTS',
  maxJsonBytes: 'PB_HTTP_MAX_JSON_BYTES',
  maxAdapterBytes: 'PB_HTTP_MAX_ADAPTER_BYTES',
};

/** readWhole's cap for an adapter's weights: the policy's PB_HTTP_MAX_ADAPTER_BYTES. */
export const ADAPTER_CAP = 'adapter';

/** "NAME=value" lines for the policy, from the options (`options.http` takes PB_HTTP_* names as they are). */
export function limitsText(options) {
  const lines = [];
  for (const [name, value] of Object.entries(options.http ?? {}))
    if (value !== undefined && value !== '') lines.push(`${name}=${value}`);
  for (const [option, name] of Object.entries(LIMIT_OPTIONS))
    if (options[option] !== undefined) lines.push(`${name}=${options[option]}`);
  return lines.join('\n');
}

const now = () => Date.now();

/** Why a fetch or a body read was rejected, as the policy's kind (undici puts the system error in `cause`). */
export function transportKind(error) {
  const code = String(error?.cause?.code ?? error?.code ?? '');
  if (/^(ENOTFOUND|EAI_AGAIN|EAI_NONAME|EAI_FAIL)$/.test(code)) return KIND.resolve;
  if (/^(ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|EADDRNOTAVAIL|ETIMEDOUT|UND_ERR_CONNECT_TIMEOUT)$/.test(code))
    return KIND.connect;
  if (/CERT|TLS|SSL|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_SSL/.test(code)) return KIND.tls;
  return KIND.broken;
}

/** Settles with {value}, {error}, {timeout} (after `ms`) or {aborted}, whichever comes first. */
function settle(promise, ms, signal) {
  return new Promise((resolve) => {
    let settled = false;
    const done = (r) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve(r);
    };
    const onAbort = () => done({ aborted: true });
    const timer = setTimeout(() => done({ timeout: true }), Math.max(0, ms));
    signal?.addEventListener('abort', onAbort, { once: true });
    if (signal?.aborted) onAbort();
    promise.then(
      (value) => done({ value }),
      (error) => done({ error }),
    );
  });
}

function sleep(ms, signal) {
  return settle(new Promise(() => {}), ms, signal).then((r) => {
    if (r.aborted) throw abortReason(signal);
  });
}

/** The headers the policy reads, as "name\nvalue\n" pairs. */
function headText(headers) {
  let text = '';
  for (const name of [
    'content-range',
    'content-length',
    'content-encoding',
    'etag',
    'retry-after',
    'date',
    'x-error-message',
    'location',
    'x-repo-commit',
  ]) {
    const v = headers.get(name);
    if (v !== null) text += `${name}\n${v}\n`;
  }
  return text;
}

/**
 * One remote file read through the policy. `read(start, end)` and `readWhole(cap)` run one at a time (the caller
 * queues them); a body left open by one read serves the next when it continues it.
 */
export class RangeClient {
  /**
   * @param {any} module the WASM module
   * @param {{url: string, label: string, token?: string | null, tokenOrigin: string}} target
   * @param {object} options signal, fetch and the limits of LIMIT_OPTIONS
   */
  constructor(module, target, options = {}, policy = null) {
    this.policy =
      policy ??
      new module.HttpFile(target.url, target.label, target.token ?? '', target.tokenOrigin ?? '', limitsText(options));
    if (!this.policy.ok()) {
      const error = errorFromHandle(this.policy);
      this.policy.delete();
      throw error;
    }
    this.module = module;
    this.target = target;
    this.options = options;
    this.signal = options.signal;
    this.fetch = options.fetch ?? ((url, init) => globalThis.fetch(url, init));
    this.follow = false; // set once the runtime answers a manual redirect with an opaque one (browsers)
    this.controller = null;
    this.request = null; // the request in flight: {url, init}
    this.headPromise = null;
    this.reader = null;
    this.chunkPromise = null;
    this.pending = null; // bytes of the last chunk past what the last read wanted
  }

  /** Bytes [start, end) of the file (fewer only at its end); `end` may be Infinity. */
  async read(start, end) {
    this.policy.beginRead(start, Number.isFinite(end) ? end : -1, now());
    const parts = [];
    await this.run(parts);
    return concat(parts) ?? new Uint8Array(0);
  }

  /** The whole file, at most `cap` bytes (default: the policy's JSON cap, PB_HTTP_MAX_JSON_BYTES; ADAPTER_CAP:
   * its adapter cap, PB_HTTP_MAX_ADAPTER_BYTES). */
  async readWhole(cap) {
    if (cap === ADAPTER_CAP) this.policy.beginReadWholeAdapter(now());
    else this.policy.beginReadWhole(now(), cap ?? -1);
    const parts = [];
    await this.run(parts);
    return concat(parts) ?? new Uint8Array(0);
  }

  /** True once the policy allows reads of other ranges on this file's other clients (sibling()). */
  get parallel() {
    return this.policy.parallelReads();
  }

  /**
   * Another client of the same file, for a read at the same time as this one's: its own request and body, the
   * file's pinned ETag and size and where its redirects landed shared with this client (the policy's Reader), so
   * it starts at the CDN URL and is held to the same ETag.
   */
  sibling() {
    const client = new RangeClient(this.module, this.target, this.options, this.policy.reader());
    client.follow = this.follow;
    return client;
  }

  get size() {
    const s = this.policy.size();
    return s < 0 ? null : s;
  }

  async run(parts) {
    const p = this.policy;
    for (;;) {
      throwIfAborted(this.signal);
      const step = p.next(now());
      if (step.action === 'done') return;
      if (step.action === 'read') {
        await this.advance(step.deadline, parts);
        continue;
      }
      await this.drop();
      if (step.action === 'fail') {
        const error = errorFromHandle(p);
        if (step.status) error.status = step.status;
        throw error;
      }
      if (step.action === 'wait') await sleep(step.deadline - now(), this.signal);
      else this.send(step);
    }
  }

  send(step) {
    const headers = { Range: step.range };
    if (step.authorization) headers.Authorization = step.authorization;
    this.controller = new AbortController();
    this.request = {
      url: step.url,
      init: { headers, redirect: this.follow ? 'follow' : 'manual', signal: this.controller.signal },
    };
    this.startFetch();
  }

  startFetch() {
    const { url, init } = this.request;
    this.headPromise = Promise.resolve().then(() => this.fetch(url, init));
    this.headPromise.catch(() => {});
  }

  /** Waits for the next event of the request in flight (its head, or the next chunk of its body) and reports it. */
  async advance(deadline, parts) {
    const p = this.policy;
    if (this.reader && this.pending) {
      const chunk = this.pending;
      this.pending = null;
      return this.deliver(chunk, parts);
    }
    if (!this.reader && !this.headPromise) {
      p.onClosed(); // the policy counts on a body this transport no longer has
      return;
    }
    const promise = this.reader ? (this.chunkPromise ??= this.reader.read()) : this.headPromise;
    if (this.reader) promise.catch(() => {});
    const r = await settle(promise, deadline - now(), this.signal);
    if (r.aborted) {
      await this.drop();
      throw abortReason(this.signal);
    }
    if (r.timeout) {
      p.onTimer(now());
      if (!p.inFlight()) await this.drop();
      return;
    }
    if (this.reader) this.chunkPromise = null;
    else this.headPromise = null;
    if (r.error) {
      await this.drop();
      if (this.signal?.aborted) throw abortReason(this.signal);
      p.onTransportError(now(), transportKind(r.error));
      return;
    }
    if (!this.reader) return this.onResponse(r.value);
    const { done, value } = r.value;
    if (done) {
      this.reader = null;
      p.onBodyEnd(now());
      return;
    }
    this.deliver(value, parts);
  }

  async onResponse(response) {
    const p = this.policy;
    if (response.type === 'opaqueredirect') {
      // A browser: it will not show a redirect. Let it follow them and check where it lands.
      this.follow = true;
      this.request.init = { ...this.request.init, redirect: 'follow' };
      this.startFetch();
      return;
    }
    p.onHead(now(), response.status, headText(response.headers), this.follow ? (response.url ?? '') : '');
    if (p.inFlight() && response.body) {
      this.reader = response.body.getReader();
      return;
    }
    await response.body?.cancel().catch(() => {});
    if (p.inFlight()) p.onBodyEnd(now()); // a 200 / 206 without a body
  }

  deliver(chunk, parts) {
    const p = this.policy;
    const take = p.onBody(now(), chunk.length);
    const skip = p.skip();
    if (take > 0) parts.push(chunk.subarray(skip, skip + take));
    if (skip + take < chunk.length) this.pending = chunk.subarray(skip + take); // for a read that continues this body
  }

  /** Ends the request in flight and its body, if any. */
  async drop() {
    const reader = this.reader;
    this.reader = null;
    this.pending = null;
    this.chunkPromise = null;
    this.headPromise = null;
    const controller = this.controller;
    this.controller = null;
    if (reader) await reader.cancel().catch(() => {});
    controller?.abort();
  }

  async close() {
    await this.drop();
    try {
      this.policy.onClosed();
    } catch (error) {
      // The policy's instance was discarded after a trap (module-guard.js): there is nothing left to tell.
      if (!(error instanceof ModuleDiscarded)) throw error;
    }
    this.policy.delete();
    this.policy = null;
  }
}

/**
 * How many ranges of one remote file are read at the same time (one client each, the first one's redirect and
 * ETag shared by the others). Chosen by measurement, with the memory and connections it takes (docs/
 * benchmarks.md, "Remote: later ranges at the CDN URL, several in flight").
 */
export const DEFAULT_READERS = 4;

/**
 * A file read over HTTP by ranges. Use openRemote (hub.js). Reads are served from what the first request fetched
 * when they can. The first read runs alone; once its answer pinned the ETag and size and showed that the server
 * honours Range (the policy's parallelReads()), up to `readers` reads run at once, each on a client of its own
 * (the policy's Reader: straight to the CDN URL, held to the same ETag); further reads wait their turn, in order.
 * A read that continues an open body (a server that ignores Range, read as one stream) reuses it.
 */
export class RemoteFile {
  /**
   * @param {RangeClient} client
   * @param {{url: string, label: string, token?: string | null}} target
   * @param {{readers?: number, signal?: AbortSignal, follow?: AbortController}} [options] `follow`: the controller
   *   of the clients' signal, aborted when `signal` aborts while reads are running or asked for
   */
  constructor(client, target, options = {}) {
    this.signal = options.signal ?? null;
    this.follow = options.follow ?? null;
    this.onAbort = () => this.follow.abort(abortReason(this.signal));
    this.client = client; // the first client: it makes the first request
    this.clients = [client];
    this.idle = [client]; // clients with no read running
    this.waiting = []; // reads waiting for a client: resolve functions, in order
    this.running = new Set(); // the reads asked for and not settled (their promises), waiting ones included
    this.active = 0; // reads that have a client
    this.readers = Math.max(1, Math.floor(options.readers ?? DEFAULT_READERS));
    this.url = target.url;
    this.label = target.label;
    this.token = target.token ?? null;
    /** Total size, once an answer told it (null while unknown: a 200 without Content-Length). */
    this.size = null;
    /** The first answer's ETag: every later answer must carry the same. */
    this.etag = null;
    /** X-Repo-Commit of the first answer that named one (the Hub does on its resolve answers). */
    this.commit = null;
    /** HTTP requests made so far, by all the file's clients (each redirect hop counts). */
    this.requests = 0;
    /** The most reads that ran at the same time. */
    this.maxInFlight = 0;
    this.head = new Uint8Array(0); // the file's first bytes, as far as fetched for the header
    this.closed = false;
  }

  /** A client for one read: an idle one, a new reader when the policy allows one more, else the next one freed. */
  acquire() {
    if (this.idle.length > 0) return Promise.resolve(this.idle.pop());
    if (this.clients.length < this.readers && this.client.policy && this.client.parallel) {
      const client = this.client.sibling();
      this.clients.push(client);
      return Promise.resolve(client);
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  release(client) {
    const next = this.waiting.shift();
    if (next) next(client);
    else this.idle.push(client);
  }

  /** Runs `fn(client)` on a client of its own, then copies what the policy learnt. Internal. */
  run(fn) {
    const run = (async () => {
      if (this.closed) throw this.closedError();
      const client = await this.acquire();
      this.maxInFlight = Math.max(this.maxInFlight, ++this.active);
      try {
        if (this.closed) throw this.closedError();
        return await fn(client);
      } finally {
        const p = client.policy;
        if (p) {
          this.size = client.size;
          this.etag = p.etag() || null;
          this.commit = p.commit() || null;
          this.requests = p.requests();
        }
        --this.active;
        this.release(client);
      }
    })();
    const tracked = run.catch(() => {});
    if (this.running.size === 0) this.watch(true);
    this.running.add(tracked);
    tracked.then(() => {
      this.running.delete(tracked);
      if (this.running.size === 0) this.watch(false);
    });
    return run;
  }

  /** Follows the caller's signal (`on`), or stops following it. */
  watch(on) {
    if (!this.follow || !this.signal || this.follow.signal.aborted) return;
    if (!on) return this.signal.removeEventListener('abort', this.onAbort);
    if (this.signal.aborted) this.onAbort();
    else this.signal.addEventListener('abort', this.onAbort, { once: true });
  }

  closedError() {
    return new SafetensorsError('IoError', `cannot read \`${this.label}\`: the file was closed`);
  }

  /** `length` bytes at `offset`: fewer only at the end of the file. */
  read(offset, length) {
    return this.run(async (client) => {
      const end = offset + length;
      if (end <= this.head.length) return this.head.slice(offset, end);
      const cached = offset < this.head.length ? this.head.slice(offset) : null;
      const rest = await client.read(cached ? this.head.length : offset, end);
      return cached ? concat([cached, rest]) : rest;
    });
  }

  /** The whole file, at most `cap` bytes (default: the JSON cap). Internal. */
  readWhole(cap) {
    return this.run((client) => client.readWhole(cap));
  }

  /** The first bytes up to `end`. Internal. */
  fetchFirst(end) {
    return this.run(async (client) => {
      this.head = await client.read(0, end);
    });
  }

  /** The first bytes, through the end of the header: at most one more request after the first. Internal. */
  fetchHeader(maxHeaderSize) {
    return this.run(async (client) => {
      const head = this.head;
      if (head.length < 8) return;
      const n = new DataView(head.buffer, head.byteOffset, 8).getBigUint64(0, true);
      // A length the core will refuse (too large, or past the end of the file) is not fetched: the core reports it.
      if (n > BigInt(maxHeaderSize)) return;
      const need = 8 + Number(n);
      const size = client.size;
      if (need <= head.length || (size !== null && need > size)) return;
      this.head = concat([head, await client.read(head.length, need)]);
    });
  }

  /** What inspect() reads the header from: a {size, read} source, or the header bytes when the size is unknown. */
  headerSource() {
    if (this.size === null) return [this.head];
    return { size: this.size, read: (offset, length) => this.read(offset, length) };
  }

  /** Waits for the reads running, then cancels any open response body and frees the policies. */
  async close() {
    while (this.running.size > 0) await Promise.all([...this.running]);
    if (this.closed) return;
    this.closed = true;
    const clients = this.clients;
    this.clients = [];
    this.idle = [];
    await Promise.all(clients.map((c) => c.close()));
  }
}
