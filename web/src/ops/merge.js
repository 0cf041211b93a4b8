// LoRA merge: createMergeStream() (one safetensors file as a TransformStream) and mergeShards() (a whole,
// possibly sharded model as a sequence of output files). The core plans and merges (wasm/merge_bindings.cc);
// this file reads headers and ranges, moves bytes through the handle and owns the handles' lifetime.
//
// Memory stays flat whatever the model's or the adapter's size: base bytes go through the handle's window a
// piece at a time and leave as output chunks right away, pulled by the consumer (streams apply backpressure);
// the adapter is read by range (adapter-source.js): its header first, then each module's factors when the
// merge reaches the tensor they change.
import { namingTablesOption } from './naming-tables.js';
import { SafetensorsError, abortReason, errorFromHandle, errorFromValue, throwIfAborted } from '../errors.js';
import { configText, readAdapterHeader, serveRanges } from './adapter.js';
import { openAdapterSource } from './adapter-source.js';
import { NativeHandle, concat } from '../handles.js';
import { getModule } from '../init.js';
import {
  DEFAULT_READ_SIZE,
  chunkBytes,
  closeRandomAccess,
  isRandomAccess,
  openSource,
  raceAbort,
} from '../io/sources.js';

// The merge handles' methods for reading the adapter by range.
const MERGE_ADAPTER = {
  length: 'adapterHeaderLength',
  header: 'setAdapterHeader',
  ranges: 'adapterInlineRanges',
  needs: 'adapterNeeds',
  supply: 'supplyAdapter',
};
export const INDEX_NAME = 'model.safetensors.index.json';

// Open merge handles, so tests can check that completion, errors and aborts free them. Internal.
const live = new Set();
/** How many merge handles are open. Internal (tests). */
export function openMergeHandles() {
  return live.size;
}

function optionsJson(options) {
  return JSON.stringify({
    dtype: options.dtype ?? null, // any spelling of the CLIs' vocabulary, checked by the core
    safe: !!options.safe,
    unmerge: !!options.unmerge,
    // No silent loss: adapter tensors the merge cannot apply are refused unless allowPartial (--allow-partial).
    allowPartial: !!options.allowPartial,
    arch: options.arch ?? null,
    namingTables: namingTablesOption(options.namingTables),
    // `--quantize` (checked by the core, as the CLI's words: merge/quantize_plan.h)
    quantize: options.quantize ?? null,
    scheme: options.scheme ?? null,
    groupSize: options.groupSize ?? null,
  });
}

/**
 * `base.files` as the core's PlanExtraFiles takes a directory listing: [{name, kind}] (a plain name is a file);
 * null when the base gives no listing (then it is not a directory, and nothing beside the weights is copied, as
 * for the CLI's `--base FILE`).
 */
function baseListing(files) {
  if (files === undefined || files === null) return null;
  if (!Array.isArray(files))
    throw new TypeError('peft-bridge: base.files must be an array of file names (or {name, kind})');
  return files.map((f) => {
    if (typeof f === 'string') return { name: f, kind: 'file' };
    if (f && typeof f === 'object' && typeof f.name === 'string')
      return { name: f.name, kind: f.kind === 'directory' || f.kind === 'other' ? f.kind : 'file' };
    throw new TypeError('peft-bridge: base.files must be an array of file names (or {name, kind})');
  });
}

/** Copies `bytes` whole into the handle's window and calls `method(n, ...args)`; returns its result. */
function callWithBytes(handle, method, bytes, ...args) {
  handle.fillWindow(bytes);
  return handle.handle[method](bytes.length, ...args);
}

/**
 * One core handle that reads models by their headers (the index, then each shard's header): a merge's, create's and
 * extract's (Merger, StreamMerger, AdapterCreator, ExtractJob). Every failing step throws the core's error (with its
 * renderings, for the CLI). Internal.
 */
export class ModelReadingSession {
  constructor(module, kind, json) {
    this.module = module;
    this.handle = new NativeHandle(module, new module[kind](json));
    live.add(this.handle);
    if (!this.handle.handle.ok()) {
      const error = errorFromHandle(this.handle.handle);
      this.close();
      throw error;
    }
  }

  check(ok) {
    if (!ok) throw errorFromHandle(this.handle.handle);
  }

  /** The base's index (text or bytes); returns the shard names it lists, sorted. */
  setIndex(text) {
    this.check(this.handle.handle.setIndex(text));
    return JSON.parse(this.handle.handle.indexShards());
  }

  /** Reads shard `name`'s header (8-byte prefix, then the JSON) from an opened source and hands it to the core. */
  async addShard(name, src, signal) {
    const size = src.size ?? -1;
    const head = prefixReader(src, signal);
    const prefix = await head.read(8);
    const length = callWithBytes(this.handle, 'headerLength', prefix, name, size);
    if (length < 0) this.check(false);
    const rest = await head.read(length);
    const bytes = new Uint8Array(8 + rest.length);
    bytes.set(prefix);
    bytes.set(rest, 8);
    this.check(callWithBytes(this.handle, 'addShard', bytes, name, size));
  }

  /** After the last shard: checks the index against the headers. */
  baseComplete() {
    this.check(this.handle.handle.baseComplete());
  }

  close() {
    live.delete(this.handle);
    this.handle.close();
  }
}

/** One merge handle (Merger or StreamMerger) with the steps the API and the npm CLI share. Internal. */
export class MergeSession extends ModelReadingSession {
  /** @param {'Merger' | 'StreamMerger'} kind */
  static async create(kind, options = {}) {
    const json = optionsJson(options);
    const module = await getModule();
    return new MergeSession(module, kind, json);
  }

  /**
   * Reads the adapter from its header (and the few tiny tensors readers inspect); its other tensors are read
   * while merging, as the core asks for them.
   * @param {{weights: any, weightsName: string, config: any, baseConfig: any}} files  weights: any source
   */
  async loadAdapter(files, signal) {
    const src = await openAdapterSource(files.weights, signal);
    this.adapterSource = src;
    const inline = await readAdapterHeader(this.handle, src, files.weightsName, MERGE_ADAPTER, signal);
    this.check(
      callWithBytes(
        this.handle,
        'loadAdapterRanges',
        inline,
        files.weightsName,
        files.config ?? null,
        files.baseConfig ?? null,
      ),
    );
  }

  /**
   * Supplies the adapter ranges the core asks for (a module's factors, before the tensor they change) until it
   * asks for nothing; yields the output this lets the merge produce.
   */
  async *serveAdapter(signal) {
    const out = [];
    await serveRanges(this.handle, this.adapterSource, MERGE_ADAPTER, signal, (bytes) => out.push(bytes));
    yield* out;
  }

  /** Plans the merge: {sourceBytes, shards: [{name, outputSize, sourceBytes, runs: [[begin, end, forward]...]}]}. */
  plan() {
    this.check(this.handle.handle.plan());
    return JSON.parse(this.handle.handle.planJson());
  }

  outputIndex() {
    return this.handle.handle.outputIndex();
  }

  /** The npm CLI's default --threads for this plan on `cores` cores (merge::DefaultWorkerThreads). */
  defaultThreads(cores) {
    return this.handle.handle.defaultThreads(cores);
  }

  /** --quantize: shard `i`'s quantization errors (JSON), for the session that reports the merge. */
  quantErrorsJson(i) {
    return this.handle.handle.quantErrorsJson(i);
  }

  /** --quantize: shard `i`'s quantization errors as another session's quantErrorsJson(i) gave them. */
  setQuantErrors(i, json) {
    this.check(this.handle.handle.setQuantErrors(i, json));
  }

  configJson() {
    return this.handle.handle.configJson();
  }

  /**
   * The merged bytes of shard `i` of the plan, as output chunks: the output header, then the plan's source runs
   * read a piece at a time from `src` (an opened source of the whole shard file) - the tensors the merge
   * changes pushed through the handle, the ones it copies unchanged passed straight from input to output (they
   * never enter the WASM heap) - then what the shard adds at its end. `counts.bytesIn` grows with the source
   * bytes consumed.
   *
   * `reuse`: a chunk that is a view of the heap (its `buffer` is the module's memory) is valid only until the next
   * chunk is asked for - or, if the consumer calls `this.handle.flipOutput()` once it has the view (one at most
   * per call into the module), until it flips again - any other (a read buffer) until
   * `keep` more have been asked for; reusing that memory saves an allocation and a copy per piece. For a consumer
   * that writes each chunk out in time (the npm CLI).
   *
   * `forward(offset, length)` with `buffers`: the runs of unchanged tensors are not read but handed to `forward`,
   * for a caller that copies them into place itself; the others are read into `buffers` (the caller's, each a
   * piece long, one being merged while the others are read ahead) - mergeForwardingRuns.
   */
  async *mergeShard(
    i,
    shard,
    src,
    signal,
    counts = { bytesIn: 0 },
    { reuse = false, keep = 0, pieceSize = DEFAULT_READ_SIZE, forward = null, buffers = null } = {},
  ) {
    const head = this.handle.call('begin', i);
    if (head) yield head;
    yield* this.serveAdapter(signal);
    if (forward) yield* this.mergeForwardingRuns(shard, src, signal, counts, { reuse, forward, buffers });
    else yield* this.mergeRuns(shard, src, signal, counts, { reuse, keep, pieceSize });
    yield* this.serveAdapter(signal);
    const tail = this.handle.call('finish');
    if (tail) yield tail;
  }

  /** mergeShard's body for the runs of the shard: every one read from `src`, the unchanged ones yielded as read. */
  async *mergeRuns(shard, src, signal, counts, { reuse, keep, pieceSize }) {
    const pieces =
      reuse && src.readInto ? Array.from({ length: READ_AHEAD + 1 + keep }, () => new Uint8Array(pieceSize)) : null;
    // A source that says how it is best read (a remote file: pieces per Range request, requests in flight) is read
    // so, unless the pieces go into reused buffers.
    const next = pieces
      ? runPieces(src, shard.runs, signal, pieceSize, pieces)
      : runPieces(src, shard.runs, signal, src.pieceSize ?? pieceSize, null, src.readAhead);
    for (let piece; (piece = await next()) !== null;) {
      const { bytes, forward } = piece;
      const n = bytes.length; // read before the consumer has the bytes: it may transfer (detach) them
      counts.bytesIn += n;
      if (forward) {
        yield bytes;
        const after = this.handle.call('forwarded', n);
        if (after) yield after;
      } else {
        yield* this.pushed(bytes, reuse);
      }
      yield* this.serveAdapter(signal);
    }
  }

  /** What pushing `bytes` of the changed tensors gives: a view of the heap when `reuse` allows (one at most per
   * call, so that a consumer can start writing all of a call's output before anything else runs), else copies. */
  pushed(bytes, reuse) {
    if (reuse && bytes.length <= this.handle.windowSize) {
      const views = this.handle.inputToViews('push', bytes);
      return views.length <= 1 ? views : [concat(views)];
    }
    const out = [];
    this.handle.inputToBytes('push', bytes, (b) => out.push(b));
    return out;
  }

  /**
   * mergeShard's body for the runs when the caller copies those of unchanged tensors itself (option `forward`):
   * `forward(offset, length)` is told each such run of the source, whose bytes belong at the output's current end
   * (after the bytes yielded so far), and counts them itself; only the tensors the merge changes are read, with
   * read-ahead across the runs forwarded between them. For a random-access source with readInto.
   */
  async *mergeForwardingRuns(shard, src, signal, counts, { reuse, forward, buffers }) {
    if (!src.random || !src.readInto || !(buffers?.length >= 2))
      throw new TypeError('peft-bridge: forward needs a file source and two buffers or more');
    const merged = shard.runs.filter((run) => !run[2]);
    const next = runPieces(src, merged, signal, buffers[0].length, buffers, buffers.length - 1);
    for (const [begin, end, isForward] of shard.runs) {
      if (isForward) {
        forward(begin, end - begin);
        const after = this.handle.call('forwarded', end - begin);
        if (after) yield after;
        continue;
      }
      for (let left = end - begin; left > 0;) {
        const piece = await next();
        if (piece === null) throw endedAt(end - left);
        const { bytes } = piece;
        left -= bytes.length;
        counts.bytesIn += bytes.length;
        yield* this.pushed(bytes, reuse);
        yield* this.serveAdapter(signal);
      }
    }
  }

  /**
   * The base's other files the merge copies into its output (tokenizer, generation config, chat template...), by
   * the CLI's rule (app/base_extras.h: every file of the base folder that is not a weight file nor one the merge
   * writes itself): their names in byte order, also listed in the summary. `files`: the base folder's listing
   * (MergeBase.files); none, or `copyExtra` false (`--no-copy-extra`), copies nothing.
   */
  copiedFiles(plan, hasIndex, files, copyExtra = true) {
    const listing = baseListing(files);
    const config = this.configJson();
    const written = [
      ...plan.shards.map((s) => s.name),
      ...(hasIndex ? [INDEX_NAME] : []),
      ...(config !== null ? ['config.json'] : []),
    ];
    const request = {
      basePath: 'base',
      baseIsDirectory: listing !== null,
      listing: listing ?? [],
      written,
      writesConfig: config !== null,
      copyExtra: copyExtra !== false,
    };
    const r = this.module.planExtraFiles(JSON.stringify(request));
    if (!r.ok) throw errorFromValue(r);
    const { copy } = JSON.parse(r.planJson);
    this.setCopiedFiles(copy);
    return copy;
  }

  /** The base's other files the caller copies into the output (names, in order): the summary lists them. */
  setCopiedFiles(names) {
    this.handle.handle.setCopiedFiles(JSON.stringify(names));
  }

  /** The process's peak RSS in bytes, as the host measures it: the summary names it beside the WASM heap. */
  setPeakRss(bytes) {
    this.handle.handle.setPeakRss(bytes);
  }

  /** The core's summary (the CLI's output): peak memory as the process's RSS (setPeakRss) and the WASM heap. */
  summary(...args) {
    return this.handle.handle.summary(...args);
  }

  /** The text summary's two parts, as the CLI prints them: the plan before the work, the outcome after it. */
  planText(dryRun) {
    return this.handle.handle.planText(dryRun);
  }

  /** The `warning:` lines the CLI prints once the plan is made (merge::RenderMergeWarnings). */
  planWarnings() {
    return this.handle.handle.planWarnings();
  }

  outcomeText(seconds) {
    return this.handle.handle.outcomeText(seconds);
  }

  close() {
    super.close();
    // A local path's file handle (a source the caller passed stays the caller's: its close is a no-op here).
    this.adapterSource?.close().catch(() => {});
    this.adapterSource = null;
  }
}

/**
 * Reads the first bytes of a source: exact ranges from a random-access one, else chunks from the start of a
 * stream (what is left over is kept for the next read). Returns fewer bytes only where the source ends.
 */
function prefixReader(src, signal) {
  let pos = 0;
  let pending = new Uint8Array(0);
  return {
    async read(n) {
      if (src.random) {
        const want = Math.max(0, Math.min(n, src.size - pos));
        const bytes = want ? await raceAbort(Promise.resolve(src.read(pos, want)), signal) : new Uint8Array(0);
        pos += bytes.length;
        return bytes;
      }
      const parts = [];
      let have = 0;
      while (have < n) {
        if (pending.length === 0) {
          const chunk = await src.next();
          if (chunk === null) break;
          pending = chunk;
        }
        const take = Math.min(n - have, pending.length);
        parts.push(pending.subarray(0, take));
        pending = pending.subarray(take);
        have += take;
      }
      return concat(parts) ?? new Uint8Array(0);
    },
  };
}

function checkAdapter(adapter) {
  if (!adapter || typeof adapter !== 'object' || adapter.weights === undefined) {
    throw new TypeError('peft-bridge: adapter must be an object with `weights` (and usually `config`)');
  }
}

/** The adapter's files as the core takes them (weights as given: MergeSession.loadAdapter reads them by range). */
export async function adapterFiles(adapter, baseConfig, signal) {
  checkAdapter(adapter);
  throwIfAborted(signal);
  const { weights } = adapter;
  const fileName =
    typeof Blob !== 'undefined' && weights instanceof Blob && typeof weights.name === 'string' && weights.name
      ? weights.name
      : null;
  return {
    weights,
    weightsName: String(adapter.weightsName ?? fileName ?? 'adapter_model.safetensors'),
    config: configText(adapter.config, 'adapter.config'),
    baseConfig: configText(baseConfig, 'baseConfig'),
  };
}

/**
 * Merges a LoRA adapter into one base safetensors file as a stream: the base file's bytes in (in file order,
 * chunks of any size), the merged file's bytes out, as PEFT's merge_and_unload writes them. The output header
 * is planned from the input header, so a mismatch between base and adapter errors the stream before any byte
 * comes out. Errors are SafetensorsError; aborting `signal` errors both sides with its reason.
 *
 * @param {{adapter: {weights: any, config?: any, weightsName?: string}, baseConfig?: any, dtype?: 'bf16' | 'f16' | 'f32',
 *   safe?: boolean, unmerge?: boolean, arch?: string, signal?: AbortSignal,
 *   onProgress?: (p: {bytesIn: number, bytesOut: number}) => void}} options
 * @returns {TransformStream<Uint8Array, Uint8Array>}
 */
export function createMergeStream(options) {
  if (!options || typeof options !== 'object') throw new TypeError('peft-bridge: createMergeStream needs {adapter}');
  const { signal, onProgress } = options;
  // Bad options throw here rather than erroring the stream later.
  optionsJson(options);
  checkAdapter(options.adapter);
  let session = null;
  let onAbort = null;
  let bytesIn = 0;
  let bytesOut = 0;
  const cleanup = () => {
    if (onAbort) signal?.removeEventListener('abort', onAbort);
    onAbort = null;
    session?.close();
    session = null;
  };
  const guard =
    (fn) =>
    async (...args) => {
      try {
        return await fn(...args);
      } catch (error) {
        cleanup();
        throw error;
      }
    };
  const emit = (controller) => (bytes) => {
    bytesOut += bytes.length;
    controller.enqueue(bytes);
  };
  return new TransformStream({
    start: guard(async (controller) => {
      throwIfAborted(signal);
      onAbort = () => {
        controller.error(abortReason(signal));
        cleanup();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const files = await adapterFiles(options.adapter, options.baseConfig, signal);
      const created = await MergeSession.create('StreamMerger', options);
      if (signal?.aborted) {
        created.close(); // the abort listener already errored the stream
        throw abortReason(signal);
      }
      session = created;
      await session.loadAdapter(files, signal);
    }),
    transform: guard(async (chunk, controller) => {
      throwIfAborted(signal);
      let bytes = chunkBytes(chunk);
      bytesIn += bytes.length;
      // The chunk a run at a time: the header and the tensors the merge changes are fed to the core; the
      // unchanged ones are passed on as they came (views of the chunk) and the core only told how many. The
      // output is enqueued once the whole chunk is through: a consumer may transfer (detach) what it reads,
      // and the views share the chunk's buffer.
      const out = [];
      while (bytes.length > 0) {
        const run = session.handle.handle.nextRun();
        const n = run.bytes > 0 ? Math.min(bytes.length, run.bytes) : bytes.length;
        if (run.forward) {
          out.push(ownBuffer(bytes.subarray(0, n), chunk));
          const after = session.handle.call('forwarded', n);
          if (after) out.push(after);
        } else {
          session.handle.inputToBytes('feed', bytes.subarray(0, n), (b) => out.push(b));
        }
        bytes = bytes.subarray(n);
        for await (const b of session.serveAdapter(signal)) out.push(b);
      }
      for (const b of out) emit(controller)(b);
      onProgress?.({ bytesIn, bytesOut });
    }),
    flush: guard(async (controller) => {
      throwIfAborted(signal);
      for await (const out of session.serveAdapter(signal)) emit(controller)(out);
      const out = session.handle.call('finish');
      if (out) emit(controller)(out);
      onProgress?.({ bytesIn, bytesOut });
      cleanup();
    }),
    // Runtimes with transformer cancel (not Node 20) free the handle at once when either side is cancelled;
    // elsewhere the FinalizationRegistry in handles.js does.
    cancel: async () => cleanup(),
  });
}

/** A shard source: `open(name)`'s result, opened with openSource. */
async function openShard(base, name, signal) {
  const source = await raceAbort(Promise.resolve(base.open(name)), signal);
  return { source, src: await openSource(source, { signal }) };
}

/** A ReadableStream of one Uint8Array. */
function bytesStream(bytes) {
  return new ReadableStream({
    start(controller) {
      controller.enqueue(bytes);
      controller.close();
    },
  });
}

/**
 * The source bytes of a shard's plan runs ([begin, end, forward], file order), in order, a piece at a time
 * ({bytes, forward}, null at the end): read from a random-access source - the next piece's read started before
 * this one is handed over, so reading overlaps with whatever the consumer does with it (writing it) - or cut out
 * of a stream of the whole file. `buffers` (more than `depth`, with src.readInto): pieces are read into them in turn. `depth`:
 * how many reads are kept in flight past the piece handed over.
 */
function runPieces(src, runs, signal, pieceSize, buffers = null, depth = READ_AHEAD) {
  let r = 0;
  let turn = 0; // buffers: the one the next read fills (they take turns: one in use, the others read ahead)
  let pos = src.random ? (runs[0]?.[0] ?? 0) : 0; // file offset of the next byte to read / of `pending`
  let pending = null;
  let chunk = null; // the stream's chunk `pending` is part of
  const ahead = []; // random access: the reads already started, in order
  const readNext = () => {
    while (r < runs.length && pos >= runs[r][1]) {
      ++r;
      if (r < runs.length && pos < runs[r][0]) pos = runs[r][0];
    }
    if (r >= runs.length) return null;
    const [, end, forward] = runs[r];
    const at = pos;
    const n = Math.min(pieceSize, end - at);
    pos += n;
    const into = buffers?.[turn++ % buffers.length].subarray(0, n);
    const read = Promise.resolve()
      .then(() =>
        signal?.aborted ? Promise.reject(abortReason(signal)) : into ? src.readInto(at, into) : src.read(at, n),
      )
      .then((chunk) => {
        const bytes = chunkBytes(chunk);
        if (bytes.length !== n) throw endedAt(at + bytes.length);
        return { bytes, forward };
      });
    read.catch(() => {}); // a read still ahead when the merge stops is nobody's failure
    return read;
  };
  return async () => {
    throwIfAborted(signal);
    if (src.random) {
      // Reads in flight: this piece and up to `depth` after it, so several reads overlap each other too.
      while (ahead.length <= depth) {
        const read = readNext();
        if (read === null) break;
        ahead.push(read);
      }
      if (ahead.length === 0) return null;
      // Only the piece handed over races the abort: one listener on the signal, however many reads are ahead.
      return raceAbort(ahead.shift(), signal);
    }
    for (;;) {
      throwIfAborted(signal);
      if (r >= runs.length) return null;
      const [begin, end, forward] = runs[r];
      if (pos >= end) {
        ++r;
        continue;
      }
      if (!pending || pending.length === 0) {
        pending = chunk = await src.next();
        if (pending === null) throw endedAt(pos);
      }
      // Skip what precedes the run (the header), then take what lies inside it.
      const skip = Math.min(pending.length, Math.max(0, begin - pos));
      pending = pending.subarray(skip);
      pos += skip;
      if (pending.length === 0) continue;
      const take = Math.min(pending.length, end - pos);
      const bytes = pending.subarray(0, take);
      pending = pending.subarray(take);
      pos += take;
      return { bytes: forward ? ownBuffer(bytes, chunk) : bytes, forward };
    }
  };
}

/**
 * `part` of an input chunk, passed on as output: the chunk itself when it is all of it, else a copy. Every output
 * chunk then owns its buffer, as a consumer that transfers (detaches) what it reads needs; only the pieces cut
 * at a run's edge are copied.
 */
function ownBuffer(part, chunk) {
  const whole = chunkBytes(chunk);
  return part.byteOffset === whole.byteOffset && part.length === whole.length && part.buffer === whole.buffer
    ? part
    : part.slice();
}

// How many pieces a random-access source is read ahead of the one being merged (each holds a piece of memory).
const READ_AHEAD = 2;

const endedAt = (offset) =>
  new SafetensorsError('IoError', `source ended at byte ${offset}, inside a tensor`, { offset });

/**
 * Reads every shard's header and plans a whole-model merge. Internal: mergeShards(), the npm CLI's sharded path
 * and mergeInWorkers (in the page and in each worker) build on the session it returns.
 */
export async function planShards(options, signal) {
  const { base } = options;
  if (!base || typeof base !== 'object' || typeof base.open !== 'function') {
    throw new TypeError('peft-bridge: mergeShards needs base: {open(name), index?, config?}');
  }
  checkAdapter(options.adapter);
  const session = await MergeSession.create('Merger', options);
  const random = new Map(); // shard name -> random-access source, kept for the data pass (closed by the caller)
  try {
    const index = configText(base.index, 'base.index');
    const names = index !== null ? session.setIndex(index) : ['model.safetensors'];
    for (const name of names) {
      throwIfAborted(signal);
      const { source, src } = await openShard(base, name, signal);
      try {
        await session.addShard(name, src, signal);
      } finally {
        await src.close();
      }
      if (isRandomAccess(source)) random.set(name, source);
    }
    session.baseComplete();
    await session.loadAdapter(await adapterFiles(options.adapter, base.config, signal), signal);
    const plan = session.plan();
    const copied = session.copiedFiles(plan, index !== null, base.files, options.copyExtra);
    return { session, plan, random, index, copied };
  } catch (error) {
    session.close();
    await closeShards(random);
    throw error;
  }
}

/** Closes the random-access shard sources `base.open(name)` gave, once the merge is done with them. */
export async function closeShards(random) {
  await Promise.all([...random.values()].map((source) => closeRandomAccess(source)));
}

/**
 * Merges a LoRA adapter into a whole model, sharded or not, yielding the output files in order: each shard
 * (same names as the input's), then `model.safetensors.index.json` when the base has an index, then
 * `config.json` when the base config was given, then - when `base.files` lists the base folder - the base's
 * other files the CLI's `merge` copies (tokenizer, generation config...: the core's rule, app/base_extras.h),
 * byte for byte from `base.open(name)`, unless `copyExtra: false`. Every shard's header is read and the merge
 * planned before the first file is yielded, so a base/adapter mismatch rejects up front.
 *
 * Read each file's stream to its end, or cancel it to skip that file, before asking for the next file (the merge
 * runs one shard at a time; the next step rejects otherwise). Breaking out of the loop, an error or an abort
 * frees everything. A random-access source `base.open` gave is closed (its `close()`, if any) when the merge is
 * done with it.
 *
 * `base.open(name)` (may be async) returns the shard's bytes: a Blob, Uint8Array, ArrayBuffer or
 * {size, read(offset, length)} is read by ranges (the header first, then the tensors); a ReadableStream or
 * AsyncIterable must hold the whole file and is asked for twice - once for the header, cancelled after it,
 * then once for the data.
 *
 * @param {{base: {open: (name: string) => any, index?: any, config?: any}, adapter: {weights: any, config?: any, weightsName?: string},
 *   dtype?: 'bf16' | 'f16' | 'f32', safe?: boolean, unmerge?: boolean, arch?: string, signal?: AbortSignal,
 *   onProgress?: (p: {bytesIn: number, bytesOut: number, totalIn: number}) => void}} options
 * @returns {AsyncGenerator<{path: string, size: number, stream: ReadableStream<Uint8Array>}>}
 */
export async function* mergeShards(options) {
  if (!options || typeof options !== 'object') throw new TypeError('peft-bridge: mergeShards needs {base, adapter}');
  const { signal, onProgress } = options;
  throwIfAborted(signal);
  const { session, plan, random, index, copied } = await planShards(options, signal);
  let failure = null;
  let current = null; // the stream being read: {done, fail(reason)}
  const onAbort = () => current?.fail(abortReason(signal));
  signal?.addEventListener('abort', onAbort, { once: true });
  const progress = { bytesIn: 0, bytesOut: 0, totalIn: plan.sourceBytes };
  try {
    for (let i = 0; i < plan.shards.length; ++i) {
      const shard = plan.shards[i];
      // Random-access sources are reused; streams are asked for again, now for the data.
      const open = async () =>
        random.has(shard.name)
          ? await openSource(random.get(shard.name), { signal })
          : (await openShard(options.base, shard.name, signal)).src;
      current = shardStream(session, i, shard, open, {
        signal,
        onProgress: onProgress && (() => onProgress({ ...progress })),
        progress,
        onError: (error) => (failure = error),
      });
      yield { path: shard.name, size: shard.outputSize, stream: current.stream };
      throwIfAborted(signal);
      if (failure) throw failure;
      if (current.skipped) await current.settled; // a cancelled file: its pull done, on to the next
      if (!current.done)
        throw new SafetensorsError(
          'InvalidArgument',
          `the stream of ${shard.name} was not read to its end (nor cancelled) before the next file was asked for`,
        );
    }
    const texts = [];
    if (index !== null) texts.push([INDEX_NAME, session.outputIndex()]);
    const config = session.configJson();
    if (config !== null) texts.push(['config.json', config]);
    current = null;
    for (const [path, text] of texts) {
      const bytes = new TextEncoder().encode(text);
      yield { path, size: bytes.length, stream: bytesStream(bytes) };
      throwIfAborted(signal);
    }
    for (const name of copied) {
      const file = await copiedFile(options.base, name, signal);
      current = file.state;
      yield { path: file.path, size: file.size, stream: file.stream };
      throwIfAborted(signal);
      if (current.skipped) await current.settled;
      if (!current.done)
        throw new SafetensorsError(
          'InvalidArgument',
          `the stream of ${name} was not read to its end (nor cancelled) before the next file was asked for`,
        );
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    current?.fail(failure ?? new Error('peft-bridge: merge stopped'));
    session.close();
    await closeShards(random);
  }
}

/**
 * One of the base's other files as an output file ({path, size, stream}, plus `state` for mergeShards): its bytes
 * as `base.open(name)` gives them, unchanged - read a piece at a time from a random-access source, held whole
 * from a stream (these are small files: tokenizer, configs, templates) so that its size is known up front.
 * `state.fail(reason)` errors the stream from outside. Internal (mergeShards, mergeInWorkers, the remote merges).
 */
export async function copiedFile(base, name, signal) {
  const source = await raceAbort(Promise.resolve(base.open(name)), signal);
  const src = await openSource(source, { signal });
  const state = { done: false, skipped: false, settled: Promise.resolve(), fail: null };
  const release = async (reason) => {
    await src.close(reason);
    await closeRandomAccess(source);
  };
  let size;
  let read;
  if (src.random) {
    size = src.size;
    read = (pos, n) => raceAbort(Promise.resolve(src.read(pos, n)), signal).then(chunkBytes);
  } else {
    const parts = [];
    try {
      for (let chunk; (chunk = await src.next()) !== null;) parts.push(chunkBytes(chunk));
    } finally {
      await release();
    }
    const bytes = concat(parts) ?? new Uint8Array(0);
    size = bytes.length;
    read = async (pos, n) => bytes.subarray(pos, pos + n);
  }
  let pos = 0;
  let controller = null;
  state.fail = (error) => {
    if (state.done) return;
    state.done = true;
    try {
      controller?.error(error);
    } catch {
      // already closed or errored
    }
    release(error).catch(() => {});
  };
  const stream = new ReadableStream(
    {
      start(c) {
        controller = c;
      },
      async pull() {
        if (state.done) return;
        try {
          if (pos >= size) {
            state.done = true;
            controller.close();
            await release();
            return;
          }
          const n = Math.min(DEFAULT_READ_SIZE, size - pos);
          const bytes = await read(pos, n);
          if (bytes.length !== n)
            throw new SafetensorsError(
              'IoError',
              `${name} ended at byte ${pos + bytes.length}, short of its ${size} bytes`,
            );
          pos += n;
          controller.enqueue(bytes);
        } catch (error) {
          state.fail(error);
          throw error;
        }
      },
      cancel(reason) {
        if (state.done) return;
        state.done = true;
        state.skipped = true;
        state.settled = release(reason).catch(() => {});
        return state.settled;
      },
    },
    { highWaterMark: 0 },
  );
  return { path: name, size, stream, state };
}

/**
 * The merged bytes of shard `i` as a pull stream (see MergeSession.mergeShard). `fail(reason)` errors it from
 * outside (abort, or the iterator leaving early) and frees the handle; cancelling the stream skips the shard.
 */
function shardStream(session, i, shard, open, { signal, onProgress, progress, onError }) {
  // skipped: the consumer cancelled this stream; the merge goes on with the next file once `settled` (a pull
  // still running when the stream was cancelled) has resolved, so that nothing of this shard reaches the next.
  const state = { done: false, skipped: false, settled: Promise.resolve(), stream: null, fail: null };
  let controller = null;
  let src = null;
  let chunks = null;
  let pulling = Promise.resolve();
  const fail = (error) => {
    if (state.done) return;
    state.done = true;
    onError(error);
    try {
      controller?.error(error);
    } catch {
      // already closed or errored
    }
    session.close();
    src?.close(error);
  };
  state.fail = fail;
  state.stream = new ReadableStream(
    {
      start(c) {
        controller = c;
      },
      pull() {
        pulling = pullOnce();
        return pulling;
      },
      cancel(reason) {
        if (state.done) return;
        // Skips this file: the rest of its merge is dropped, its source closed; the other files still come.
        state.done = true;
        state.skipped = true;
        state.settled = pulling
          .catch(() => {})
          .then(async () => {
            await chunks?.return?.().catch(() => {});
            await src?.close(reason);
          });
        return state.settled;
      },
    },
    { highWaterMark: 0 }, // pull only when the consumer reads: nothing is merged ahead of it
  );
  async function pullOnce() {
    try {
      if (!chunks) {
        src = await open();
        if (state.done) return; // cancelled while the source opened: cancel() closes it once this pull ends
        chunks = session.mergeShard(i, shard, src, signal, progress);
      }
      const { done, value } = await chunks.next();
      if (state.done) return; // failed from outside, or cancelled, meanwhile
      if (done) {
        state.done = true;
        controller.close();
        await src.close();
      } else {
        progress.bytesOut += value.length;
        controller.enqueue(value);
      }
      onProgress?.();
    } catch (error) {
      if (state.skipped) return; // the stream was cancelled meanwhile: its failure is nobody's
      fail(error);
      throw error;
    }
  }
  return state;
}

/**
 * Plans a whole-model merge without merging (the CLI's `merge --dry-run --json`): reads every shard's header
 * (nothing else) and the adapter, matches every module to its base tensor and checks every shape, then frees
 * everything. Rejects as {@link mergeShards} would before its first file (ShapeMismatch, UnsupportedAdapter…).
 *
 * Resolves to the dry-run summary's fields - `arch`, `modulesMatched`, `tensorsMerged`, `unmatchedKeys`
 * (the adapter's rejected tensors, with reasons), `files` (output shards), `totalSize`, `bytesOut`, `notes` -
 * plus `tensors` (every base tensor the adapter changes: shard, tensor, op, module, dtypes, shape), `outputs`
 * (every file mergeShards would yield, with its size) and `sourceBytes` (base bytes a merge reads).
 *
 * @param {{base: {open: (name: string) => any, index?: any, config?: any}, adapter: {weights: any, config?: any, weightsName?: string},
 *   dtype?: 'bf16' | 'f16' | 'f32', unmerge?: boolean, arch?: string, signal?: AbortSignal}} options
 */
export async function planMerge(options) {
  if (!options || typeof options !== 'object') throw new TypeError('peft-bridge: planMerge needs {base, adapter}');
  const { signal } = options;
  throwIfAborted(signal);
  const { session, plan, index, random, copied } = await planShards(options, signal);
  try {
    const { ok, seconds, gbPerS, peakMemory, peakWasmHeap, bytesIn, dryRun, ...summary } = JSON.parse(
      session.summary(0, true, true),
    );
    const outputs = plan.shards.map((s) => ({ path: s.name, size: s.outputSize }));
    const size = (text) => new TextEncoder().encode(text).length;
    if (index !== null) outputs.push({ path: INDEX_NAME, size: size(session.outputIndex()) });
    const config = session.configJson();
    if (config !== null) outputs.push({ path: 'config.json', size: size(config) });
    for (const name of copied) {
      const file = await copiedFile(options.base, name, signal);
      await file.stream.cancel();
      outputs.push({ path: name, size: file.size });
    }
    return {
      ...summary,
      tensors: JSON.parse(session.handle.handle.planTensors()),
      outputs,
      sourceBytes: plan.sourceBytes,
    };
  } finally {
    session.close();
    await closeShards(random);
  }
}
