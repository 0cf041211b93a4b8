// A worker thread of the npm CLI's merge (shard-workers.js): its own instance of the module (the main thread's
// compiled module), the merge planned again from the main thread's descriptors, then the shards it is handed
// merged into the temporary files the main thread created, one at a time.
//
// workerData:   {wasmModule, o (runMerge's options), descriptors ({path: fd}), identities ({path: {dev, ino, size}}:
//               the shards the main thread planned from), files ({path: bytes}: the index and
//               configs the main thread read), planned (the plan's shards, JSON)}.
// Messages in:  {type: 'merge', s, fd, temp, copied}.
// Messages out: {type: 'ready'} or {type: 'error', error}; then per shard {type: 'progress', bytes} (source bytes
//               moved since the last), and {type: 'done', s, quantErrors} or {type: 'failed', s, error}.
import { parentPort, workerData } from 'node:worker_threads';
import { errorToMessage } from '../errors.js';
import { init } from '../init.js';

const { wasmModule, o, descriptors, files, identities, planned } = workerData;
const post = (message) => parentPort.postMessage(message);

/** The merge planned here: {session, base, plan} and the modules the merge needs (loaded after the instance). */
async function start() {
  await init({ wasmModule });
  const { inheritDescriptors } = await import('./inputs.js');
  const { MergeSession } = await import('../ops/merge.js');
  const { openMergeInputs, shardMemory, writeShard } = await import('./merge-command.js');
  const { writeFileAt } = await import('./output.js');
  const { descriptorHandle } = await import('./descriptor-handle.js');
  const { CliFailure } = await import('./io.js');
  inheritDescriptors(descriptors, files, identities);
  const session = await MergeSession.create('Merger', o);
  const { base } = await openMergeInputs(session, o, []);
  const plan = session.plan();
  // Every input is what the main thread read: a plan that differs is a bug, not a changed file; still checked.
  if (JSON.stringify(plan.shards) !== planned)
    throw new CliFailure('IoError', 'a merge worker planned the merge otherwise than the main thread');
  const output = { writeAt: writeFileAt };
  const memory = shardMemory();
  return async ({ s, fd, temp, copied }) => {
    const counts = { bytesIn: 0 };
    let told = 0;
    const progress = {
      update(done) {
        post({ type: 'progress', bytes: done - told });
        told = done;
      },
    };
    const file = { temp, handle: descriptorHandle(fd) };
    const input = base.inputs[s];
    await input.acquire?.();
    try {
      await writeShard(session, s, plan.shards[s], input.source, output, file, counts, progress, memory, copied);
    } finally {
      await input.release?.();
    }
    progress.update(counts.bytesIn);
    return session.quantErrorsJson(s);
  };
}

let merge;
try {
  merge = await start();
  post({ type: 'ready' });
} catch (error) {
  post({ type: 'error', error: errorToMessage(error) });
}
// One shard at a time: the main thread sends the next only once this one is done or failed.
parentPort.on('message', async (m) => {
  if (!merge || m.type !== 'merge') return;
  try {
    post({ type: 'done', s: m.s, quantErrors: await merge(m) });
  } catch (error) {
    post({ type: 'failed', s: m.s, error: errorToMessage(error) });
  }
});
