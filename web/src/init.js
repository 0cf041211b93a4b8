// Loading the WebAssembly module: once, memoized, from bytes, a precompiled module or the .wasm file
// next to this package. The module object stays private to the package. What the package holds is the guarded
// view of it (module-guard.js): after a trap inside any call, this instance is forgotten and the next call
// instantiates a fresh one from the same compiled module.
import createPeftBridge from '../dist/peft_bridge_wasm.mjs';
import { SafetensorsError } from './errors.js';
import { guardModule } from './module-guard.js';

const isNode = typeof process === 'object' && process !== null && typeof process.versions?.node === 'string';

/** @type {Promise<any> | null} */
let loading = null;
/** @type {any} */
let loaded = null;
/** @type {WebAssembly.Module | null} */
let compiled = null;

/**
 * Loads and instantiates the WebAssembly module. Memoized: later calls return the first call's promise
 * (their options are ignored). Every other entry point calls it on demand, so calling it yourself is only
 * needed to supply the module, to fail early, or to use {@link createWriter}'s synchronous parts.
 *
 * - `wasmModule`: a precompiled `WebAssembly.Module` (edge runtimes such as Cloudflare Workers refuse to
 *   compile wasm at run time; import the .wasm there and pass the module).
 * - `wasmBinary`: the .wasm bytes.
 * - `wasmUrl`: where to fetch the .wasm from.
 * - none: as the package entry the runtime resolved says (its export conditions): `node` reads
 *   `dist/peft_bridge_wasm.wasm` with `fs`, `browser` fetches it from the URL resolved against `import.meta.url`,
 *   `workerd` uses the module it imports; the plain `src/index.js` reads with `fs` under Node, else fetches.
 *
 * @param {{wasmModule?: WebAssembly.Module, wasmBinary?: ArrayBuffer | ArrayBufferView, wasmUrl?: string | URL}} [options]
 * @returns {Promise<void>}
 */
export function init(options = {}) {
  if (!loading) {
    const attempt = (loading = load(options).then(
      (raw) => {
        const guard = guardModule(raw, (trap) => {
          traps.set(guard.module, trap);
          // Trapped: forget this instance (if it is still the current one); the next call loads a fresh one.
          if (loading === attempt) {
            loading = null;
            loaded = null;
          }
          discarded += 1;
        });
        loaded = guard.module;
        return loaded;
      },
      (error) => {
        if (loading === attempt) loading = null; // a failed load may be retried (e.g. with other options)
        throw error;
      },
    ));
  }
  return loading.then(() => undefined);
}

/** How many instances were discarded after a trap (tests and diagnostics). Internal. */
let discarded = 0;
export const discardedInstances = () => discarded;

/** Discarded instance (its guarded view) → the trap that discarded it. */
const traps = new WeakMap();
/** The trap that discarded `module` (a getModule() result), or null while it is live. Internal. */
export const trapOf = (module) => traps.get(module) ?? null;

/** Options for an init() called without any: set by the environment's entry (src/node.js, browser.js, workerd.js). */
let defaults = null;

/**
 * Sets how a bare init() (the one every entry point runs on demand) finds the .wasm: `get()` returns (or
 * resolves to) init options. Internal: the package's export conditions choose the entry that calls it.
 * @param {() => ({wasmModule?: WebAssembly.Module, wasmBinary?: ArrayBuffer | ArrayBufferView, wasmUrl?: string | URL} | Promise<object>)} get
 */
export function setDefaultWasm(get) {
  defaults = get;
}

/** The instantiated module, loading it first if needed. Internal. */
export async function getModule() {
  if (loaded) return loaded;
  await init();
  return loaded ?? getModule(); // discarded meanwhile (a trap in another caller's call): load again
}

/** The compiled `WebAssembly.Module` the loaded module was instantiated from (for workers), else null. Internal. */
export function compiledModule() {
  return compiled;
}

/** The module if it is already loaded, else null. Internal. */
export function loadedModule() {
  return loaded;
}

async function load(options) {
  const given = options.wasmModule !== undefined || options.wasmBinary !== undefined || options.wasmUrl !== undefined;
  // After a discarded instance, a bare init() instantiates the module compiled the first time (no new read, fetch
  // or compilation).
  const chosen = given ? options : compiled ? { wasmModule: compiled } : defaults ? await defaults() : options;
  const instantiate = await instantiator(chosen);
  let failed;
  const failure = new Promise((_, reject) => {
    failed = reject;
  });
  const factory = createPeftBridge({
    // Emscripten 3.1.6's own loader cannot fetch a file path under Node 20 (global fetch) and compiles from
    // bytes; this hook makes every runtime go through one path that also accepts a precompiled module.
    instantiateWasm(imports, receive) {
      instantiate(imports).then(({ instance, module }) => {
        compiled = module;
        receive(instance, module);
      }, failed);
      return {};
    },
    // Never used to fetch (instantiateWasm above does that), but without it the glue resolves the .wasm against
    // import.meta.url, which workerd leaves undefined: `new URL(name, undefined)` would throw there.
    locateFile: (path) => path,
    print: (text) => console.log(text),
    printErr: (text) => console.warn(text),
    onAbort: (what) => failed(new Error(`peft-bridge: WebAssembly module aborted: ${what}`)),
  });
  return Promise.race([factory, failure]);
}

async function instantiator(options) {
  const { wasmModule, wasmBinary, wasmUrl } = options;
  if (wasmModule !== undefined) {
    if (!(wasmModule instanceof WebAssembly.Module))
      throw new TypeError('init: wasmModule must be a WebAssembly.Module');
    return async (imports) => ({ instance: await WebAssembly.instantiate(wasmModule, imports), module: wasmModule });
  }
  if (wasmBinary !== undefined) {
    const bytes = toBufferSource(wasmBinary);
    return (imports) => WebAssembly.instantiate(bytes, imports);
  }
  const url =
    wasmUrl !== undefined
      ? new URL(String(wasmUrl), import.meta.url)
      : new URL('../dist/peft_bridge_wasm.wasm', import.meta.url);
  if (isNode && url.protocol === 'file:') {
    // A specifier held in a variable: bundlers for browsers and workers (esbuild in wrangler, Vite, webpack) then
    // neither try to resolve node:fs nor warn about it; only Node reaches this line.
    const fsModule = 'node:fs/promises';
    const { readFile } = await import(/* webpackIgnore: true */ /* @vite-ignore */ fsModule);
    const bytes = await readFile(url);
    return (imports) => WebAssembly.instantiate(bytes, imports);
  }
  return async (imports) => {
    if (typeof WebAssembly.instantiateStreaming === 'function') {
      try {
        return await WebAssembly.instantiateStreaming(fetch(url), imports);
      } catch {
        // E.g. a server without the application/wasm type: fetch again and compile from bytes.
      }
    }
    const res = await fetch(url);
    if (!res.ok)
      throw new SafetensorsError('IoError', `cannot fetch \`${url}\`: HTTP ${res.status} ${res.statusText}`.trimEnd());
    return WebAssembly.instantiate(await res.arrayBuffer(), imports);
  };
}

function toBufferSource(value) {
  if (value instanceof ArrayBuffer) return value;
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  throw new TypeError('init: wasmBinary must be an ArrayBuffer or a typed array');
}
