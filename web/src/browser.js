// The package's "browser" entry: the .wasm is fetched (compiled while it downloads) from beside the package.
// The literal `new URL('…', import.meta.url)` is the pattern bundlers (Vite, webpack, esbuild) copy as an asset.
import { setDefaultWasm } from './init.js';

setDefaultWasm(() => ({ wasmUrl: new URL('../dist/peft_bridge_wasm.wasm', import.meta.url) }));

export * from './index.js';
