// readSafetensors(): the streaming reader as an async iterator of events.
import { throwIfAborted } from '../errors.js';
import { NativeHandle } from '../handles.js';
import { headerFromHandle } from '../ops/inspect.js';
import { getModule } from '../init.js';
import { openSource, raceAbort } from './sources.js';

/**
 * Reads a safetensors file as a stream of events, validating as it goes:
 * `{type:'header', header}`, then `{type:'data', tensor, tensorIndex, offset, bytes}` for every span of tensor
 * bytes in file order (`bytes` is a fresh copy the caller owns; spans never cross a tensor boundary; zero-size
 * tensors produce none), then `{type:'end'}` once the reader has checked that exactly the described bytes
 * arrived. Invalid input throws SafetensorsError (after the events that preceded the problem). Breaking out of
 * the loop cancels the source.
 *
 * @param {any} source Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array> | {size, read}
 * @param {{signal?: AbortSignal, onProgress?: (p: {bytesRead: number, totalBytes: number | null}) => void, readSize?: number, windowSize?: number}} [options]
 */
export async function* readSafetensors(source, options = {}) {
  const { signal, onProgress } = options;
  throwIfAborted(signal);
  const module = await getModule();
  const src = await openSource(source, { readSize: options.readSize, signal });
  const handle = new NativeHandle(module, new module.Reader(src.size ?? -1), options.windowSize);
  let header = null;
  let bytesRead = 0;
  let failure = undefined; // why the loop was left early, for the source's cancel()
  try {
    const native = handle.handle;
    for (;;) {
      throwIfAborted(signal);
      // Random-access reads race the signal too (streams and iterators already do, in next()).
      const chunk = await raceAbort(src.next(), signal);
      throwIfAborted(signal);
      if (chunk === null) {
        handle.call('finish');
        yield { type: 'end' };
        return;
      }
      const events = [];
      let feedError = null;
      try {
        handle.input('feed', chunk, (chunks) => {
          if (!header && native.headerDone()) {
            header = headerFromHandle(handle.module, native);
            events.push({ type: 'header', header });
          }
          for (const c of chunks) {
            events.push({
              type: 'data',
              tensor: header.tensors[c.tensor].name,
              tensorIndex: c.tensor,
              offset: c.offset,
              bytes: c.bytes,
            });
          }
        });
      } catch (error) {
        feedError = error;
      }
      yield* events;
      if (feedError) throw feedError;
      bytesRead += chunk.length;
      onProgress?.({ bytesRead, totalBytes: src.size });
    }
  } catch (error) {
    failure = error;
    throw error;
  } finally {
    handle.close();
    await src.close(failure);
  }
}
