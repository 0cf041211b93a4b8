// extractAdapter(): a LoRA adapter from a full fine-tune, as the CLI's `extract` writes it (the same bytes): per
// module the truncated SVD of W_tuned − W_base, √S split into lora_A and lora_B (src/compose/extract_*, through
// wasm/extract_bindings.cc). The core plans from both models' headers, then asks for byte ranges of either model;
// this file reads them, a piece at a time, and pushes them. The core writes adapter_model.safetensors' data region
// as it goes and its header (which depends on what the data turned out to be) last: the data is gathered in Blobs,
// outside the WASM heap, and the header put in front.
import { namingTablesOption } from './naming-tables.js';
import { SafetensorsError, throwIfAborted } from '../errors.js';
import { configText } from './adapter.js';
import { isRemoteModel, modelOf } from './model-input.js';
import { ModelReadingSession } from './merge.js';
import { remoteReading } from '../remote/remote.js';
import { DEFAULT_READ_SIZE, chunkBytes, closeRandomAccess, openSource, raceAbort } from '../io/sources.js';
import { getModule } from '../init.js';

/** The options as the core takes them: every value as text, checked there (the CLI's messages). Internal. */
export function extractOptionsJson(o) {
  const text = (v, what) => {
    if (v === undefined || v === null) return null;
    if (typeof v === 'number' || typeof v === 'bigint') return String(v);
    if (typeof v === 'string') return v;
    throw new TypeError(`peft-bridge: extractAdapter's ${what} must be a number or a string`);
  };
  let modules = o.modules ?? null;
  if (Array.isArray(modules)) modules = modules.map(String).join(',');
  if (modules !== null && typeof modules !== 'string')
    throw new TypeError('peft-bridge: modules must be a string or an array of names');
  return JSON.stringify({
    rank: text(o.rank, 'rank'),
    energy: text(o.energy, 'energy'),
    maxRank: text(o.maxRank, 'maxRank'),
    modules,
    embeddings: o.embeddings ?? null,
    dtype: o.dtype ?? null,
    arch: o.arch ?? null,
    base: o.baseName ?? null,
    revision: o.revision ?? null,
    namingTables: namingTablesOption(o.namingTables),
  });
}

/** An extract session: the core's ExtractJob behind ModelReadingSession's steps. Internal. */
export async function extractSession(options) {
  const module = await getModule();
  return new ModelReadingSession(module, 'ExtractJob', extractOptionsJson(options));
}

/**
 * Feeds the job the byte ranges it asks for (nextRead) until it asks for none, then finishes it. `sourceOf(tuned,
 * shard)`: the random-access source ({read(offset, length)}) of that shard; `onData(bytes)` (may be async) gets the
 * data region's bytes in file order; `onRead(bytesRead, modulesDone)` after each piece. Returns the header region's
 * bytes (plan.reservedHeader of them, to put in front of the data). Internal (the npm CLI uses it too).
 */
export async function pumpExtract(session, sourceOf, signal, onData, onRead = () => {}) {
  const native = session.handle.handle;
  session.check(native.start());
  for (let read; (read = native.nextRead()) !== null;) {
    const src = sourceOf(read.tuned, read.shard);
    for (let pos = read.begin; pos < read.end;) {
      throwIfAborted(signal);
      const n = Math.min(DEFAULT_READ_SIZE, read.end - pos);
      const bytes = chunkBytes(await raceAbort(Promise.resolve(src.read(pos, n)), signal));
      if (bytes.length !== n)
        throw new SafetensorsError(
          'IoError',
          `${read.name}: source ended at byte ${pos + bytes.length}, inside a tensor`,
          { offset: pos + bytes.length },
        );
      const out = [];
      session.handle.inputToBytes('push', bytes, (b) => out.push(b));
      for (const b of out) await onData(b);
      pos += n;
      await onRead(native.bytesRead(), native.modulesDone());
    }
  }
  const tail = session.handle.call('finish');
  if (tail) await onData(tail);
  return native.header();
}

/**
 * Reads a model into the session (its index, every shard's header), as the tuned one when `tuned`. Returns its
 * config and the opened shards, in order: [{source (what open gave), src (opened)}], to close afterwards.
 */
async function readModel(session, tuned, model, signal, needRanges) {
  session.handle.handle.useModel(tuned);
  const shards = [];
  try {
    const index = configText(model.index, `${tuned ? 'tuned' : 'base'}.index`);
    const names = index !== null ? session.setIndex(index) : ['model.safetensors'];
    for (const name of names) {
      throwIfAborted(signal);
      const source = await raceAbort(Promise.resolve(model.open(name)), signal);
      const src = await openSource(source, { signal });
      shards.push({ source, src });
      await session.addShard(name, src, signal);
      if (needRanges && !src.random)
        throw new SafetensorsError('InvalidArgument', `extract reads ${name} by ranges: pass a random-access source`);
    }
    session.baseComplete();
  } catch (error) {
    await closeShards(shards);
    throw error;
  }
  return { config: configText(model.config, `${tuned ? 'tuned' : 'base'}.config`), shards };
}

async function closeShards(shards) {
  for (const { source, src } of shards) {
    await src.close().catch(() => {});
    await closeRandomAccess(source);
  }
}

const BLOB_PIECE = 16 << 20; // data gathered into a Blob every this many bytes

/**
 * A LoRA adapter that turns `options.base` into (an approximation of) `options.tuned`, as `peft-bridge extract`
 * writes it: {summary, text, config, files: [{path, size, stream}]} (adapter_model.safetensors, then
 * adapter_config.json); with `dryRun`, the plan only and no files.
 */
export async function extractAdapter(options) {
  if (!options || typeof options !== 'object' || options.base === undefined || options.tuned === undefined)
    throw new TypeError('peft-bridge: extractAdapter needs {base, tuned}');
  const { signal, onProgress } = options;
  throwIfAborted(signal);
  const reading = isRemoteModel(options.base) || isRemoteModel(options.tuned) ? remoteReading(options) : null;
  let session = null;
  const opened = [];
  let failure;
  try {
    const base = await modelOf(options.base, 'base', reading, 'extractAdapter');
    const tuned = await modelOf(options.tuned, 'tuned', reading, 'extractAdapter');
    session = await extractSession({ ...options, baseName: options.baseName ?? base.name });
    const needRanges = !options.dryRun;
    const b = await readModel(session, false, base.model, signal, needRanges);
    opened.push(...b.shards);
    const t = await readModel(session, true, tuned.model, signal, needRanges);
    opened.push(...t.shards);
    const baseConfig = options.baseConfig !== undefined ? configText(options.baseConfig, 'baseConfig') : b.config;
    session.check(session.handle.handle.plan(baseConfig, t.config));
    const native = session.handle.handle;
    if (options.dryRun) {
      const { ok, dryRun, ...summary } = JSON.parse(native.dryRunJson());
      return { summary, text: native.planText(true), config: null, files: [] };
    }
    const plan = JSON.parse(native.planJson());
    const blobs = [];
    let parts = [];
    let held = 0;
    let dataSize = 0;
    const onData = (bytes) => {
      parts.push(bytes);
      held += bytes.length;
      dataSize += bytes.length;
      if (held >= BLOB_PIECE) {
        blobs.push(new Blob(parts));
        parts = [];
        held = 0;
      }
    };
    const shards = [b.shards, t.shards];
    const onRead = (bytesIn, modulesDone) =>
      onProgress?.({
        bytesIn: Math.min(bytesIn, plan.readBytes),
        totalIn: plan.readBytes,
        modulesDone,
        modules: plan.modules,
      });
    const header = await pumpExtract(session, (isTuned, shard) => shards[+isTuned][shard].src, signal, onData, onRead);
    const weights = new Blob([header, ...blobs, ...parts]);
    const { ok, dryRun, ...summary } = JSON.parse(native.outcomeJson());
    const config = native.config();
    const configBytes = new TextEncoder().encode(config);
    return {
      summary,
      text: native.planText(false) + native.outcomeText(),
      config,
      files: [
        { path: plan.weightsName, size: header.length + dataSize, stream: weights.stream() },
        { path: plan.configName, size: configBytes.length, stream: new Blob([configBytes]).stream() },
      ],
    };
  } catch (error) {
    failure = error;
    throw error;
  } finally {
    session?.close();
    await closeShards(opened);
    await reading?.close(failure);
  }
}
