// Remote merge: the base model and the adapter are read from the Hugging Face Hub (or plain URLs) with Range
// requests and merged as they stream. Reading is hub.js's: retries resuming at the byte reached, the first
// answer's ETag pinned (a file that changes mid-merge fails the merge instead of mixing two versions), abort.
//
// One job in four shapes:
//  - mergeRemote: every output file, as mergeShards yields them (one machine);
//  - mergeRemoteShard: one output file, and mergeRemoteIndex: the output index, so that N workers each merge
//    their own shards while a coordinator writes the index. Each worker plans the whole model from the shard
//    headers (a few KiB each), so every worker agrees on every file; it then reads only its shard's data;
//  - planRemote: the plan only.
import { SafetensorsError, abortReason, throwIfAborted } from '../errors.js';
import { configText } from '../ops/adapter.js';
import { listHubFolder, openAdapterDirectory } from '../ops/adapter-dir.js';
import { hubAliases, openRemote, readRemoteWhole } from './hub.js';
import { LIMIT_OPTIONS } from './range-client.js';
import { MergeSession, copiedFile, mergeShards, planMerge } from '../ops/merge.js';
import { openSource } from '../io/sources.js';

const INDEX = 'model.safetensors.index.json';

const isUrl = (v) =>
  (typeof v === 'string' && /^(https?|hf):\/\//i.test(v)) || (typeof URL !== 'undefined' && v instanceof URL);
const decode = (bytes) => new TextDecoder().decode(bytes);

/**
 * A remote file, whole: {bytes, commit}; null when `optional` and it is absent (404). JSON files are held to the
 * JSON cap (PB_HTTP_MAX_JSON_BYTES, option maxJsonBytes); other files (adapter weights) are not.
 */
async function readWhole(source, ro, optional = false) {
  const name = typeof source === 'object' && !(source instanceof URL) ? source.path : String(source);
  const cap = /\.json$/i.test(name.split(/[?#]/)[0]) ? undefined : Number.MAX_SAFE_INTEGER;
  try {
    return await readRemoteWhole(source, ro, cap);
  } catch (error) {
    if (optional && error?.status === 404) return null;
    throw error;
  }
}

/** The address of `path` in a Hub repo given as {repo, revision?, endpoint?, token?, subfolder?}. */
const inRepo = (givenRepo, ro) => {
  const repo = hubAliases(givenRepo); // huggingface.js's accessToken / hubUrl too
  return (path, revision) => ({
    repo: repo.repo,
    revision,
    path: repo.subfolder ? `${repo.subfolder}/${path}` : path,
    endpoint: repo.endpoint ?? ro.endpoint,
    token: repo.token ?? ro.token,
  });
};

/**
 * The base: {revision, index, config, files, shard(name) -> address}. A repo is read at the commit its first answer
 * names (X-Repo-Commit of the index, else of config.json), so a branch that moves meanwhile cannot mix two
 * versions. `files`: a repo folder's file names (the Hub's tree API, the core's reading of it), from which the merge
 * copies the base's other files as the CLI does; null for a URL (one file, as the CLI's `--base FILE`).
 */
async function resolveBase(base, ro, baseConfig, { listFiles = true } = {}) {
  if (isUrl(base)) return { revision: null, index: null, config: baseConfig ?? null, files: null, shard: () => base };
  if (!base || typeof base !== 'object' || typeof base.repo !== 'string')
    throw new TypeError('peft-bridge: base must be a Hub repo {repo, revision?} or the URL of one .safetensors file');
  const at = inRepo(base, ro);
  const revision = base.revision ?? 'main';
  const index = await readWhole(at(INDEX, revision), ro, true);
  const config = await readWhole(at('config.json', index?.commit ?? revision), ro, true);
  const pinned = index?.commit ?? config?.commit ?? revision;
  const files = listFiles ? await listHubFolder({ ...hubAliases(base), revision: pinned }, ro) : null;
  return {
    revision: pinned,
    index: index?.bytes ?? null,
    config: baseConfig ?? config?.bytes ?? null,
    files,
    shard: (name) => at(name, pinned),
  };
}

// The key under which the adapter's weights file is kept open among the shards' (not a valid shard name).
const ADAPTER_FILE = '\u0000adapter';

/**
 * The adapter's weights, remote: read by Range as the merge asks for its header and each module's factors
 * (kept open in `files`, closed with the shards); whole only when the server does not tell the size.
 */
async function rangedWeights(source, ro, files) {
  const file = await openRemote(source, ro);
  if (file.size === null) {
    await file.close();
    return (await readWhole(source, ro)).bytes;
  }
  files.set(ADAPTER_FILE, file);
  return { size: file.size, read: (offset, length) => file.read(offset, length) };
}

/** The adapter as mergeShards takes it ({weights, config, weightsName}), opened for Range reads when remote; and its revision. */
async function resolveAdapter(adapter, ro, files) {
  if (!adapter || typeof adapter !== 'object')
    throw new TypeError('peft-bridge: adapter must be a Hub repo {repo}, {weights, config} URLs or bytes');
  if (typeof adapter.repo === 'string') {
    // The repo's files as the CLIs choose them in a directory (the core's rule, adapter-dir.js), at one commit.
    const dir = await openAdapterDirectory(adapter, ro);
    files.set(ADAPTER_FILE, dir.weights);
    const weights = { size: dir.weights.size, read: (offset, length) => dir.weights.read(offset, length) };
    return { files: { weights, config: dir.config, weightsName: dir.weightsName }, revision: dir.revision };
  }
  const fetched = async (v) => (isUrl(v) ? (await readWhole(v, ro)).bytes : v);
  const [weights, config] = await Promise.all([
    isUrl(adapter.weights) ? rangedWeights(adapter.weights, ro, files) : adapter.weights,
    fetched(adapter.config),
  ]);
  const weightsName =
    adapter.weightsName ??
    (isUrl(adapter.weights) ? new URL(String(adapter.weights)).pathname.split('/').pop() : undefined);
  return { files: { ...adapter, weights, config, weightsName }, revision: null };
}

/** Runs `fn` on every item, `limit` at a time; rejects with the first error once the running calls have ended. */
async function eachLimit(items, limit, fn) {
  let next = 0;
  let failure = null;
  const worker = async () => {
    while (!failure && next < items.length) {
      const item = items[next++];
      try {
        await fn(item);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  if (failure) throw failure.error;
}

/**
 * Bytes per Range request in a remote merge's data pass. Chosen by measurement, with the memory it holds (docs/
 * benchmarks.md, "Remote: later ranges at the CDN URL, several in flight").
 */
export const REMOTE_PIECE = 4 << 20;

/**
 * `file` as a {size, read} source for a merge's data pass, with how it is best read: `pieceSize` bytes a read and
 * `readAhead` reads in flight past the piece being merged (the merge's runPieces honours both), one per reader
 * of the file (options.readers, the RemoteFile's), so memory stays at (readers + 1) pieces. A consumer that asks
 * one read at a time, in order and of one size, gets the next piece asked for while it works on the current one.
 */
export function readAhead(file, options = {}) {
  let last = null; // {end, length} of the previous read
  let ahead = null; // {offset, length, promise}: the guessed next read
  let outstanding = 0; // the consumer's reads not settled yet
  return {
    size: file.size,
    pieceSize: Math.max(1, Math.floor(options.pieceSize ?? REMOTE_PIECE)),
    readAhead: file.readers ?? 1,
    read(offset, length) {
      const hit = ahead && ahead.offset === offset && length <= ahead.length;
      const bytes = hit ? ahead.promise.then((b) => b.subarray(0, length)) : file.read(offset, length);
      ahead = null;
      const end = offset + length;
      // A consumer with reads of its own in flight reads ahead itself: no guess then.
      if (outstanding === 0 && last && last.end === offset && last.length === length && end < file.size) {
        const n = Math.min(length, file.size - end);
        ahead = { offset: end, length: n, promise: file.read(end, n) };
        ahead.promise.catch(() => {}); // a wrong guess is never awaited; its error (if any) is not the merge's
      }
      last = { end, length };
      ++outstanding;
      const settled = () => --outstanding;
      bytes.then(settled, settled);
      return bytes;
    },
  };
}

/**
 * The reading options of a remote job (token, endpoint, fetch, the HTTP policy's limits) under an abort of its own
 * that follows `options.signal`; `close(reason)` closes every file in `files` (a reason also aborts what is still
 * running). Internal.
 */
export function remoteReading(options) {
  const { signal } = options;
  const controller = new AbortController(); // the user's signal, or our own abort when the output is given up
  const onAbort = () => controller.abort(abortReason(signal));
  signal?.addEventListener('abort', onAbort, { once: true });
  const ro = {
    signal: controller.signal,
    token: options.token ?? options.accessToken,
    endpoint: options.endpoint ?? options.hubUrl,
    fetch: options.fetch,
    http: options.http,
    readers: options.readers, // ranges of one file read at once
    pieceSize: options.pieceSize, // bytes per range in the data pass
  };
  for (const name of Object.keys(LIMIT_OPTIONS)) ro[name] = options[name]; // the HTTP policy's limits
  const files = new Map();
  const close = async (reason) => {
    signal?.removeEventListener('abort', onAbort);
    if (reason !== undefined && !controller.signal.aborted) controller.abort(reason);
    await Promise.all([...files.values()].map((f) => f.close()));
  };
  return { ro, files, close, signal: controller.signal };
}

/**
 * A remote model (a Hub repo read at one commit, or the URL of one .safetensors file) as a MergeBase whose shards
 * open for Range reads when asked for (kept in `reading.files` under `key` + name, closed with them); and the
 * commit read. Internal (extractAdapter reads two models this way).
 */
export async function openRemoteModel(given, reading, key) {
  const base = await resolveBase(given, reading.ro, null, { listFiles: false }); // a model read, not copied
  const open = async (name) => {
    const file = await openRemote(base.shard(name), reading.ro);
    reading.files.set(key + name, file);
    if (file.size === null)
      throw new SafetensorsError('IoError', `cannot read \`${file.url}\` by ranges: the server does not tell its size`);
    return readAhead(file, reading.ro);
  };
  return { base: { index: base.index, config: base.config, open }, revision: base.revision };
}

/**
 * Resolves the base and the adapter and opens every base shard (one request each, `concurrency` at a time).
 * `close(reason)` closes every file; a reason also aborts what is still running.
 */
async function openModel(options) {
  if (!options || typeof options !== 'object') throw new TypeError('peft-bridge: a remote merge needs {base, adapter}');
  throwIfAborted(options.signal);
  const { ro, files, close } = remoteReading(options);
  try {
    const [base, adapter] = await Promise.all([
      resolveBase(options.base, ro, options.baseConfig),
      resolveAdapter(options.adapter, ro, files),
    ]);
    let names = ['model.safetensors'];
    if (base.index) {
      // The core checks the index (plain .safetensors names, no traversal) before any shard is requested.
      const session = await MergeSession.create('Merger', options);
      try {
        names = session.setIndex(decode(base.index));
      } finally {
        session.close();
      }
    }
    await eachLimit(names, options.concurrency ?? 4, async (name) => {
      const file = await openRemote(base.shard(name), ro);
      files.set(name, file);
      if (file.size === null)
        throw new SafetensorsError(
          'IoError',
          `cannot read \`${file.url}\` by ranges: the server does not tell its size`,
        );
    });
    const sources = new Map(names.map((name) => [name, readAhead(files.get(name), ro)]));
    return { base, adapter, names, files, sources, close, ro, signal: ro.signal };
  } catch (error) {
    await close(error);
    throw error;
  }
}

/** The opened base as mergeShards / planMerge take it: its shards, and the other files of its folder. */
const mergeBase = (opened) => ({
  index: opened.base.index,
  config: opened.base.config,
  files: opened.base.files,
  open: (name) => opened.sources.get(name) ?? openCopied(opened, name),
});

/**
 * One of the base's other files (tokenizer...), opened for Range reads at the base's commit: a {size, read, close}
 * source the copy closes when it ends (whole when the server does not tell the size).
 */
async function openCopied(opened, name) {
  const file = await openRemote(opened.base.shard(name), opened.ro);
  if (file.size !== null)
    return { size: file.size, read: (offset, length) => file.read(offset, length), close: () => file.close() };
  await file.close();
  return (await readWhole(opened.base.shard(name), opened.ro)).bytes;
}

/** Plans the merge on a Merger session of our own (mergeRemoteShard and mergeRemoteIndex need its handle). */
async function planSession(opened, options) {
  const session = await MergeSession.create('Merger', options);
  try {
    if (opened.base.index) session.setIndex(decode(opened.base.index));
    for (const name of opened.names)
      await session.addShard(name, await openSource(opened.sources.get(name)), opened.signal);
    session.baseComplete();
    const { files } = opened.adapter;
    await session.loadAdapter(
      {
        weights: files.weights,
        weightsName: String(files.weightsName ?? 'adapter_model.safetensors'),
        config: configText(files.config, 'adapter.config'),
        baseConfig: configText(opened.base.config, 'baseConfig'),
      },
      opened.signal,
    );
    const plan = session.plan();
    return {
      session,
      plan,
      copied: session.copiedFiles(plan, !!opened.base.index, opened.base.files, options.copyExtra),
    };
  } catch (error) {
    session.close();
    throw error;
  }
}

/**
 * Merges a LoRA adapter into a remote model, yielding the output files as {@link mergeShards} does: each shard,
 * then the index (sharded bases) and config.json (when the base has one).
 */
export async function* mergeRemote(options) {
  const opened = await openModel(options);
  let ended = false;
  let failure;
  try {
    yield* mergeShards({ ...options, base: mergeBase(opened), adapter: opened.adapter.files, signal: opened.signal });
    ended = true;
  } catch (error) {
    failure = error;
    throw error;
  } finally {
    // Left early or failed: abort what may still be reading (a read-ahead) rather than wait for it.
    await opened.close(ended ? undefined : (failure ?? new Error('peft-bridge: merge stopped')));
  }
}

/**
 * One output file of the merge: a shard's merged bytes, streamed (only that shard's data is read), or the
 * index / config.json. `shard` may be left out when the output is one shard.
 */
export async function mergeRemoteShard(options) {
  const opened = await openModel(options);
  let session = null;
  try {
    let plan;
    let copied;
    ({ session, plan, copied } = await planSession(opened, options));
    const names = plan.shards.map((s) => s.name);
    const want = options.shard ?? (names.length === 1 ? names[0] : undefined);
    const i = names.indexOf(want);
    if (i < 0 && copied.includes(want)) {
      // One of the base's other files, as the whole merge copies it: only that file is read.
      session.close();
      await opened.close();
      const { path, size, stream } = await copiedFile(mergeBase(opened), want, options.signal);
      return { path, size, stream };
    }
    if (i < 0) {
      const text =
        want === INDEX ? session.outputIndex() || null : want === 'config.json' ? session.configJson() : null;
      if (text === null) {
        const list = names.join(', ');
        throw new SafetensorsError(
          'InvalidArgument',
          want === undefined
            ? `say which shard: the output has ${names.length} (${list})`
            : `no output file \`${want}\` (shards: ${list})`,
        );
      }
      session.close();
      await opened.close();
      const bytes = new TextEncoder().encode(text);
      return { path: want, size: bytes.length, stream: new Blob([bytes]).stream() };
    }
    // The other shards were opened for their headers only.
    await Promise.all(opened.names.filter((n) => n !== want).map((n) => opened.files.get(n).close()));
    return {
      path: want,
      size: plan.shards[i].outputSize,
      stream: shardStream(session, i, plan.shards[i], opened, options.onProgress),
    };
  } catch (error) {
    session?.close();
    await opened.close(error);
    throw error;
  }
}

/** Shard `i`'s merged bytes as a pull stream; the end, an error, cancel() or an abort frees the session and files. */
function shardStream(session, i, shard, opened, onProgress) {
  const { signal } = opened;
  const counts = { bytesIn: 0 };
  let bytesOut = 0;
  let chunks = null;
  let controller;
  let ended = false;
  const end = async (reason) => {
    if (ended) return;
    ended = true;
    signal.removeEventListener('abort', onAbort);
    session.close();
    await opened.close(reason);
  };
  const onAbort = () => {
    try {
      controller.error(abortReason(signal));
    } catch {
      // already closed
    }
    end(abortReason(signal));
  };
  signal.addEventListener('abort', onAbort, { once: true });
  return new ReadableStream(
    {
      start(c) {
        controller = c;
      },
      async pull() {
        try {
          chunks ??= session.mergeShard(
            i,
            shard,
            await openSource(opened.sources.get(shard.name), { signal }),
            signal,
            counts,
          );
          const { done, value } = await chunks.next();
          if (ended) return; // aborted meanwhile
          if (done) {
            await end();
            controller.close();
            return;
          }
          bytesOut += value.length;
          controller.enqueue(value);
          onProgress?.({ bytesIn: counts.bytesIn, bytesOut, totalIn: shard.sourceBytes });
        } catch (error) {
          await end(error);
          throw error;
        }
      },
      cancel: (reason) => end(reason ?? new Error(`peft-bridge: the stream of ${shard.name} was cancelled`)),
    },
    { highWaterMark: 0 }, // nothing is merged (or fetched) ahead of the reader
  );
}

/** The output `model.safetensors.index.json` the whole merge writes (the same bytes), or null for a one-file base. */
export async function mergeRemoteIndex(options) {
  const opened = await openModel(options);
  try {
    const { session } = await planSession(opened, options);
    try {
      return session.outputIndex() || null;
    } finally {
      session.close();
    }
  } finally {
    await opened.close();
  }
}

/**
 * The merge's plan (planMerge's summary: matched modules, unmatched adapter keys, output files...) with the
 * revisions read (`revision`: the base's commit when the Hub names it; pass it to every worker so all read the
 * same files), reading shard headers and the adapter only.
 */
export async function planRemote(options) {
  const opened = await openModel(options);
  try {
    const plan = await planMerge({
      ...options,
      base: mergeBase(opened),
      adapter: opened.adapter.files,
      signal: opened.signal,
    });
    return { revision: opened.base.revision, adapterRevision: opened.adapter.revision, ...plan };
  } finally {
    await opened.close();
  }
}
