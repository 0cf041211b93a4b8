// Writing safetensors: the header is planned from names, dtypes and shapes alone, emitted first, and tensor
// bytes then stream through in the planned order.
import { SafetensorsError, abortReason, throwIfAborted } from './errors.js';
import { NativeHandle, disposeSymbol } from './handles.js';
import { getModule } from './init.js';
import { openSource } from './sources.js';

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
    tensors.push({ name: t.name, index, dtype: t.dtype, shape: [...t.shape], dataOffsets: [begin, end], byteLength: end - begin });
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
    this._waiting = null;
    this._error = null;
    this._closed = false;
    this.readable = new ReadableStream(
      {
        start: (controller) => {
          this._controller = controller;
        },
        pull: () => {
          const w = this._waiting;
          this._waiting = null;
          w?.();
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
    return this._handle.closed ? this.layout.dataSize : this._handle.handle.dataWritten();
  }

  /**
   * Appends tensor bytes (copied; the caller may reuse `bytes` once the promise resolves). Resolves when the
   * readable side has room for more. Rejects with SafetensorsError past the planned size.
   * @param {Uint8Array | ArrayBuffer | ArrayBufferView} bytes
   */
  async write(bytes) {
    this._check();
    const view = bytes instanceof Uint8Array ? bytes : ArrayBuffer.isView(bytes) ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : new Uint8Array(bytes);
    try {
      this._handle.inputToBytes('write', view, (out) => this._enqueue(out));
    } catch (error) {
      this._fail(error, true);
      throw error;
    }
    while (this._controller.desiredSize <= 0 && !this._error) {
      await new Promise((resolve) => {
        this._waiting = resolve;
      });
    }
    this._check();
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
    this._handle.close();
    this._controller.close();
  }

  /** Abandons the file: `readable` errors with `reason` and the native writer is freed. */
  abort(reason) {
    this._fail(reason ?? abortReason({}), true);
  }

  [disposeSymbol]() {
    if (!this._closed && !this._error) this.abort(new Error('peft-bridge: writer disposed before close()'));
    this._handle.close();
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
    this._handle.close();
    if (errorReadable) {
      try {
        this._controller.error(error);
      } catch {
        // already closed
      }
    }
    const w = this._waiting;
    this._waiting = null;
    w?.();
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
  const cleanup = async () => {
    if (onAbort) signal?.removeEventListener('abort', onAbort);
    handle?.close();
    const s = src;
    src = null;
    await s?.close();
  };
  return new ReadableStream({
    async start(controller) {
      throwIfAborted(signal);
      const module = await getModule();
      ({ handle, layout } = plan(module, spec));
      onAbort = () => {
        controller.error(abortReason(signal));
        cleanup();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const header = handle.call('begin');
      if (header) controller.enqueue(header);
    },
    async pull(controller) {
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
            src = openSource(data, { signal });
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
        await cleanup();
        throw error;
      }
    },
    async cancel() {
      await cleanup();
    },
  });
}

function lengthError(t, got, atLeast = false) {
  return new SafetensorsError(
    'InvalidArgument',
    `tensor \`${t.name}\`: data holds ${atLeast ? 'at least ' : ''}${got} bytes but ${t.dtype} ${JSON.stringify(t.shape)} needs ${t.byteLength}`,
    { tensor: t.name },
  );
}
