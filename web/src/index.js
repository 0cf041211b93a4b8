// peft-bridge: streaming safetensors inspection, validation, writing and dtype conversion in WebAssembly, and
// LoRA adapter reading and translation.
// The WebAssembly module and its heap stay private; every entry point takes and returns plain JS values,
// Uint8Array copies and web streams.
export { init } from './init.js';
export { SafetensorsError } from './errors.js';
export { inspect } from './ops/inspect.js';
export { readTensor } from './ops/read-tensor.js';
export { inspectRepo } from './ops/inspect-repo.js';
export { hubUrl, openRemote } from './remote/hub.js';
export { readSafetensors } from './io/reader.js';
export { createWriter, writeSafetensors, SafetensorsWriter } from './io/writer.js';
export { convert } from './ops/convert.js';
export { adapterInfo, translateAdapter } from './ops/adapter.js';
export { listRepoFiles } from './ops/adapter-dir.js';
export { progressTime } from './progress-text.js';
export { combineAdapters } from './ops/combine.js';
export { createAdapter } from './ops/create.js';
export { extractAdapter } from './ops/extract.js';
export { createMergeStream, mergeShards, planMerge } from './ops/merge.js';
export { mergeInWorkers } from './ops/merge-workers.js';
export { mergeRemote, mergeRemoteIndex, mergeRemoteShard, planRemote } from './remote/remote.js';
export { saveStreams } from './browser/save-streams.js';
export { pushToHub } from './remote/push.js';
export { AdapterCache, createAdapterCache } from './edge/adapter-cache.js';
