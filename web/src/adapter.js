// LoRA adapters: adapterInfo() and translateAdapter(). Adapters are small (megabytes), so the weights are
// collected whole and handed to the core in one call; the core reads, translates and renders, this file only
// gathers the inputs and unpacks the result.
import { errorFromHandle, throwIfAborted } from './errors.js';
import { concat } from './handles.js';
import { getModule } from './init.js';
import { openSource } from './sources.js';

const DEFAULT_WEIGHTS_NAME = 'adapter_model.safetensors';

// Errors the core met while producing the output files rather than reading the adapter (error -> the weights
// file's name): the npm CLI reports them after creating OUT_DIR and the weights' temporary file, where the
// native CLI meets them.
const writeErrors = new WeakMap();

/** The weights file's name if `error` came from producing translate's output files, else undefined. Internal. */
export function writeErrorFile(error) {
  return writeErrors.get(error)?.name;
}

/** The translate JSON summary (the plan) of such an error, for the CLI's dropped-tensor check. Internal. */
export function writeErrorSummary(error) {
  return writeErrors.get(error)?.json;
}

/** A source's bytes, whole (one copy when it came in pieces). Internal. */
export async function collectBytes(source, signal) {
  throwIfAborted(signal);
  const src = openSource(source, { signal });
  try {
    const parts = [];
    for (let chunk; (chunk = await src.next()) !== null; ) {
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
  if (typeof value === 'object' && (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null)) {
    return JSON.stringify(value);
  }
  throw new TypeError(`peft-bridge: ${what} must be a string, a Uint8Array or a plain object`);
}

/** The JSON options the core's adapter calls take (wasm/bindings.cc: ParseAdapterOptions). Internal. */
export function optionsJson(options) {
  return JSON.stringify({
    from: options.from ?? null,
    to: options.to ?? null,
    arch: options.arch ?? null,
    strict: !!options.strict,
    oldPeft: !!options.oldPeft,
    dryRun: !!options.dryRun,
  });
}

/**
 * Calls one of the core's adapter functions with already gathered inputs; returns its result object
 * ({text, json, files?}) or throws the core's error (keeping its renderings for the CLI). Internal.
 * @param {'adapterInfo' | 'translateAdapter'} fn
 * @param {{weights: Uint8Array, weightsName: string, config: string | Uint8Array | null, baseConfig: string | Uint8Array | null}} files
 */
export async function callAdapter(fn, files, options) {
  const module = await getModule();
  const r = module[fn](files.weights, files.weightsName, files.config, files.baseConfig, optionsJson(options));
  if (r.ok) return r;
  const error = errorFromHandle({ errorJson: () => r.errorJson, errorText: () => r.errorText });
  if (r.stage === 'write') writeErrors.set(error, { name: r.weightsName, json: r.json });
  throw error;
}

async function gather(input, options) {
  if (!input || typeof input !== 'object' || input.weights === undefined) {
    throw new TypeError('peft-bridge: input must be an object with `weights`');
  }
  const { weights } = input;
  // A File knows its name; the core uses it in messages only.
  const fileName = typeof Blob !== 'undefined' && weights instanceof Blob && typeof weights.name === 'string' && weights.name ? weights.name : null;
  return {
    weights: await collectBytes(weights, options.signal),
    weightsName: String(input.weightsName ?? fileName ?? DEFAULT_WEIGHTS_NAME),
    config: configText(input.config, 'config'),
    baseConfig: configText(options.baseConfig ?? input.baseConfig, 'baseConfig'),
  };
}

/**
 * Reads a LoRA adapter (PEFT, mlx-lm, kohya or llama.cpp names) and describes it: the fields of
 * `peft-bridge adapter-info --json`, without `ok`.
 */
export async function adapterInfo(input, options = {}) {
  const r = await callAdapter('adapterInfo', await gather(input, options), { ...options, to: null, dryRun: false });
  const { ok, ...info } = JSON.parse(r.json);
  return info;
}

/**
 * Translates a LoRA adapter into another convention: the plan (every input tensor, mapped or rejected), the
 * notes, and the output files (none with `dryRun`).
 */
export async function translateAdapter(input, options = {}) {
  if (!options || typeof options !== 'object' || options.to === undefined) {
    throw new TypeError('peft-bridge: translateAdapter needs options.to (peft, mlx, kohya or gguf-names)');
  }
  const r = await callAdapter('translateAdapter', await gather(input, options), options);
  const j = JSON.parse(r.json);
  return { from: j.from, to: j.to, plan: j.tensors, mapped: j.mapped, rejected: j.rejected, notes: j.notes, files: r.files };
}
