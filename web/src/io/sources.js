// Byte sources: one shape for everything the API accepts. Random-access sources (bytes in memory, a Blob,
// a {size, read} object) know their size and can read any range; sequential ones (ReadableStream,
// AsyncIterable) can only give the next chunk and can be cancelled. In Node, a path or a file: URL is a local
// file read with positional reads; the Node entry (node.js) installs how (node-files.js), so the browser and
// workerd builds never import node:fs. Internal.
import { SafetensorsError, abortReason } from '../errors.js';

/** Default size of the pieces read from a random-access source. */
export const DEFAULT_READ_SIZE = 4 << 20;

/**
 * @typedef {object} Source
 * @property {boolean} random   true if read(offset, length) is available
 * @property {number | null} size  total size in bytes, when known
 * @property {(offset: number, length: number) => Promise<Uint8Array>} [read]  random access (may return fewer bytes at the end)
 * @property {(offset: number, target: Uint8Array) => Promise<Uint8Array>} [readInto]  a local file's: fills `target`
 * @property {() => Promise<Uint8Array | null>} next  the next chunk in file order, null at the end
 * @property {number} [pieceSize]  the bytes per read the source is best read in (a remote file's)
 * @property {number} [readAhead]  how many reads it serves at once past the one being used (a remote file's)
 * @property {(reason?: unknown) => Promise<void>} close  releases the source; cancels a stream or iterator not
 *   read to its end (a stream's cancel() gets `reason`)
 */

/**
 * Local files, installed by the Node entry: {open(path) -> {size, read(offset, length), close()},
 * isDirectory(path), list(dir) -> names of its regular files, isFile(path), readWhole(path), toPath(string | URL)}.
 */
let localFiles = null;

/** Installs local file access (node.js does, at import). Internal. */
export function setLocalFiles(impl) {
  localFiles = impl;
}

/** True for a local file's name: a string that is no http(s) / hf:// URL, or a file: URL (string or URL). */
export function isLocalPath(source) {
  if (typeof source === 'string') return !/^(https?|hf):\/\//i.test(source);
  return typeof URL !== 'undefined' && source instanceof URL && source.protocol === 'file:';
}

/** The local file access, or InvalidArgument outside Node (a browser or a worker has no file paths). Internal. */
export function requireLocalFiles(source) {
  if (localFiles) return localFiles;
  const shown = String(source).length > 200 ? `${String(source).slice(0, 200)}…` : String(source);
  throw new SafetensorsError(
    'InvalidArgument',
    `\`${shown}\` is a file path, and file paths are read only in Node; pass the file's bytes, a Blob / File, a stream or an http(s) / hf:// URL`,
  );
}

/**
 * @param {unknown} source
 * @param {{readSize?: number, signal?: AbortSignal}} [options]
 * @returns {Promise<Source>}
 */
export async function openSource(source, options = {}) {
  const readSize = Math.max(1, Math.floor(options.readSize ?? DEFAULT_READ_SIZE));
  if (isLocalPath(source)) {
    const file = await requireLocalFiles(source).open(source);
    if (options.signal?.aborted) {
      await file.close();
      throw abortReason(options.signal);
    }
    const src = randomSource(
      file.size,
      (offset, length) => file.read(offset, length),
      readSize,
      () => file.close(),
    );
    src.readInto = file.readInto; // into a buffer the caller reuses (the npm CLI's merge)
    return src;
  }
  const bytes = asBytes(source);
  if (bytes) {
    return randomSource(bytes.length, async (offset, length) => bytes.subarray(offset, offset + length), readSize);
  }
  if (typeof Blob !== 'undefined' && source instanceof Blob) {
    return randomSource(
      source.size,
      async (offset, length) => new Uint8Array(await source.slice(offset, offset + length).arrayBuffer()),
      readSize,
    );
  }
  if (source && typeof source === 'object' && typeof source.getReader === 'function') {
    return streamSource(source, options.signal);
  }
  if (source && typeof source === 'object' && typeof source.read === 'function' && Number.isSafeInteger(source.size)) {
    const src = randomSource(
      source.size,
      async (offset, length) => chunkBytes(await source.read(offset, length)),
      readSize,
    );
    if (typeof source.readInto === 'function') src.readInto = (offset, target) => source.readInto(offset, target);
    // How the source is best read (a remote file's: remote.js readAhead), for a reader that keeps pieces in flight.
    if (Number.isSafeInteger(source.pieceSize) && source.pieceSize > 0) src.pieceSize = source.pieceSize;
    if (Number.isSafeInteger(source.readAhead) && source.readAhead >= 0) src.readAhead = source.readAhead;
    return src;
  }
  if (source && (typeof source[Symbol.asyncIterator] === 'function' || typeof source[Symbol.iterator] === 'function')) {
    return iteratorSource(source, options.signal);
  }
  throw new TypeError(
    'peft-bridge: source must be a Uint8Array, ArrayBuffer, Blob, ReadableStream, AsyncIterable of Uint8Array, {size, read(offset, length)}, or in Node a file path or file: URL',
  );
}

/**
 * Closes a random-access source the library asked for and is done with (`base.open(name)`'s results): calls its
 * close() if it has one. Never throws. Internal.
 */
export async function closeRandomAccess(source) {
  if (!source || typeof source !== 'object' || typeof source.close !== 'function' || !isRandomAccess(source)) return;
  try {
    await source.close();
  } catch {
    // the source's own failure to release: nothing the merge can do about it
  }
}

/**
 * Cancels a data source that was never opened: a ReadableStream gets cancel(reason), an iterator (or async
 * iterable) return(). Sources with nothing to release (bytes, Blob, {size, read}) and anything else are left
 * alone. Never throws.
 */
export async function cancelSource(source, reason) {
  if (!source || typeof source !== 'object' || isRandomAccess(source)) return;
  try {
    if (typeof source.getReader === 'function') {
      if (typeof source.cancel === 'function') await source.cancel(reason);
    } else if (typeof source[Symbol.asyncIterator] === 'function') {
      await source[Symbol.asyncIterator]().return?.();
    } else if (typeof source[Symbol.iterator] === 'function') {
      await source[Symbol.iterator]().return?.();
    }
  } catch {
    // a locked or already errored stream: nothing more to release here
  }
}

/** True for the sources openSource serves with random access. */
export function isRandomAccess(source) {
  return (
    (localFiles !== null && isLocalPath(source)) ||
    asBytes(source) !== null ||
    (typeof Blob !== 'undefined' && source instanceof Blob) ||
    (!!source &&
      typeof source === 'object' &&
      typeof source.getReader !== 'function' &&
      typeof source.read === 'function' &&
      Number.isSafeInteger(source.size))
  );
}

function asBytes(source) {
  if (source instanceof Uint8Array) return source;
  if (source instanceof ArrayBuffer) return new Uint8Array(source);
  if (typeof SharedArrayBuffer !== 'undefined' && source instanceof SharedArrayBuffer) return new Uint8Array(source);
  if (ArrayBuffer.isView(source)) return new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
  return null;
}

/** A chunk from a stream or reader callback, as a Uint8Array view (no copy). */
export function chunkBytes(chunk) {
  const bytes = asBytes(chunk);
  if (!bytes) throw new TypeError('peft-bridge: stream chunks must be Uint8Array (or ArrayBuffer / typed arrays)');
  return bytes;
}

function randomSource(size, read, readSize, release = async () => {}) {
  let pos = 0;
  return {
    random: true,
    size,
    read,
    async next() {
      if (pos >= size) return null;
      const n = Math.min(readSize, size - pos);
      const chunk = await read(pos, n);
      if (chunk.length === 0) return null;
      pos += chunk.length;
      return chunk;
    },
    async close() {
      const r = release;
      release = async () => {};
      await r();
    },
  };
}

/** Resolves like `promise`, or rejects as soon as `signal` aborts. */
export function raceAbort(promise, signal) {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(abortReason(signal));
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(abortReason(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

// A source read in order: `pull()` resolves to {done, value}; `stop()` cancels the rest (called only when the
// source was left before its end); `release()` always runs last. Empty chunks are skipped.
function sequentialSource(pull, stop, release, signal) {
  let finished = false;
  return {
    random: false,
    size: null,
    async next() {
      for (;;) {
        const { done, value } = await raceAbort(pull(), signal);
        if (done) {
          finished = true;
          return null;
        }
        const bytes = chunkBytes(value);
        if (bytes.length) return bytes;
      }
    },
    async close(reason) {
      if (!finished) {
        finished = true;
        await Promise.resolve()
          .then(() => stop(reason))
          .catch(() => {});
      }
      release();
    },
  };
}

function streamSource(stream, signal) {
  const reader = stream.getReader();
  return sequentialSource(
    () => reader.read(),
    (reason) => reader.cancel(reason),
    () => {
      try {
        reader.releaseLock();
      } catch {
        // a read still pending in an older runtime: the lock goes with the cancelled stream
      }
    },
    signal,
  );
}

function iteratorSource(iterable, signal) {
  const iterator =
    typeof iterable[Symbol.asyncIterator] === 'function'
      ? iterable[Symbol.asyncIterator]()
      : iterable[Symbol.iterator]();
  return sequentialSource(
    () => Promise.resolve(iterator.next()),
    () => iterator.return?.(),
    () => {},
    signal,
  );
}
