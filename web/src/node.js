// The package's "node" entry: the .wasm is read from the package with fs (Node 20's fetch cannot read file: URLs).
import { readFile } from 'node:fs/promises';
import { setDefaultWasm } from './init.js';

setDefaultWasm(async () => ({ wasmBinary: await readFile(new URL('../dist/peft_bridge_wasm.wasm', import.meta.url)) }));

export * from './index.js';
