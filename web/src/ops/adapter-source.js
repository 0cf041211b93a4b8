// The adapter's weights file as a random-access source, so the core can read its header first and then each
// module's factors by range when it needs them: a Uint8Array / ArrayBuffer, a Blob or File (slice),
// or {size, read(offset, length)} (a Node file handle, an HTTP Range reader). Offsets are Numbers, exact up to
// 2^53 - 1 bytes; a larger size is refused with a precise error, never truncated. A ReadableStream or async
// iterable cannot be read by range: it is read into memory first, up to MAX_STREAMED_ADAPTER bytes. Internal.
import { SafetensorsError } from '../errors.js';
import { concat } from '../handles.js';
import { chunkBytes, isRandomAccess, openSource, raceAbort } from '../io/sources.js';

/** The most bytes an adapter given as a stream is read into memory for (pass a Blob, File or {size, read} beyond). */
export const MAX_STREAMED_ADAPTER = 1 << 30;

function sizeOf(source) {
  if (
    source &&
    typeof source === 'object' &&
    typeof source.read === 'function' &&
    typeof source.getReader !== 'function'
  ) {
    let { size } = source;
    if (typeof size === 'bigint') {
      if (size > BigInt(Number.MAX_SAFE_INTEGER)) throw tooLarge(size);
      size = Number(size);
    }
    if (typeof size === 'number' && Number.isInteger(size) && !Number.isSafeInteger(size)) throw tooLarge(size);
    return size;
  }
  return undefined;
}

const tooLarge = (size) =>
  new SafetensorsError(
    'InvalidArgument',
    `the adapter file is ${size} bytes; offsets beyond 2^53 - 1 bytes cannot be represented exactly in JavaScript`,
  );

/**
 * A random-access source of the adapter's weights: {random: true, size, read(offset, length)}.
 * @returns {Promise<import('../io/sources.js').Source>}
 */
export async function openAdapterSource(weights, signal) {
  const size = sizeOf(weights);
  if (size !== undefined && typeof weights.size !== 'number') {
    // A BigInt size within range: the same reader with a Number size.
    return await openSource({ size, read: (offset, length) => weights.read(offset, length) }, { signal });
  }
  if (isRandomAccess(weights)) return await openSource(weights, { signal });
  const src = await openSource(weights, { signal });
  try {
    const parts = [];
    let total = 0;
    for (let chunk; (chunk = await src.next()) !== null;) {
      total += chunk.length;
      if (total > MAX_STREAMED_ADAPTER) {
        throw new SafetensorsError(
          'InvalidArgument',
          `an adapter given as a stream is read into memory, and this one exceeds ${MAX_STREAMED_ADAPTER} bytes; pass it as a Blob, a File or {size, read(offset, length)} so it is read by range`,
        );
      }
      parts.push(chunk);
    }
    return await openSource(concat(parts) ?? new Uint8Array(0), { signal });
  } finally {
    await src.close();
  }
}

/** Exactly `length` bytes at `offset` of a random-access source (IoError when it ends first). */
export async function readRange(src, offset, length, signal) {
  if (length === 0) return new Uint8Array(0);
  const bytes = chunkBytes(await raceAbort(Promise.resolve(src.read(offset, length)), signal));
  if (bytes.length !== length) {
    throw new SafetensorsError(
      'IoError',
      `the adapter file ended at byte ${offset + bytes.length}, inside a ${length}-byte read at ${offset}`,
      { offset: offset + bytes.length },
    );
  }
  return bytes;
}
