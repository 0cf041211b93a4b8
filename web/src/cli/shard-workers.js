// The npm CLI's shards merged at once, as the native CLI's MergeShardsAtOnce merges them on threads: this thread
// and worker threads (shard-worker.js) each take the next shard in file order and merge it into its temporary
// file. A worker has its own instance of the module (compiled once, here) and plans the merge again from the
// main thread's own descriptor of the adapter, the shards (opened by path while read, each checked to be the file
// whose header was read: lazyInput) and the bytes of the index and configs it read, so it plans from exactly what
// this thread planned from (and checks that the plans agree). The outcome is the
// one-thread outcome: the same bytes, the
// error of the first failing shard in file order, the quantization errors in shard order.
import { Worker } from 'node:worker_threads';
import { errorFromMessage } from '../errors.js';
import { isRemote } from '../remote/hub.js';
import { compiledModule } from '../init.js';
import { CliFailure, joinPath } from './io.js';

/** One worker thread: started at once, ready once it has planned; merges one shard at a time. */
class ShardWorker {
  constructor(job) {
    this.worker = new Worker(new URL('./shard-worker.js', import.meta.url), { workerData: job });
    this.pending = null; // {resolve, reject, onProgress} of the shard being merged
    this.failure = null;
    this.ready = new Promise((resolve, reject) => {
      this.started = { resolve, reject };
    });
    this.ready.catch(() => {}); // awaited only if a shard is left for it; else its failure does not matter
    this.worker.on('message', (m) => this.receive(m));
    this.worker.on('error', (error) =>
      this.fail(new CliFailure('IoError', `merge worker failed: ${error?.message ?? error}`)),
    );
    this.worker.on('exit', () => this.fail(new CliFailure('IoError', 'merge worker stopped')));
  }

  receive(m) {
    if (m.type === 'ready') this.started.resolve();
    else if (m.type === 'progress') this.pending?.onProgress(m.bytes);
    else if (m.type === 'done') this.settle((p) => p.resolve(m.quantErrors));
    else if (m.type === 'failed') this.settle((p) => p.reject(errorFromMessage(m.error)));
    else if (m.type === 'error') this.fail(errorFromMessage(m.error));
  }

  settle(how) {
    const p = this.pending;
    this.pending = null;
    if (p) how(p);
  }

  fail(error) {
    if (this.failure) return;
    this.failure = error;
    this.started.reject(error);
    this.settle((p) => p.reject(error));
  }

  /** Merges shard `s` into `file` (a transaction's, open); resolves to its quantization errors (JSON). */
  merge(s, file, copied, onProgress) {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject, onProgress };
      this.worker.postMessage({ type: 'merge', s, fd: file.handle.fd, temp: file.temp, copied });
    });
  }

  stop() {
    this.failure ??= new CliFailure('IoError', 'merge worker stopped');
    return this.worker.terminate();
  }
}

export class ShardWorkers {
  /** Whether workers can plan this merge again: a local base, and a local adapter (or none). */
  static canMerge(base, o) {
    return !base.remote && (o.convert || !isRemote(o.adapter));
  }

  /** Starts `count` workers for the merge of options `o` that this thread planned as `plan`, from the shards
   * and adapter weights open in `base` and `adapterFiles` and the small files it read whole (`wholeReads`). */
  constructor(count, o, base, adapterFiles, plan, wholeReads = new Map()) {
    // The shards are opened by path as they are read, not held open (lazyInput): a worker accepts only the files
    // this thread read (device, inode, size), else fails saying the shard changed.
    const descriptors = {};
    const identities = {};
    base.names.forEach((name, i) => {
      if (base.inputs[i].identity) identities[joinPath(base.dir, name)] = base.inputs[i].identity;
    });
    if (adapterFiles) descriptors[adapterFiles.weightsPath] = adapterFiles.descriptor;
    const files = Object.fromEntries(wholeReads);
    const job = {
      wasmModule: compiledModule(),
      o,
      descriptors,
      files,
      identities,
      planned: JSON.stringify(plan.shards),
    };
    this.workers = [];
    try {
      for (let k = 0; k < count; ++k) this.workers.push(new ShardWorker(job));
    } catch (error) {
      for (const w of this.workers) w.stop(); // none may outlive a failed start (they hold this thread's files)
      throw error;
    }
  }

  /**
   * Merges shards 0..count-1, each once, in file order as threads come free: `there(worker, s)` (which calls
   * worker.merge) on each worker once it is ready, `here(s)` on this thread once all are. Once a shard has failed no
   * other starts (every shard before it has started already); resolves when all have stopped, or throws the
   * first failing shard's error, else a worker's own failure.
   */
  async mergeShards(count, here, there) {
    let next = 0;
    const errors = new Map();
    let failure = null;
    const take = () => (errors.size || failure || next >= count ? -1 : next++);
    const lane = async (run) => {
      for (let s; (s = take()) >= 0;) {
        try {
          await run(s);
        } catch (error) {
          errors.set(s, error);
        }
      }
    };
    const workerLane = async (worker) => {
      try {
        await worker.ready;
      } catch (error) {
        failure ??= error;
        return;
      }
      await lane((s) => there(worker, s));
    };
    // This thread starts once every worker has planned (or failed to): they then take the first shards, so
    // every thread gets one, even where this one would have merged them all while the workers were starting.
    const hereLane = async () => {
      await Promise.allSettled(this.workers.map((w) => w.ready));
      await lane(here);
    };
    await Promise.all([hereLane(), ...this.workers.map(workerLane)]);
    if (errors.size) throw errors.get(Math.min(...errors.keys()));
    if (failure && next < count) throw failure; // a worker that failed after every shard was merged changes nothing
  }

  /** Stops every worker (after mergeShards has settled, none is writing). */
  async stop() {
    await Promise.all(this.workers.map((w) => w.stop()));
  }
}
