// createAdapter(): a fresh LoRA adapter for a base model, as the CLI's `create` writes it (the same bytes). The core
// plans and makes every tensor (wasm/create_bindings.cc, src/compose/create_*); this file reads the base's headers
// (and, for DoRA, the targeted weights' bytes, a piece at a time) and hands out the files as Web Streams.
import { namingTablesOption } from './naming-tables.js';
import { SafetensorsError, throwIfAborted } from '../errors.js';
import { configText } from './adapter.js';
import { ModelReadingSession } from './merge.js';
import { isRemoteModel, modelOf } from './model-input.js';
import { remoteReading } from '../remote/remote.js';
import { DEFAULT_READ_SIZE, isRandomAccess, openSource, raceAbort } from '../io/sources.js';
import { getModule } from '../init.js';

/** The options as the core takes them: every value as text, checked there (the CLI's messages). Internal. */
export function createOptionsJson(o) {
  const text = (v, what) => {
    if (v === undefined || v === null) return null;
    if (typeof v === 'number' || typeof v === 'bigint') return String(v);
    if (typeof v === 'string') return v;
    throw new TypeError(`peft-bridge: createAdapter's ${what} must be a number or a string`);
  };
  let targets = o.targetModules ?? null;
  if (Array.isArray(targets)) targets = targets.map(String).join(',');
  if (targets !== null && typeof targets !== 'string')
    throw new TypeError('peft-bridge: targetModules must be a string or an array of names');
  return JSON.stringify({
    targetModules: targets,
    targetRegex: o.targetRegex ?? null,
    r: text(o.r, 'r'),
    alpha: text(o.alpha, 'alpha'),
    seed: text(o.seed, 'seed'),
    init: o.init ?? null,
    dtype: o.dtype ?? null,
    rslora: !!o.rslora,
    dora: !!o.dora,
    arch: o.arch ?? null,
    base: o.baseName ?? null,
    revision: o.revision ?? null,
    namingTables: namingTablesOption(o.namingTables),
  });
}

/** A create session: the core's AdapterCreator behind ModelReadingSession's steps. Internal. */
export async function createSession(options) {
  const module = await getModule();
  return new ModelReadingSession(module, 'AdapterCreator', createOptionsJson(options));
}

/**
 * Reads a base (MergeBase, or a Node path) into `session`: the index, every shard's header. Returns the base's
 * config text and the random-access sources by shard name (for DoRA's weights), to close afterwards. Internal.
 */
async function readBase(session, base, signal) {
  const sources = new Map();
  const index = configText(base.index, 'base.index');
  const names = index !== null ? session.setIndex(index) : ['model.safetensors'];
  try {
    for (const name of names) {
      throwIfAborted(signal);
      const source = await raceAbort(Promise.resolve(base.open(name)), signal);
      const src = await openSource(source, { signal });
      try {
        await session.addShard(name, src, signal);
      } finally {
        await src.close();
      }
      sources.set(name, source);
    }
    session.baseComplete();
  } catch (error) {
    await closeAll(sources);
    throw error;
  }
  const config = configText(base.config, 'base.config');
  return { config: config instanceof Uint8Array ? new TextDecoder().decode(config) : config, sources };
}

async function closeAll(sources) {
  for (const source of sources.values())
    if (isRandomAccess(source) && typeof source.close === 'function') await source.close();
}

/**
 * The DoRA weights' bytes (plan.ranges: [shard, begin, end], in order) through the core, `DEFAULT_READ_SIZE` at a
 * time; `onRead(done)` after each piece. Internal (the npm CLI uses it with its own sources).
 */
export async function supplyBase(session, plan, openShardSource, signal, onRead = () => {}, onShard = () => {}) {
  let done = 0;
  let shown = null;
  const opened = new Map();
  try {
    for (const [shard, begin, end] of plan.ranges) {
      if (!opened.has(shard)) opened.set(shard, await openSource(await openShardSource(shard), { signal }));
      const src = opened.get(shard);
      if (shard !== shown) onShard(shard, done);
      shown = shard;
      if (!src.random)
        throw new SafetensorsError('InvalidArgument', `DoRA needs ${shard} by ranges: pass a random-access source`);
      for (let pos = begin; pos < end;) {
        throwIfAborted(signal);
        const n = Math.min(DEFAULT_READ_SIZE, end - pos);
        const bytes = await raceAbort(Promise.resolve(src.read(pos, n)), signal);
        session.handle.inputToBytes('supplyBase', bytes, () => {});
        pos += n;
        done += n;
        await onRead(done);
      }
    }
  } finally {
    for (const src of opened.values()) await src.close();
  }
}

/** The weights file's bytes, made a tensor per pull. Internal (the npm CLI writes them). */
export function* weightsChunks(session) {
  const head = session.handle.call('begin');
  if (head) yield head;
  for (;;) {
    const bytes = session.handle.call('next');
    if (session.handle.handle.done()) break;
    if (bytes) yield bytes;
  }
  const tail = session.handle.call('finish');
  if (tail) yield tail;
}

/**
 * A fresh LoRA adapter for `options.base`, as `peft-bridge create` writes it: {summary, text, config, files: [{path,
 * size, stream}]} (adapter_model.safetensors, made a tensor at a time as its stream is read, then
 * adapter_config.json); with `dryRun`, the plan only (`create --dry-run`'s text and JSON) and no files.
 */
export async function createAdapter(options) {
  if (!options || typeof options !== 'object' || options.base === undefined)
    throw new TypeError('peft-bridge: createAdapter needs {base, targetModules}');
  const { signal, onProgress } = options;
  throwIfAborted(signal);
  const given = options.base;
  // Remote bases are read by Range (the headers; with DoRA the targeted weights) and closed before the weights
  // stream is handed out: the adapter is made from the plan and the norms alone.
  const reading = isRemoteModel(given) ? remoteReading(options) : null;
  let session = null;
  let sources = new Map();
  let failure;
  try {
    const { model: base, name } = await modelOf(given, 'base', reading, 'createAdapter');
    session = await createSession({ ...options, baseName: options.baseName ?? name });
    const read = await readBase(session, base, signal);
    sources = read.sources;
    session.check(
      session.handle.handle.plan(
        options.baseConfig !== undefined ? configText(options.baseConfig, 'baseConfig') : read.config,
      ),
    );
    const plan = JSON.parse(session.handle.handle.planJson());
    const summaryOf = (dryRun) => {
      const { ok, dryRun: _, ...summary } = JSON.parse(session.handle.handle.summary(true, dryRun));
      return summary;
    };
    if (options.dryRun) {
      const result = {
        summary: summaryOf(true),
        text: session.handle.handle.summary(false, true),
        config: plan.config,
        files: [],
      };
      session.close();
      return result;
    }
    // A random-access shard is read again by range; a stream is asked for again (MergeBase's contract), and
    // refused by supplyBase: DoRA reads the targeted weights by range.
    const reopen = (shard) => (isRandomAccess(sources.get(shard)) ? sources.get(shard) : base.open(shard));
    await supplyBase(session, plan, reopen, signal, (done) => onProgress?.({ bytesIn: done, totalIn: plan.baseBytes }));
    const summary = summaryOf(false);
    const text = session.handle.handle.summary(false, false);
    const chunks = weightsChunks(session);
    const owned = session;
    session = null; // the weights stream closes it
    let finished = false;
    const finish = () => {
      if (!finished) owned.close();
      finished = true;
    };
    const weights = new ReadableStream(
      {
        pull(controller) {
          try {
            throwIfAborted(signal);
            const next = chunks.next();
            if (next.done) {
              finish();
              controller.close();
            } else controller.enqueue(next.value);
          } catch (error) {
            finish();
            controller.error(error);
          }
        },
        cancel() {
          finish();
        },
      },
      { highWaterMark: 0 },
    );
    const configBytes = new TextEncoder().encode(plan.config);
    const config = new ReadableStream({
      start(c) {
        c.enqueue(configBytes);
        c.close();
      },
    });
    return {
      summary,
      text,
      config: plan.config,
      files: [
        { path: plan.weightsName, size: plan.weightsSize, stream: weights },
        { path: plan.configName, size: configBytes.length, stream: config },
      ],
    };
  } catch (error) {
    failure = error;
    session?.close();
    throw error;
  } finally {
    await closeAll(sources);
    await reading?.close(failure);
  }
}
