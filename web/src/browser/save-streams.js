// saveStreams(): output files written into a directory picked in the browser (the File System Access API), as
// every file-producing call yields them. Plain JS: no WebAssembly module is needed to save.

/**
 * Writes output files ({path, stream}, e.g. from mergeRemote) into a directory handle from the File System Access
 * API (`showDirectoryPicker()`). createWritable() writes aside and replaces the file only when it is closed, so a
 * failure never leaves a partial file; files this call wrote before a failure are removed as well, as the CLI
 * leaves no partial output. An array's files are written at once (mergeInWorkers merges them concurrently), an
 * iterable's one after another (mergeShards and mergeRemote yield the next file only after the last one ended).
 * Resolves to [{path, size}].
 * @param {AsyncIterable<{path: string, size?: number, stream: ReadableStream<Uint8Array>}> | Iterable<any>} files
 * @param {{directoryHandle: any}} options
 */
export async function saveStreams(files, { directoryHandle } = {}) {
  if (!directoryHandle || typeof directoryHandle.getFileHandle !== 'function')
    throw new TypeError('peft-bridge: saveStreams needs {directoryHandle}, a FileSystemDirectoryHandle');
  const written = [];
  const save = async ({ path, size, stream }) => {
    const handle = await directoryHandle.getFileHandle(path, { create: true });
    written.push({ path, size });
    await stream.pipeTo(await handle.createWritable());
  };
  try {
    if (Array.isArray(files)) {
      // Every stream at once (mergeInWorkers' files are merged concurrently); the first failure is reported once
      // all have settled, so nothing is still writing when the written files are removed.
      const results = await Promise.allSettled(files.map(save));
      const failed = results.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
    } else {
      for await (const file of files) await save(file);
    }
    return Array.isArray(files) ? files.map(({ path, size }) => ({ path, size })) : written;
  } catch (error) {
    await Promise.all(written.map(({ path }) => Promise.resolve(directoryHandle.removeEntry?.(path)).catch(() => {})));
    throw error;
  }
}
