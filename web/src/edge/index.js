// The package's `peft-bridge/edge` entry: what an edge worker serving adapters adds to the root API - the adapter
// cache, who may spend the worker's Hub token (edge-auth.js), the status an error answers with, and inOwnRequest for
// work shared between requests. Under the "workerd" condition this is reached through edge/workerd.js.
export { AdapterCache, createAdapterCache, inOwnRequest } from './adapter-cache.js';
export { workerEndpoint, workerErrorStatus, workerHubAccess } from './edge-auth.js';
