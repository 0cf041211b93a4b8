// Writing safetensors: the header is planned from names, dtypes and shapes alone, emitted first, and tensor
// bytes then stream through in the planned order.
import { SafetensorsError, abortReason, throwIfAborted } from '../errors.js';
import { NativeHandle, disposeSymbol } from '../handles.js';
import { getModule } from '../init.js';
import { cancelSource, openSource } from './sources.js';

const QUEUE_BYTES = 16 << 20; // readable-side buffering before write() waits for the consumer

function specJson(spec) {
  if (!spec || typeof spec !== 'object' || !Array.isArray(spec.tensors))
    throw new TypeError('peft-bridge: expected {tensors: [{name, dtype, shape}], metadata?, order?}');
  const order = spec.order ?? 'reference';
  return JSON.stringify({
    tensors: spec.tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape })),
    metadata: spec.metadata ?? null,
    order,
  });
}

/** Creates the native writer and reads its plan back as the public layout. */
function plan(module, spec) {
  const handle = new NativeHandle(module, new module.Writer(specJson(spec)), spec.windowSize);
  const native = handle.handle;
  if (!native.ok()) {
    try {
      handle.call('ok'); // throws the planning error
    } finally {
      handle.close();
    }
  }
  const tensors = [];
  for (let i = 0, n = native.plannedCount(); i < n; ++i) {
    const index = native.plannedInput(i);
    const t = spec.tensors[index];
    const begin = native.plannedBegin(i);
    const end = native.plannedEnd(i);
    tensors.push({
      name: t.name,
      index,
      dtype: t.dtype,
      shape: [...t.shape],
      dataOffsets: [begin, end],
      byteLength: end - begin,
    });
  }
  const headerSize = native.headerSize();
  const dataSize = native.dataSize();
  const layout = {
    order: spec.order ?? 'reference',
    headerSize: headerSize - 8, // N, as in the file's prefix and in inspect()
    dataSize,
    totalSize: headerSize + dataSize,
    tensors,
  };
  return { handle, layout };
}

/**
 * A push writer: write the tensors' bytes (concatenated in `layout.tensors` order, in chunks of any size)
 * and read the file from `readable`.
 */
export class SafetensorsWriter {
  /** @internal */
  constructor(handle, layout) {
    this.layout = layout;
    this._handle = handle;
    this._waiters = []; // writes waiting for room on the readable side: {resolve, reject}
    this._written = 0; // dataWritten(), kept when the native writer is freed
    this._error = null;
    this._closed = false;
    this.readable = new ReadableStream(
      {
        start: (controller) => {
          this._controller = controller;
        },
        pull: () => {
          this._settleWaiters((w) => w.resolve());
        },
        cancel: (reason) => {
          this._fail(reason ?? new Error('peft-bridge: readable was cancelled'), false);
        },
      },
      { highWaterMark: QUEUE_BYTES, size: (chunk) => chunk.byteLength },
    );
    this._enqueue(handle.call('begin'));
  }

  /** Bytes of tensor data written so far. */
  get bytesWritten() {
    return this._handle.closed ? this._written : this._handle.handle.dataWritten();
  }

  /**
   * Appends tensor bytes (copied; the caller may reuse `bytes` once the promise resolves). Resolves when the
   * readable side has room for more. Rejects with SafetensorsError past the planned size.
   * @param {Uint8Array | ArrayBuffer | ArrayBufferView} bytes
   */
  async write(bytes) {
    this._check();
    const view =
      bytes instanceof Uint8Array
        ? bytes
        : ArrayBuffer.isView(bytes)
          ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)
          : new Uint8Array(bytes);
    try {
      this._handle.inputToBytes('write', view, (out) => this._enqueue(out));
    } catch (error) {
      this._fail(error, true);
      throw error;
    }
    // Every pending write waits here (concurrent writes included); each is released by pull(), rejected when
    // the writer fails or is aborted, and resolved once close() has ended the file.
    while (!this._error && !this._closed && this._controller.desiredSize <= 0) {
      await new Promise((resolve, reject) => {
        this._waiters.push({ resolve, reject });
      });
    }
    if (this._error) throw this._error;
  }

  /** Checks that every planned byte was written, ends `readable` and frees the native writer. */
  async close() {
    if (this._closed) return;
    this._check();
    try {
      this._handle.call('finish');
    } catch (error) {
      this._fail(error, true);
      throw error;
    }
    this._closed = true;
    this._release();
    this._controller.close();
    this._settleWaiters((w) => w.resolve());
  }

  /** Abandons the file: `readable` errors with `reason` and the native writer is freed. */
  abort(reason) {
    this._fail(reason ?? abortReason({}), true);
  }

  [disposeSymbol]() {
    if (!this._closed && !this._error) this.abort(new Error('peft-bridge: writer disposed before close()'));
    this._release();
  }

  _check() {
    if (this._error) throw this._error;
    if (this._closed) throw new Error('peft-bridge: writer is closed');
  }

  _enqueue(bytes) {
    if (bytes) this._controller.enqueue(bytes);
  }

  _fail(error, errorReadable) {
    if (this._error || this._closed) return;
    this._error = error;
    this._release();
    if (errorReadable) {
      try {
        this._controller.error(error);
      } catch {
        // already closed
      }
    }
    this._settleWaiters((w) => w.reject(error));
  }

  /** Frees the native writer, keeping the count of bytes it accepted for bytesWritten. */
  _release() {
    if (this._handle.closed) return;
    this._written = this._handle.handle.dataWritten();
    this._handle.close();
  }

  _settleWaiters(settle) {
    const waiters = this._waiters;
    this._waiters = [];
    for (const w of waiters) settle(w);
  }
}

/**
 * Plans a file and returns a push writer for it. The header is emitted at once; `layout` gives the write order
 * and offsets. `order: 'reference'` (the default) sorts as Python safetensors does (dtype descending, then
 * name), so files it wrote re-serialize to identical bytes; `'input'` keeps the given order.
 * @param {{tensors: {name: string, dtype: string, shape: number[]}[], metadata?: Record<string, string> | null, order?: 'reference' | 'input'}} spec
 */
export async function createWriter(spec) {
  const module = await getModule();
  const { handle, layout } = plan(module, spec);
  return new SafetensorsWriter(handle, layout);
}

/**
 * Writes a whole file from tensors that carry their data, as a ReadableStream (pulled: data sources are read
 * only as fast as the stream is consumed). Each tensor's `data` must hold exactly its byte length.
 * @param {{tensors: {name: string, dtype: string, shape: number[], data?: any}[], metadata?: Record<string, string> | null, order?: 'reference' | 'input', signal?: AbortSignal}} spec
 * @returns {ReadableStream<Uint8Array>}
 */
export function writeSafetensors(spec) {
  const { signal } = spec;
  let handle = null;
  let layout = null;
  let current = -1; // index into layout.tensors
  let src = null;
  let got = 0;
  let onAbort = null;
  let cleaned = false;
  // Frees the writer and releases every data source: the open one, and, when the file was not finished
  // (`reason` given), the streams and iterators of the tensors not reached yet, so none is left open.
  const cleanup = async (reason) => {
    if (cleaned) return;
    cleaned = true;
    if (onAbort) signal?.removeEventListener('abort', onAbort);
    handle?.close();
    const s = src;
    src = null;
    const pending = [s?.close(reason)];
    if (reason !== undefined) {
      const unopened = layout
        ? layout.tensors.slice(current + 1).map((t) => spec.tensors[t.index])
        : (spec.tensors ?? []);
      for (const t of unopened) pending.push(cancelSource(t?.data, reason));
    }
    await Promise.all(pending);
  };
  let started = null; // start()'s work: pull() waits for it (workerd may pull before an async start() settles)
  return new ReadableStream({
    start(controller) {
      started = startWriting(controller);
      return started;
    },
    async pull(controller) {
      await started;
      return pullWriting(controller);
    },
    async cancel(reason) {
      await cleanup(reason ?? new Error('peft-bridge: stream was cancelled'));
    },
  });

  async function startWriting(controller) {
    try {
      throwIfAborted(signal);
      const module = await getModule();
      ({ handle, layout } = plan(module, spec));
      onAbort = () => {
        const reason = abortReason(signal);
        controller.error(reason);
        cleanup(reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const header = handle.call('begin');
      if (header) controller.enqueue(header);
    } catch (error) {
      await cleanup(error);
      throw error;
    }
  }

  async function pullWriting(controller) {
    try {
      for (;;) {
        throwIfAborted(signal);
        if (src === null) {
          if (++current >= layout.tensors.length) {
            handle.call('finish');
            await cleanup();
            controller.close();
            return;
          }
          const t = layout.tensors[current];
          const data = spec.tensors[t.index].data;
          if (data === undefined || data === null) {
            if (t.byteLength !== 0) throw lengthError(t, 0);
            continue;
          }
          src = await openSource(data, { signal });
          got = 0;
        }
        const t = layout.tensors[current];
        const chunk = await src.next();
        if (chunk === null) {
          await src.close();
          src = null;
          if (got !== t.byteLength) throw lengthError(t, got);
          continue;
        }
        got += chunk.length;
        if (got > t.byteLength) throw lengthError(t, got, true);
        if (handle.inputToBytes('write', chunk, (out) => controller.enqueue(out))) return;
      }
    } catch (error) {
      await cleanup(error);
      throw error;
    }
  }
}

function lengthError(t, got, atLeast = false) {
  return new SafetensorsError(
    'InvalidArgument',
    `tensor \`${t.name}\`: data holds ${atLeast ? 'at least ' : ''}${got} bytes but ${t.dtype} ${JSON.stringify(t.shape)} needs ${t.byteLength}`,
    { tensor: t.name },
  );
}
