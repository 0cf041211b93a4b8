// A file descriptor the npm CLI's main thread opened, used from one of its shard workers (shard-worker.js): the
// part of fs/promises' FileHandle the merge calls (read, write, stat), over the callback API, which takes a bare
// descriptor. Worker threads share the process's descriptors, so a worker reads the very files the main thread
// planned from and writes the temporary files it created. close() does nothing: the main thread owns them.
import { fstat, read, write } from 'node:fs';

const call = (fn, ...args) =>
  new Promise((resolve, reject) => fn(...args, (error, value) => (error ? reject(error) : resolve(value))));

/** The FileHandle subset {fd, read, write, stat, close} over descriptor `fd`. */
export function descriptorHandle(fd) {
  return {
    fd,
    read: async (buffer, offset, length, position) => ({
      bytesRead: await call(read, fd, buffer, offset, length, position),
      buffer,
    }),
    write: async (buffer, offset, length, position) => ({
      bytesWritten: await call(write, fd, buffer, offset, length, position),
      buffer,
    }),
    stat: () => call(fstat, fd),
    close: async () => {},
  };
}
