// The `peft-bridge/edge` entry under the "workerd" condition: the WebAssembly module is the one compiled at deploy
// time (workerd-wasm.js), as for the root entry, so a worker importing only this entry needs no init() either.
import '../workerd-wasm.js';

export * from './index.js';
