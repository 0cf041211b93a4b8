// LoRA adapters: adapterInfo() and translateAdapter() run the core's adapter-info and translate job
// (src/app/translate_job.h) through the job driver: the job reads the weights file by range (its header and tiny
// tensors first, then, for adapterInfo, each module's factors for ‖ΔW‖, and for translateAdapter, each tensor as
// the output file is written), reads, translates and renders; this file gathers the inputs and unpacks the result.
// The header steps and range serving below are the merge and combine handles'.
import { namingTablesOption } from './naming-tables.js';
import { SafetensorsError, errorFromHandle, throwIfAborted } from '../errors.js';
import { concat } from '../handles.js';
import { openAdapterSource, readRange } from './adapter-source.js';
import { DEFAULT_READ_SIZE } from '../io/sources.js';
import { getModule } from '../init.js';
import { openSource } from '../io/sources.js';
import { openJob, run as runJob } from '../job-driver.js';
import { findBaseConfig, isAdapterDirectory, openAdapterDirectory } from './adapter-dir.js';

const DEFAULT_WEIGHTS_NAME = 'adapter_model.safetensors';

/** A source's bytes, whole (one copy when it came in pieces). Internal. */
export async function collectBytes(source, signal) {
  throwIfAborted(signal);
  const src = await openSource(source, { signal });
  try {
    const parts = [];
    for (let chunk; (chunk = await src.next()) !== null;) {
      throwIfAborted(signal);
      parts.push(chunk);
    }
    return concat(parts) ?? new Uint8Array(0);
  } finally {
    await src.close();
  }
}

/** A config as the core takes it: text, raw bytes (passed through unchanged), or null. Internal. */
export function configText(value, what) {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string') return value;
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (
    typeof value === 'object' &&
    (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null)
  ) {
    return JSON.stringify(value);
  }
  throw new TypeError(`peft-bridge: ${what} must be a string, a Uint8Array or a plain object`);
}

/** Copies `bytes` into a handle's window and calls `method(n, ...args)`. Internal. */
export function withBytes(handle, method, bytes, ...args) {
  const ptr = handle.handle.window(bytes.length);
  if (!ptr) throw new SafetensorsError('IoError', `out of memory: cannot reserve ${bytes.length} bytes`);
  handle.module.HEAPU8.set(bytes, ptr);
  return handle.handle[method](bytes.length, ...args);
}

/**
 * Reads the adapter's header and tiny tensors from `src` into a handle with the header steps every handle has
 * (adapterHeaderLength / setAdapterHeader (adapterHeaderNeed) / adapterInlineRanges, wasm/header_reading_handle.h's HeaderReadingHandle); returns the inline
 * tensors' bytes for the reading step. Internal.
 */
export async function readAdapterHeader(handle, src, name, methods, signal) {
  const check = (ok) => {
    if (!ok) throw errorFromHandle(handle.handle);
  };
  const prefix = await readRange(src, 0, Math.min(8, src.size), signal);
  let length = withBytes(handle, methods.length, prefix, name, src.size);
  if (length < 0) check(false);
  // A .gguf adapter's header has no length prefix: the core asks for more bytes until it holds the whole header.
  while (!withBytes(handle, methods.header, await readRange(src, 0, 8 + length, signal), name, src.size)) {
    const need = handle.handle.adapterHeaderNeed();
    if (!(need > 8 + length)) check(false);
    length = need - 8;
  }
  const parts = [];
  for (const [begin, end] of JSON.parse(handle.handle[methods.ranges]()))
    parts.push(await readRange(src, begin, end - begin, signal));
  return concat(parts) ?? new Uint8Array(0);
}

/**
 * Supplies the ranges a handle asks for (`needs()` JSON) until it asks for none; `onBytes` gets its output, and
 * `onRead`, awaited after each piece, the count of bytes supplied so far. Internal.
 */
export async function serveRanges(handle, src, methods, signal, onBytes = () => {}, onRead = null) {
  let supplied = 0;
  for (;;) {
    const needs = JSON.parse(handle.handle[methods.needs]());
    if (needs.length === 0) return;
    for (const [begin, end] of needs) {
      for (let pos = begin; pos < end;) {
        throwIfAborted(signal);
        const n = Math.min(DEFAULT_READ_SIZE, end - pos);
        handle.inputToBytes(methods.supply, await readRange(src, pos, n, signal), onBytes);
        pos += n;
        supplied += n;
        if (onRead) await onRead(supplied);
      }
    }
  }
}

/** A config's bytes as the job reads them (input 1 or 2): a string in UTF-8, bytes unchanged; null when absent. */
function configInput(value) {
  if (value === null || value === undefined) return null;
  const bytes = typeof value === 'string' ? new TextEncoder().encode(value) : value;
  return { random: true, size: bytes.length, read: (begin, n) => bytes.subarray(begin, begin + n) };
}

/**
 * Runs the core's adapter-info or translate job (src/app/translate_job.h) over gathered inputs: the weights read
 * by range (input 0), the configs (inputs 1 and 2) read whole. `jobOptions` are the job's (wasm/job_bindings.cc:
 * a parsed command line as `line`, or the JS keys); `run` the driver's options, and `makeSink(job)` its sink (a
 * CLI's transaction asks the job for its output plan). Returns the summary and the outputs' names. Internal.
 * @param {'adapter-info' | 'translate'} command
 */
export async function runAdapterJob(command, files, jobOptions, makeSink, run = {}) {
  const src = await openAdapterSource(files.weights, run.signal);
  const config = configInput(files.config);
  const baseConfig = configInput(files.baseConfig);
  let job = null;
  try {
    job = await openJob(command, {
      ...jobOptions,
      weightsName: files.weightsName,
      weightsSize: src.size,
      configSize: config?.size ?? null,
      baseConfigSize: baseConfig?.size ?? null,
    });
    await runJob(job, [src, config, baseConfig], makeSink(job), run);
    return { summary: job.handle.summary(), names: JSON.parse(job.handle.outputNamesJson()) };
  } finally {
    job?.close();
    await src.close(); // a local path's file handle (a source the caller passed stays the caller's)
  }
}

/** The JS API's options as the job's keys (translate's option table, app/option_tables.h). */
function jobKeys(options, files) {
  return {
    from: options.from ?? null,
    to: options.to ?? null,
    arch: options.arch ?? null,
    namingTables: namingTablesOption(options.namingTables),
    strict: !!options.strict,
    oldPeft: !!options.oldPeft,
    // translate: dropped tensors are refused unless allowPartial (--allow-partial), as in both CLIs.
    allowPartial: !!options.allowPartial,
    dryRun: !!options.dryRun,
    outtype: options.outtype ?? null,
    // Where the base config came from, or what to pass (the core's chooseBaseConfig): the note or hint it words.
    baseConfigNote: files.baseConfigNote ?? null,
    baseConfigHint: files.baseConfigHint ?? null,
  };
}

/**
 * The adapter's inputs, and close() to release what was opened for them. A directory (a local path or file: URL
 * in Node, or a Hub repo {repo, revision?, subfolder?}) is opened by adapter-dir.js, the core choosing its files.
 */
export async function gather(input, options) {
  if (isAdapterDirectory(input)) {
    const dir = await openAdapterDirectory(input, options);
    // A gguf output needs the base's config (architecture, head counts): without `baseConfig`, the core's rule finds it.
    const find = (options.to === 'gguf' || options.to === 'gguf-names') && options.baseConfig === undefined;
    let found = null;
    try {
      found = find ? await findBaseConfig(input, dir, options) : null;
    } catch (error) {
      await dir.close();
      throw error;
    }
    return {
      weights: dir.weights,
      weightsName: dir.weightsName,
      config: dir.config,
      baseConfig: found ? found.baseConfig : configText(options.baseConfig, 'baseConfig'),
      baseConfigNote: found?.note ?? null,
      baseConfigHint: found?.hint ?? null,
      close: dir.close,
    };
  }
  if (!input || typeof input !== 'object' || input.weights === undefined) {
    throw new TypeError('peft-bridge: input must be an object with `weights`, a Hub repo {repo}, or in Node a path');
  }
  const { weights } = input;
  // A File knows its name; the core uses it in messages only.
  const fileName =
    typeof Blob !== 'undefined' && weights instanceof Blob && typeof weights.name === 'string' && weights.name
      ? weights.name
      : null;
  throwIfAborted(options.signal);
  const config = configText(input.config, 'config');
  const baseConfig = configText(options.baseConfig ?? input.baseConfig, 'baseConfig');
  // Files without a folder: no base config to find, but a refusal that needs one says what to pass (the core's rule).
  let baseConfigHint = null;
  if ((options.to === 'gguf' || options.to === 'gguf-names') && baseConfig === null && config !== null) {
    const module = await getModule();
    const text = typeof config === 'string' ? config : new TextDecoder().decode(config);
    const choice = module.chooseBaseConfig(null, text, false, false, '');
    if (choice.ok) baseConfigHint = choice.hint;
  }
  return {
    weights,
    weightsName: String(input.weightsName ?? fileName ?? DEFAULT_WEIGHTS_NAME),
    config,
    baseConfig,
    baseConfigNote: null,
    baseConfigHint,
    close: async () => {},
  };
}

/** Runs `fn` on the gathered inputs, releasing them afterwards. */
async function withInputs(input, options, fn) {
  const files = await gather(input, options);
  try {
    return await fn(files);
  } finally {
    await files.close();
  }
}

/**
 * Reads a LoRA adapter (PEFT, mlx-lm, kohya or llama.cpp names) and describes it: the fields of
 * `peft-bridge adapter-info --json`, without `ok`.
 */
export async function adapterInfo(input, options = {}) {
  const r = await withInputs(input, options, (files) =>
    runAdapterJob('adapter-info', files, jobKeys({ ...options, to: null, dryRun: false }, files), () => noOutput, {
      signal: options.signal,
    }),
  );
  const { ok, ...info } = JSON.parse(r.summary);
  return info;
}

/** The sink of a job that writes nothing. */
const noOutput = {
  write() {
    throw new SafetensorsError('InvalidArgument', 'the job wrote to an output it has not');
  },
};

/**
 * Translates a LoRA adapter into another convention: the plan (every input tensor, mapped or rejected), the
 * notes, and the output files (none with `dryRun`).
 */
export async function translateAdapter(input, options = {}) {
  if (!options || typeof options !== 'object' || options.to === undefined) {
    throw new TypeError('peft-bridge: translateAdapter needs options.to (peft, mlx, kohya, gguf-names or gguf)');
  }
  // Each output's bytes, in order of offset: the weights file, then the config file.
  const parts = [[], []];
  const sink = { write: (output, _at, bytes) => void parts[output].push(bytes) };
  const r = await withInputs(input, options, (files) =>
    runAdapterJob('translate', files, jobKeys(options, files), () => sink, { signal: options.signal }),
  );
  const j = JSON.parse(r.summary);
  return {
    from: j.from,
    to: j.to,
    plan: j.tensors,
    mapped: j.mapped,
    rejected: j.rejected,
    notes: j.notes,
    files: options.dryRun ? [] : r.names.map((name, i) => ({ name, bytes: concat(parts[i]) ?? new Uint8Array(0) })),
  };
}
