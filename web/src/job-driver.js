// The one JS driver of jobs (docs/jobs.md): a job (wasm/job_bindings.cc over the C++ jobs, job/job.h) says what
// to read, forward, write, tell and report, one step at a time; run() carries the bytes between the caller's
// inputs and sink and nothing more, so a command's sequence is written once, in C++. Internal.
import { SafetensorsError, abortReason, errorFromHandle, throwIfAborted } from './errors.js';
import { NativeHandle } from './handles.js';
import { getModule } from './init.js';
import { raceAbort } from './io/sources.js';

/**
 * The job `command` with its options (wasm/job_bindings.cc lists them), as a handle run() takes. Throws the
 * job's refusal of its options. Close it (close()) when done.
 * @param {string} command
 * @param {object} options
 * @param {{windowSize?: number}} [how]
 */
export async function openJob(command, options, { windowSize } = {}) {
  const module = await getModule();
  const job = new NativeHandle(module, new module.JobHandle(command, JSON.stringify(options)), windowSize);
  if (!job.handle.ok()) {
    const error = errorFromHandle(job.handle);
    job.close();
    throw error;
  }
  return job;
}

// Reads of a source as openSource gives it: a random-access one at any offset (short at its end), a stream
// forward only, a prefix of what is asked at a time (the job asks again for the rest).
function reader(source) {
  if (source.random)
    return async (begin, n) => {
      if (begin >= source.size) return new Uint8Array(0);
      return source.read(begin, Math.min(n, source.size - begin));
    };
  let pos = 0;
  let pending = new Uint8Array(0);
  return async (begin, n) => {
    if (begin < pos) throw new SafetensorsError('InvalidArgument', `a stream cannot be read again at byte ${begin}`);
    for (;;) {
      if (pending.length === 0) {
        const chunk = await source.next();
        if (chunk === null) return new Uint8Array(0);
        pending = chunk;
      }
      const skip = Math.min(begin - pos, pending.length);
      pending = pending.subarray(skip);
      pos += skip;
      if (pos === begin && pending.length > 0) break;
    }
    const bytes = pending.subarray(0, n);
    pending = pending.subarray(bytes.length);
    pos += bytes.length;
    return bytes;
  };
}

function supply(job, bytes) {
  job.fillWindow(bytes);
  if (!job.handle.supply(bytes.length)) throw errorFromHandle(job.handle);
}

/**
 * Runs `job` (openJob's) to its end: reads `inputs[i]` (sources as openSource gives them) as the job asks, hands
 * its bytes to `sink.write(output, at, bytes, forwarded)` (awaited; a stream sink gets them in order; `forwarded`:
 * the bytes are the input's own, possibly a view of the caller's memory), and at the end calls
 * `sink.commit()`. On any error or abort, `sink.abort(reason)` is called (a sink that wrote files removes them)
 * and the error is thrown. An input the job never reads may be null. A message goes to `onMessage`, a warning
 * (a message for stderr) to `onWarning`.
 * @param {any} job
 * @param {any[]} inputs
 * @typedef {{
 *   write: (output: number, at: number, bytes: Uint8Array, forwarded?: boolean) => Promise<void> | void,
 *   commit?: () => Promise<void> | void,
 *   abort?: (reason: any) => Promise<void> | void,
 * }} JobSink
 * @typedef {{
 *   signal?: AbortSignal,
 *   onProgress?: (p: {input: number, done: number, total: number}) => void,
 *   onMessage?: (text: string) => Promise<void> | void,
 *   onWarning?: (text: string) => Promise<void> | void,
 * }} RunOptions
 * @param {JobSink} sink
 * @param {RunOptions} [options]
 */
export async function run(job, inputs, sink, { signal, onProgress, onMessage, onWarning } = {}) {
  const reads = inputs.map((source) => source && reader(source));
  // One write stays in flight while the next bytes are read: reading and writing overlap, as a pulled stream's
  // do. Writes still start in order, each once the one before it has finished.
  let inflight = null;
  const write = async (output, at, bytes, forwarded) => {
    if (inflight) await inflight;
    throwIfAborted(signal); // nothing starts after an abort
    inflight = Promise.resolve(sink.write(output, at, bytes, forwarded));
    inflight.catch(() => {}); // awaited before the next write, the commit or the abort
  };
  try {
    for (;;) {
      throwIfAborted(signal);
      const step = job.handle.next();
      if (step === null) throw errorFromHandle(job.handle);
      switch (step.kind) {
        case 'readHeader':
        case 'read': {
          if (!reads[step.input])
            throw new SafetensorsError('InvalidArgument', `the job read input ${step.input}, which it was not given`);
          const n = Math.min(job.windowSize, step.end - step.begin);
          const bytes = await raceAbort(reads[step.input](step.begin, n), signal);
          supply(job, bytes);
          break;
        }
        case 'forward':
          // No kernel copy here: the bytes pass through JS, one window at a time.
          for (let pos = step.begin; pos < step.end;) {
            const bytes = await raceAbort(reads[step.input](pos, Math.min(job.windowSize, step.end - pos)), signal);
            if (bytes.length === 0)
              throw new SafetensorsError('IoError', `source ended at byte ${pos}, inside a tensor`, { offset: pos });
            await write(step.output, step.at + (pos - step.begin), bytes, true);
            pos += bytes.length;
          }
          break;
        case 'write':
          // A copy, taken before anything else calls into the module.
          await write(step.output, step.at, job.module.HEAPU8.slice(step.ptr, step.ptr + step.length));
          break;
        case 'message':
          await (step.warning ? onWarning : onMessage)?.(step.text);
          break;
        case 'progress':
          onProgress?.({ input: step.input, done: step.done, total: step.total });
          break;
        case 'done':
          if (inflight) await inflight;
          throwIfAborted(signal);
          await sink.commit?.();
          return;
        default:
          throw new SafetensorsError('InvalidArgument', `unknown job step ${step.kind}`);
      }
    }
  } catch (error) {
    await inflight?.catch(() => {});
    await sink.abort?.(error);
    throw signal?.aborted ? abortReason(signal) : error;
  }
}
