// The WebAssembly module of the "workerd" entries (workerd.js, edge/workerd.js): workers may not compile
// WebAssembly at run time, so the .wasm is imported as a module compiled at deploy time (wrangler and workerd's
// CompiledWasm modules).
import wasmModule from '../dist/peft_bridge_wasm.wasm';
import { setDefaultWasm } from './init.js';

setDefaultWasm(() => ({ wasmModule }));
