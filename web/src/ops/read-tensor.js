// readTensor(): one tensor's bytes, after reading the header, from a remote file or a local random-access source.
import { SafetensorsError } from '../errors.js';
import { isLocalPath, openSource, raceAbort } from '../io/sources.js';
import { isRemote, withRemoteHeader } from '../remote/hub.js';
import { inspectRendered } from './inspect.js';

/**
 * The bytes of one tensor, reading nothing else after the header: a remote file costs the header's requests
 * plus one Range request (none when the first request already brought the tensor). Also takes local
 * random-access sources (bytes, Blob, {size, read}).
 * @param {any} source
 * @param {string} name
 * @param {object} [options] as for {@link openRemote}
 */
export async function readTensor(source, name, options = {}) {
  const run = async (headerSource, read) => {
    const { header } = await inspectRendered(headerSource, { signal: options.signal });
    const tensor = header.tensors.find((t) => t.name === name);
    if (!tensor) throw new SafetensorsError('InvalidArgument', `no tensor named \`${name}\``, { tensor: name });
    if (tensor.byteLength === 0) return new Uint8Array(0);
    const start = 8 + header.headerSize + tensor.dataOffsets[0];
    const bytes = await raceAbort(Promise.resolve(read(start, tensor.byteLength)), options.signal);
    if (bytes.length !== tensor.byteLength)
      throw new SafetensorsError('IoError', `the file ended inside tensor \`${name}\``, {
        tensor: name,
        offset: start + bytes.length,
      });
    return bytes;
  };
  if (isRemote(source))
    return withRemoteHeader(source, options, (file) => run(file.headerSource(), (o, n) => file.read(o, n)));
  const src = await openSource(source, { signal: options.signal });
  try {
    if (!src.random)
      throw new TypeError(
        'peft-bridge: readTensor needs random access: bytes, a Blob, {size, read}, a URL, a Hub address or in Node a file path',
      );
    // A local path is opened once, for the header and the tensor.
    const opened = isLocalPath(source) ? { size: src.size, read: src.read } : source;
    return await run(opened, async (o, n) => (await src.read(o, n)).slice());
  } finally {
    await src.close();
  }
}
