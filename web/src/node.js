// The package's "node" entry: the .wasm is read from the package with fs (Node 20's fetch cannot read file: URLs),
// and a path or file: URL is a source everywhere one is taken (node-files.js).
import { readFile } from 'node:fs/promises';
import { setDefaultWasm } from './init.js';
import { nodeFiles } from './io/node-files.js';
import { nodeUpload } from './io/node-upload.js';
import { setUploadTransport } from './remote/push.js';
import { setLocalFiles } from './io/sources.js';

setDefaultWasm(async () => ({ wasmBinary: await readFile(new URL('../dist/peft_bridge_wasm.wasm', import.meta.url)) }));
setLocalFiles(nodeFiles);
setUploadTransport(nodeUpload);

export * from './index.js';
