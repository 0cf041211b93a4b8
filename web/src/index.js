// peft-bridge: streaming safetensors inspection, validation, writing and dtype conversion in WebAssembly, and
// LoRA adapter reading and translation.
// The WebAssembly module and its heap stay private; every entry point takes and returns plain JS values,
// Uint8Array copies and web streams.
export { init } from './init.js';
export { SafetensorsError } from './errors.js';
export { inspect } from './inspect.js';
export { hubUrl, inspectRepo, openRemote, readTensor } from './hub.js';
export { readSafetensors } from './reader.js';
export { createWriter, writeSafetensors, SafetensorsWriter } from './writer.js';
export { convert } from './convert.js';
export { adapterInfo, translateAdapter } from './adapter.js';
export { listRepoFiles } from './adapter-dir.js';
export { progressTime } from './progress-text.js';
export { combineAdapters } from './combine.js';
export { createAdapter } from './create.js';
export { extractAdapter } from './extract.js';
export { createMergeStream, mergeShards, planMerge } from './merge.js';
export { mergeInWorkers } from './merge-workers.js';
export { mergeRemote, mergeRemoteIndex, mergeRemoteShard, planRemote, saveStreams } from './remote.js';
export { pushToHub } from './push.js';
export { workerEndpoint, workerErrorStatus, workerHubAccess } from './edge-auth.js';
export { AdapterCache, createAdapterCache, inOwnRequest } from './adapter-cache.js';
