// inspect(): the header of a safetensors file, reading no more of the source than the header.
import { throwIfAborted } from './errors.js';
import { NativeHandle } from './handles.js';
import { getModule } from './init.js';
import { isRemote, withRemoteHeader } from './hub.js';
import { openSource, raceAbort } from './sources.js';

/**
 * The JS view of RenderInspectJson's output. Internal.
 * @param {string} json
 */
export function headerFromJson(json) {
  const j = JSON.parse(json);
  return {
    headerSize: j.headerSize,
    dataSize: j.dataSize,
    fileSize: j.fileSize,
    metadata: j.metadata,
    tensors: j.tensors,
    parameters: j.parameters,
    totalParameters: j.totalParameters,
  };
}

/**
 * Feeds a random-access source's header into a handle: the 8-byte prefix, then exactly the header bytes.
 * `feed` is the handle's header-feeding method; `onChunks` receives what each call produced. A source that ends
 * first leaves the header incomplete; the caller's finish call then reports the reader's error. Internal.
 */
export async function feedRandomHeader(handle, source, feed, options = {}) {
  const { signal, onChunks } = options;
  const native = handle.handle;
  let pos = 0;
  while (native.bytesUntilHeader() > 0) {
    throwIfAborted(signal);
    const need = Math.min(native.bytesUntilHeader(), handle.windowSize, source.size - pos);
    if (need <= 0) break; // the source ends inside the prefix or the header
    const bytes = await raceAbort(source.read(pos, need), signal);
    if (bytes.length === 0) break;
    handle.input(feed, bytes, onChunks);
    pos += bytes.length;
  }
  return pos;
}

/**
 * Reads and validates the header. Returns `{header, json}` by default, or `{text}` with `render: 'text'`
 * (the CLI's output): each rendering of a 200,000-tensor header costs real time, so only one is made.
 * Internal.
 */
export async function inspectRendered(source, options = {}) {
  const { signal } = options;
  throwIfAborted(signal);
  // A URL or Hub address: the header's bytes come from one or two Range requests, then the same path as bytes.
  if (isRemote(source)) return withRemoteHeader(source, options, (file) => inspectRendered(file.headerSource(), options));
  const module = await getModule();
  const src = await openSource(source, { readSize: options.readSize, signal });
  const handle = new NativeHandle(module, new module.Reader(src.size ?? -1));
  try {
    const native = handle.handle;
    if (src.random) {
      await feedRandomHeader(handle, src, 'feed', { signal });
    } else {
      while (!native.headerDone()) {
        throwIfAborted(signal);
        const chunk = await src.next();
        if (chunk === null) break;
        // Only the bytes the header still needs (the prefix first, then the JSON): the rest of the stream is
        // never read.
        let pos = 0;
        while (pos < chunk.length && !native.headerDone()) {
          const take = Math.min(chunk.length - pos, native.bytesUntilHeader());
          handle.input('feed', chunk.subarray(pos, pos + take));
          pos += take;
        }
      }
    }
    if (!native.headerDone()) handle.call('finish'); // throws the reader's end-of-input error
    if (options.render === 'text') return { text: native.headerText() };
    const json = native.headerJson();
    // 'text+json': both (the CLI's inspect of a sharded model checks the index against the tensor names).
    if (options.render === 'text+json') return { header: headerFromJson(json), json, text: native.headerText() };
    return { header: headerFromJson(json), json };
  } finally {
    handle.close();
    await src.close();
  }
}

/**
 * Reads and validates a safetensors header. A stream is read only as far as the header and then cancelled;
 * a source of known size (bytes, Blob, {size, read}) is fully validated, including that the tensors cover the
 * file exactly. An http(s) or hf:// URL or a Hub address ({repo, path, revision, endpoint, token}) is read with
 * Range requests: one for the first 64 KiB, one more only if the header is longer (see hub.js).
 * Rejects with SafetensorsError on invalid input.
 * @param {any} source
 * @param {{signal?: AbortSignal, token?: string, endpoint?: string, retries?: number, retryDelay?: number, fetch?: typeof fetch}} [options]
 */
export async function inspect(source, options = {}) {
  return (await inspectRendered(source, options)).header;
}
