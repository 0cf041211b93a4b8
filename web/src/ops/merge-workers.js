// mergeInWorkers(): mergeShards() with the shards merged at once by Web Workers, one module instance each (the
// page compiles the .wasm once and sends the compiled module). The page plans the merge first, so a mismatch
// rejects before any worker starts; then each worker plans it again from the same inputs and merges the shards
// it is handed, one at a time, sending each output chunk when the shard's stream asks for it (transferred, not
// copied). Plain message passing, so it works whether or not the page is cross-origin isolated.
import { SafetensorsError, abortReason, errorFromMessage, throwIfAborted } from '../errors.js';
import { compiledModule, getModule } from '../init.js';
import { INDEX_NAME, adapterFiles, closeShards, copiedFile, planShards } from './merge.js';
import { raceAbort } from '../io/sources.js';

// Output chunks a shard's stream holds ahead of its reader: the worker merges the next while one is written.
const CHUNKS_AHEAD = 2;

const MERGE_OPTIONS = [
  'dtype',
  'safe',
  'unmerge',
  'allowPartial',
  'arch',
  'namingTables',
  'quantize',
  'scheme',
  'groupSize',
];

/** True for what can be sent to a worker as a shard or adapter source: Blob / File (by reference) or bytes. */
function sendable(source) {
  return (
    (typeof Blob !== 'undefined' && source instanceof Blob) ||
    source instanceof ArrayBuffer ||
    ArrayBuffer.isView(source)
  );
}

function requireSendable(source, what) {
  if (!sendable(source)) {
    throw new TypeError(
      `peft-bridge: mergeInWorkers needs ${what} as a Blob, File, ArrayBuffer or typed array (streams and {read} objects cannot be sent to a worker)`,
    );
  }
  return source;
}

function defaultWorker() {
  if (typeof Worker !== 'function')
    throw new TypeError('peft-bridge: mergeInWorkers needs Web Workers (or a createWorker option)');
  return new Worker(new URL('./merge-worker.js', import.meta.url), { type: 'module' });
}

function defaultCount() {
  return (typeof navigator === 'object' && navigator?.hardwareConcurrency) || 2;
}

/**
 * One worker and the reply it owes: `ask(message)` posts and resolves with the worker's next chunk / end message
 * for that shard (it answers one request at a time, in order).
 */
class MergeWorker {
  constructor(worker, onFailure) {
    this.worker = worker;
    this.waiting = null; // {i, resolve, reject} of the request in flight
    worker.onmessage = ({ data }) => {
      if (data.type === 'error') {
        onFailure(errorFromMessage(data.error));
        return;
      }
      // A reply for a shard no longer waiting (its stream was cancelled while a chunk was being merged) is dropped.
      if (this.waiting?.i !== data.i) return;
      const { resolve } = this.waiting;
      this.waiting = null;
      resolve(data);
    };
    worker.onerror = (event) => {
      event?.preventDefault?.();
      onFailure(new SafetensorsError('IoError', `merge worker failed: ${event?.message ?? 'it could not start'}`));
    };
  }

  post(message, transfer) {
    this.worker.postMessage(message, transfer ?? []);
  }

  ask(message) {
    return new Promise((resolve, reject) => {
      this.waiting = { i: message.i, resolve, reject };
      this.post(message);
    });
  }

  fail(error) {
    this.waiting?.reject(error);
    this.waiting = null;
    this.worker.terminate();
  }
}

/**
 * Merges a LoRA adapter into a whole model as {@link mergeShards} does, the shards merged at once by Web Workers.
 * Resolves, once the page has planned the merge (a mismatch rejects here, before any worker starts), to every
 * output file at once - each shard, then `model.safetensors.index.json` and `config.json` as mergeShards yields
 * them, the same bytes - whose streams may be read in any order and concurrently (e.g. `saveStreams(files, …)`,
 * which writes an array's files at once): a worker merges a shard while its stream is read, at most two chunks
 * ahead of the reader. Read every stream to its end or cancel it; a failure errors every stream not yet ended,
 * an abort too, and both stop the workers.
 *
 * Every shard `base.open(name)` gives and the adapter's weights must be sendable to a worker: a Blob or File
 * (sent by reference: each worker reads its ranges) or bytes (copied into every worker). The `.wasm` is compiled
 * once, here, and sent to the workers.
 *
 * Options: those of mergeShards, plus `workers` (how many; default `navigator.hardwareConcurrency`, at most one
 * per shard) and `createWorker()` (returns a started module Worker running `merge-worker.js`; default
 * `new Worker(new URL('./merge-worker.js', import.meta.url), {type: 'module'})`, the form bundlers follow).
 * @returns {Promise<{path: string, size: number, stream: ReadableStream<Uint8Array>}[]>}
 */
export async function mergeInWorkers(options) {
  if (!options || typeof options !== 'object') throw new TypeError('peft-bridge: mergeInWorkers needs {base, adapter}');
  const { signal, onProgress } = options;
  throwIfAborted(signal);
  const { base } = options;
  if (!base || typeof base !== 'object' || typeof base.open !== 'function') {
    throw new TypeError('peft-bridge: mergeInWorkers needs base: {open(name), index?, config?}');
  }
  const adapter = await adapterFiles(options.adapter, base.config, signal);
  requireSendable(adapter.weights, 'the adapter weights');
  const sources = {};
  const open = async (name) =>
    (sources[name] ??= requireSendable(await raceAbort(Promise.resolve(base.open(name)), signal), `shard ${name}`));
  const { session, plan, random, index, copied } = await planShards(
    { ...options, base: { index: base.index, config: base.config, files: base.files, open } },
    signal,
  );
  let texts;
  try {
    texts = [];
    if (index !== null) texts.push([INDEX_NAME, session.outputIndex()]);
    const config = session.configJson();
    if (config !== null) texts.push(['config.json', config]);
  } finally {
    session.close();
    await closeShards(random);
  }
  await getModule();
  // The base's other files (tokenizer...), opened before any worker starts and copied here: no worker needs them.
  const copies = [];
  try {
    for (const name of copied) {
      const { path, size, stream } = await copiedFile(base, name, signal);
      copies.push({ path, size, stream });
    }
  } catch (error) {
    await Promise.all(copies.map((c) => c.stream.cancel(error).catch(() => {})));
    throw error;
  }
  const job = {
    sources,
    index: index,
    config: adapter.baseConfig,
    adapter: { weights: adapter.weights, weightsName: adapter.weightsName, config: adapter.config },
    options: Object.fromEntries(MERGE_OPTIONS.filter((k) => options[k] !== undefined).map((k) => [k, options[k]])),
  };
  const pool = new WorkerPool(
    Math.max(1, Math.min(Math.floor(options.workers ?? defaultCount()), plan.shards.length)),
    options.createWorker ?? defaultWorker,
    job,
    signal,
  );
  const progress = { bytesIn: 0, bytesOut: 0, totalIn: plan.sourceBytes };
  const report = onProgress && (() => onProgress({ ...progress }));
  const files = plan.shards.map((shard, i) => ({
    path: shard.name,
    size: shard.outputSize,
    stream: pool.shardStream(i, progress, report),
  }));
  for (const [path, text] of texts) {
    const bytes = new TextEncoder().encode(text);
    files.push({ path, size: bytes.length, stream: new Blob([bytes]).stream() });
  }
  files.push(...copies);
  return files;
}

/** The workers and the shards waiting for one; the first failure (or an abort) fails every stream and stops all. */
class WorkerPool {
  constructor(count, createWorker, job, signal) {
    this.idle = [];
    this.waiting = []; // resolvers of shards waiting for a worker, in order
    this.streams = new Set(); // {fail(error)} of every stream not yet ended
    this.failure = null;
    this.workers = [];
    this.signal = signal;
    this.onAbort = () => this.fail(abortReason(signal));
    signal?.addEventListener('abort', this.onAbort, { once: true });
    const wasmModule = compiledModule();
    try {
      for (let k = 0; k < count; ++k) {
        const worker = new MergeWorker(createWorker(), (error) => this.fail(error));
        this.workers.push(worker);
        this.idle.push(worker);
        worker.post({ type: 'init', wasmModule, job });
      }
    } catch (error) {
      this.fail(error); // a worker that could not be made or sent the job: the others stop too
      throw error;
    }
  }

  /** A worker for the next shard, once one is free. */
  acquire() {
    if (this.failure) return Promise.reject(this.failure);
    if (this.idle.length) return Promise.resolve(this.idle.shift());
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  release(worker) {
    if (this.failure) return;
    const next = this.waiting.shift();
    if (next) next.resolve(worker);
    else this.idle.push(worker);
    if (this.streams.size === 0) this.stop();
  }

  fail(error) {
    if (this.failure) return;
    this.failure = error;
    for (const s of this.streams) s.fail(error);
    this.streams.clear();
    for (const w of this.waiting) w.reject(error);
    this.waiting = [];
    for (const w of this.workers) w.fail(error);
    this.signal?.removeEventListener('abort', this.onAbort);
  }

  /** Every stream ended: the workers are let go. */
  stop() {
    for (const w of this.workers) w.worker.terminate();
    this.workers = [];
    this.idle = [];
    this.signal?.removeEventListener('abort', this.onAbort);
  }

  /** Shard `i`'s merged bytes as a pull stream, merged by the first worker free when it is first pulled. */
  shardStream(i, progress, report) {
    let worker = null;
    let controller;
    let ended = false;
    let bytesIn = 0; // of this shard, as its worker last reported
    const entry = {
      fail: (error) => {
        ended = true;
        try {
          controller.error(error);
        } catch {
          // already closed or errored
        }
      },
    };
    this.streams.add(entry);
    const end = () => {
      ended = true;
      this.streams.delete(entry);
      if (worker) this.release(worker);
      else if (this.streams.size === 0) this.stop();
    };
    return new ReadableStream(
      {
        start: (c) => {
          controller = c;
        },
        pull: async () => {
          try {
            if (!worker) {
              worker = await this.acquire();
              if (ended) return this.release(worker); // cancelled while waiting for a worker
              worker.post({ type: 'merge', i });
            }
            const reply = await worker.ask({ type: 'pull', i });
            if (ended) return;
            progress.bytesIn += reply.bytesIn - bytesIn;
            bytesIn = reply.bytesIn;
            if (reply.type === 'end') {
              end();
              controller.close();
            } else {
              progress.bytesOut += reply.bytes.length;
              controller.enqueue(reply.bytes);
            }
            report?.();
          } catch (error) {
            if (!ended) this.fail(error);
          }
        },
        cancel: () => {
          if (ended) return;
          if (worker) worker.post({ type: 'cancel', i });
          end();
        },
      },
      { highWaterMark: CHUNKS_AHEAD },
    );
  }
}
