// Local files for the Node entry: a path or file: URL read with positional reads (never whole), the listing an
// adapter directory is chosen from, and whole small files (configs). Failures are IoError with the messages the
// native CLI prints (glibc's strerror texts). Imported only by node.js, so the browser and workerd builds never
// load node:fs. Internal.
import { open, readdir, stat } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { SafetensorsError } from '../errors.js';

// glibc's strerror texts, so I/O errors read as the native CLI prints them (the npm CLI uses them too).
const STRERROR = {
  ENOENT: 'No such file or directory',
  EACCES: 'Permission denied',
  EPERM: 'Operation not permitted',
  EISDIR: 'Is a directory',
  ENOTDIR: 'Not a directory',
  EEXIST: 'File exists',
  ENOSPC: 'No space left on device',
  EROFS: 'Read-only file system',
  EMFILE: 'Too many open files',
  ENFILE: 'Too many open files in system',
  EIO: 'Input/output error',
  ELOOP: 'Too many levels of symbolic links',
  ENAMETOOLONG: 'File name too long',
  EBUSY: 'Device or resource busy',
  EXDEV: 'Invalid cross-device link',
  EDQUOT: 'Disk quota exceeded',
  EFBIG: 'File too large',
  EINVAL: 'Invalid argument',
  ETXTBSY: 'Text file busy',
  EAGAIN: 'Resource temporarily unavailable',
  EPIPE: 'Broken pipe',
  ECONNRESET: 'Connection reset by peer',
};

export function strerror(error) {
  if (error?.code && STRERROR[error.code]) return STRERROR[error.code];
  const m = /^[A-Z0-9]+: ([^,]+)/.exec(String(error?.message ?? error));
  const text = m ? m[1] : String(error?.message ?? error);
  return text.charAt(0).toUpperCase() + text.slice(1);
}

const ioError = (what, path, error) =>
  new SafetensorsError('IoError', `${what} \`${path}\`: ${strerror(error)}`, { cause: error });

/** The file system path of a path string or a file: URL (string or URL). */
export function toPath(source) {
  if (source instanceof URL || /^file:/i.test(source)) {
    try {
      return fileURLToPath(source);
    } catch (error) {
      throw new SafetensorsError(
        'InvalidArgument',
        `\`${String(source)}\` is not a usable file: URL (${error.message})`,
      );
    }
  }
  return source;
}

/**
 * A Uint8Array of n bytes that are not zeroed first (the read overwrites them all): a plain Uint8Array over the
 * memory Buffer.allocUnsafe gives, so callers get no Buffer semantics (Buffer's slice is a view).
 */
export function uninitialized(n) {
  const b = Buffer.allocUnsafe(n);
  return new Uint8Array(b.buffer, b.byteOffset, n);
}

/** A regular file opened for positional reads: {size, read(offset, length), readInto(offset, target), close()}. */
async function openFile(source) {
  const path = toPath(source);
  // Checked before opening: opening a FIFO for reading blocks until a writer appears.
  const before = await stat(path).catch((error) => {
    throw ioError('cannot open', path, error);
  });
  if (!before.isFile()) throw new SafetensorsError('IoError', `\`${path}\` is not a regular file`);
  const handle = await open(path, 'r').catch((error) => {
    throw ioError('cannot open', path, error);
  });
  let size;
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw new SafetensorsError('IoError', `\`${path}\` is not a regular file`);
    size = st.size;
  } catch (error) {
    await handle.close().catch(() => {});
    throw error instanceof SafetensorsError ? error : ioError('cannot stat', path, error);
  }
  let closed = false;
  // Fills `target` from `offset` (the caller keeps it within the file); returns it.
  const readInto = async (offset, target) => {
    if (closed) throw new SafetensorsError('IoError', `cannot read \`${path}\`: the file was closed`);
    for (let done = 0; done < target.length;) {
      let got;
      try {
        ({ bytesRead: got } = await handle.read(target, done, target.length - done, offset + done));
      } catch (error) {
        throw ioError('cannot read', path, error);
      }
      if (got === 0)
        throw new SafetensorsError('IoError', `\`${path}\` shrank while being read`, { offset: offset + done });
      done += got;
    }
    return target;
  };
  return {
    size,
    read: (offset, length) => readInto(offset, uninitialized(Math.max(0, Math.min(length, size - offset)))),
    readInto,
    async close() {
      if (closed) return;
      closed = true;
      await handle.close().catch(() => {});
    },
  };
}

/** A whole (small) file's bytes. */
async function readWhole(source) {
  const file = await openFile(source);
  try {
    return await file.read(0, file.size);
  } finally {
    await file.close();
  }
}

const isDirectory = async (source) => (await stat(toPath(source)).catch(() => null))?.isDirectory() ?? false;
const isFile = async (source) => (await stat(toPath(source)).catch(() => null))?.isFile() ?? false;

/** The names of the regular files in `dir` (links followed); none if it cannot be read, as the native CLI. */
async function list(dir) {
  const names = [];
  for (const name of await readdir(dir).catch(() => [])) if (await isFile(`${dir}/${name}`)) names.push(name);
  return names;
}

export const nodeFiles = { open: openFile, readWhole, isDirectory, isFile, list, toPath };
