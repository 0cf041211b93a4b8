// combineAdapters(): several LoRA adapters into one, as PEFT's add_weighted_adapter does, exact by default
// (src/compose, docs/combine.md). The core reads each input's header and tiny tensors first, plans, then asks for
// each module's factors from every input that has it, by range, and writes the combined weights file module by
// module; this file only moves the bytes it asks for and unpacks the result.
import { errorFromHandle, throwIfAborted } from '../errors.js';
import { NativeHandle, concat } from '../handles.js';
import { gather, readAdapterHeader, withBytes } from './adapter.js';
import { openAdapterSource, readRange } from './adapter-source.js';
import { DEFAULT_READ_SIZE } from '../io/sources.js';
import { getModule } from '../init.js';
import { namingTablesOption } from './naming-tables.js';

const HEADER_STEPS = { length: 'adapterHeaderLength', header: 'setAdapterHeader', ranges: 'adapterInlineRanges' };

/** The JSON options the core's CombineJob takes (app::CombineOptionsFromJson, plus the reading options). */
function jobOptions(options) {
  const typed = options.combineOptionsJson
    ? JSON.parse(options.combineOptionsJson)
    : {
        method: options.method ?? null,
        weights: options.weights ?? null,
        rank: options.rank ?? null,
        density: options.density ?? null,
        majoritySign: options.majoritySign ?? null,
        svdClamp: options.svdClamp ?? null,
        seed: options.seed ?? null,
        peftCompat: options.peftCompat ?? null,
        dtype: options.dtype ?? null,
        allowPartial: options.allowPartial ?? null,
      };
  return JSON.stringify({
    ...typed,
    from: options.from ?? null,
    arch: options.arch ?? null,
    namingTables: namingTablesOption(options.namingTables),
    strict: !!options.strict,
    dryRun: !!options.dryRun,
  });
}

/**
 * Runs the core's combine on inputs opened one after another by `openers` (async functions, each giving
 * {weights, weightsName, config, baseConfig, close()}: an input is opened only once the previous one was read,
 * so failures come in the native CLI's order), named by `labels`.
 * Returns {plan, text, json, weightsName, config, writeWeights(onBytes, onRead), result(), close()}: the plan is
 * made; the weights are written by writeWeights (onBytes gets the file's bytes in order, onRead the count of input
 * bytes read so far), after which result() has the outcome. Internal (the npm CLI and combineAdapters).
 */
export async function openCombine(openers, labels, options) {
  const module = await getModule();
  const { signal } = options;
  const job = new NativeHandle(module, new module.CombineJob(jobOptions(options)));
  const sources = [];
  const files = [];
  const close = async () => {
    job.close();
    for (const src of sources) await src.close();
    for (const f of files) await f.close();
  };
  const check = (ok) => {
    if (!ok) throw errorFromHandle(job.handle);
  };
  try {
    check(job.handle.ok());
    for (let i = 0; i < openers.length; ++i) {
      files.push(await openers[i]());
      const src = await openAdapterSource(files[i].weights, signal);
      sources.push(src);
      const inline = await readAdapterHeader(job, src, files[i].weightsName, HEADER_STEPS, signal);
      check(withBytes(job, 'addInput', inline, labels[i], files[i].weightsName, files[i].config, files[i].baseConfig));
    }
    check(job.handle.plan());
    const writeWeights = async (onBytes, onRead = null) => {
      const head = job.call('beginWrite');
      if (head) onBytes(head);
      let supplied = 0;
      for (;;) {
        const needs = JSON.parse(job.handle.needs());
        if (needs.length === 0) break;
        for (const [input, begin, end] of needs) {
          for (let pos = begin; pos < end;) {
            throwIfAborted(signal);
            const n = Math.min(DEFAULT_READ_SIZE, end - pos);
            job.inputToBytes('supply', await readRange(sources[input], pos, n, signal), onBytes);
            pos += n;
            supplied += n;
            if (onRead) await onRead(supplied);
          }
        }
      }
      const tail = job.call('finishWrite');
      if (tail) onBytes(tail);
    };
    const result = () => {
      const r = job.handle.result();
      return { ...r, config: r.config ? { name: r.config.name, bytes: r.config.bytes } : null };
    };
    return { ...result(), writeWeights, result, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** A name for input `i` in messages: the path or URL given, the repo, or "adapter i+1". */
function labelOf(input, i) {
  if (typeof input === 'string') return input;
  if (typeof URL !== 'undefined' && input instanceof URL) return String(input);
  if (input && typeof input === 'object' && typeof input.repo === 'string')
    return `hf://${input.repo}${input.subfolder ? `/${input.subfolder}` : ''}`;
  if (input && typeof input === 'object' && typeof input.label === 'string') return input.label;
  return `adapter ${i + 1}`;
}

/**
 * Combines LoRA adapters into one PEFT adapter: the fields of `peft-bridge combine --json` (method, rank, dtype,
 * modules with each one's relative error against the exact weighted sum, notes...), and the output files (none
 * with `dryRun`). Each input is what translateAdapter takes.
 */
export async function combineAdapters(inputs, options = {}) {
  if (!Array.isArray(inputs) || inputs.length === 0)
    throw new TypeError('peft-bridge: combineAdapters needs an array of adapters');
  if (!options || typeof options !== 'object')
    throw new TypeError('peft-bridge: combineAdapters options must be an object');
  const job = await openCombine(
    inputs.map((input) => () => gather(input, options)),
    inputs.map(labelOf),
    options,
  );
  try {
    const files = [];
    if (!options.dryRun) {
      const parts = [];
      await job.writeWeights((bytes) => parts.push(bytes));
      files.push({ name: job.weightsName, bytes: concat(parts) ?? new Uint8Array(0) });
      if (job.config) files.push(job.config);
    }
    const { ok, dryRun, ...summary } = JSON.parse(job.result().json);
    return { ...summary, files };
  } finally {
    await job.close();
  }
}
