// The package's "workerd" entry (Cloudflare Workers, wrangler): the .wasm is the module compiled at deploy time
// (workerd-wasm.js).
import './workerd-wasm.js';

export * from './index.js';
