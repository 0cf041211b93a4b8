// inspect(): the header of a safetensors file, reading no more of the source than the header.
import { throwIfAborted } from '../errors.js';
import { NativeHandle } from '../handles.js';
import { getModule } from '../init.js';
import { isRemote, withRemoteHeader } from '../remote/hub.js';
import { openSource, raceAbort } from '../io/sources.js';

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

const dtypeNamesOf = new WeakMap(); // module → the dtype names by code
const COLUMNS = 10; // wasm/header_table.h's kHeaderTableColumns
const HEADER_WINDOW = 1 << 20;
const TWO_32 = 2 ** 32;

/**
 * The header a handle has parsed, as headerFromJson(handle.headerJson()) gives it, built from the handle's compact
 * table (wasm/header_table.h) and its summary document instead: no JSON rendering or parsing of every tensor.
 * Reads the heap in place, so nothing may call into the module meanwhile. Internal.
 */
export function headerFromHandle(module, native) {
  const summary = JSON.parse(native.headerSummaryJson());
  let dtypes = dtypeNamesOf.get(module);
  if (!dtypes) dtypeNamesOf.set(module, (dtypes = module.dtypeNames().split('\n')));
  const rows = native.headerTable(); // a Uint32Array over the heap: valid until the next call into the module
  const json = native.headerJsonView(); // the header JSON as read (allocates nothing, so `rows` stays valid)
  const heap = module.HEAPU8;
  const u32 = new Uint32Array(heap.buffer, heap.byteOffset, heap.length >>> 2); // dims: uint64 as two halves
  const decoder = new TextDecoder();
  const n = rows.length / COLUMNS;
  const tensors = new Array(n);
  // An all-ASCII header (the usual case: then its bytes and its characters line up) is decoded once and every
  // name not escaped is cut out of it: a decode call and a heap view per name cost a 200,000-tensor inspect about
  // a tenth of its time (docs/benchmarks.md). The names then share that one string (V8 keeps it while any lives).
  const text = decoder.decode(json);
  const textAt = text.length === json.length ? json.byteOffset : -1;
  const textEnd = json.byteOffset + json.length;
  // A uint64 as JSON.parse reads its decimal text: rounded once to the nearest double.
  const u64 = (lo, hi) => lo + hi * TWO_32;
  for (let i = 0, r = 0; i < n; ++i, r += COLUMNS) {
    const at = rows[r];
    const end = at + rows[r + 1];
    const name =
      textAt >= 0 && at >= textAt && end <= textEnd
        ? text.substring(at - textAt, end - textAt)
        : decoder.decode(heap.subarray(at, end));
    const dims = rows[r + 2] / 4;
    const rank = rows[r + 3] >>> 5;
    const shape = new Array(rank);
    for (let d = 0; d < rank; ++d) shape[d] = u64(u32[dims + 2 * d], u32[dims + 2 * d + 1]);
    tensors[i] = {
      name,
      dtype: dtypes[rows[r + 3] & 31],
      shape,
      dataOffsets: [u64(rows[r + 4], rows[r + 5]), u64(rows[r + 6], rows[r + 7])],
      byteLength: u64(rows[r + 8], rows[r + 9]),
    };
  }
  return {
    headerSize: summary.headerSize,
    dataSize: summary.dataSize,
    fileSize: summary.fileSize,
    metadata: summary.metadata,
    tensors,
    parameters: summary.parameters,
    totalParameters: summary.totalParameters,
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
 * Reads and validates the header. Returns `{header}` by default, `{text}` with `render: 'text'` and `{json}` with
 * `render: 'json'` (the CLI's outputs): each rendering of a 200,000-tensor header costs real time, so only the one
 * asked for is made.
 * Internal.
 */
export async function inspectRendered(source, options = {}) {
  const { signal } = options;
  throwIfAborted(signal);
  // A URL or Hub address: the header's bytes come from one or two Range requests, then the same path as bytes.
  if (isRemote(source))
    return withRemoteHeader(source, options, (file) => inspectRendered(file.headerSource(), options));
  const module = await getModule();
  const src = await openSource(source, { readSize: options.readSize, signal });
  // Header bytes pass through the window into the reader's own buffer: a small window keeps the heap's high-water
  // mark near the header's size (a 22 MB header of 200,000 tensors peaks at 71 MiB with the default 8 MiB window).
  const handle = new NativeHandle(module, new module.Reader(src.size ?? -1), HEADER_WINDOW);
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
    // 'json': the CLI's --json document; 'text+json': both (the CLI's inspect of a sharded model checks the index
    // against the tensor names). The API's header comes from the compact table, never from JSON.
    if (options.render === 'json') return { json: native.headerJson() };
    if (options.render === 'text+json')
      return { header: headerFromHandle(module, native), json: native.headerJson(), text: native.headerText() };
    return { header: headerFromHandle(module, native) };
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
