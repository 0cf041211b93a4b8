// The Web Worker behind mergeInWorkers (merge-workers.js): its own instance of the module (compiled once by the
// page, sent here), the caller's merge planned again from the same inputs, then the shards it is given merged one
// at a time, each output chunk produced only when the page asks for it and sent back transferred (no copy).
//
// Messages in:  {type: 'init', wasmModule, job}, {type: 'merge', i}, {type: 'pull', i}, {type: 'cancel', i}.
// Messages out: {type: 'chunk', i, bytes, bytesIn}, {type: 'end', i, bytesIn}, {type: 'error', error}.
// Each message is handled after the previous one has finished, so the page may send them without waiting.
import { errorToMessage } from '../errors.js';
import { init } from '../init.js';
import { planShards } from './merge.js';
import { openSource } from '../io/sources.js';

/** {session, plan, random}: the job as planned here. */
let planned = null;
/** The shard being merged: {i, chunks (MergeSession.mergeShard's generator), src, counts}. */
let current = null;
let queue = Promise.resolve();

const post = (message, transfer = []) => self.postMessage(message, transfer);

async function start({ wasmModule, job }) {
  await init({ wasmModule });
  const base = { index: job.index, config: job.config, open: (name) => job.sources[name] };
  planned = await planShards({ ...job.options, base, adapter: job.adapter });
}

async function merge(i) {
  const shard = planned.plan.shards[i];
  const source = planned.random.get(shard.name);
  const src = await openSource(source);
  const counts = { bytesIn: 0 };
  current = { i, chunks: planned.session.mergeShard(i, shard, src, undefined, counts), src, counts };
}

async function pull(i) {
  if (current?.i !== i) throw new Error(`peft-bridge: merge worker asked for shard ${i}, merging ${current?.i}`);
  const { done, value } = await current.chunks.next();
  const { bytesIn } = current.counts;
  if (done) {
    await current.src.close();
    current = null;
    post({ type: 'end', i, bytesIn });
    return;
  }
  // A chunk that shares its buffer (a view of a larger read or of the caller's bytes) is copied first: transferring
  // its buffer would take the rest away from its owner.
  const bytes = value.byteOffset === 0 && value.byteLength === value.buffer.byteLength ? value : value.slice();
  post({ type: 'chunk', i, bytes, bytesIn }, [bytes.buffer]);
}

async function cancel(i) {
  if (current?.i !== i) return;
  const { chunks, src } = current;
  current = null;
  await chunks.return?.();
  await src.close();
}

const handlers = { init: start, merge: ({ i }) => merge(i), pull: ({ i }) => pull(i), cancel: ({ i }) => cancel(i) };

self.onmessage = ({ data }) => {
  queue = queue
    .then(() => handlers[data.type](data))
    .catch((error) => post({ type: 'error', error: errorToMessage(error) }));
};
