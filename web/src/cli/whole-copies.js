// The npm CLI's fast path for the unchanged tensors of a local shard whose layout the merge keeps (the output as
// large as the input: same header length, so every unchanged tensor sits at its input offset). The whole input is
// copied over the shard's temporary file by the kernel (fs.copyFile: a reflink where the file system has them,
// else copy_file_range or sendfile), one copy of each byte without a trip through JS buffers, on libuv's threads
// while the module merges another shard; the header and the tensors the merge changes are then written over that
// copy, and the unchanged runs need no I/O at all (web/src/cli/merge-command.js). Linux only (both files are
// named by descriptor); measured in docs/benchmarks.md, "Native CLI: the kernel copies unchanged tensors (and the
// npm CLI whole shards)".
import { constants, existsSync } from 'node:fs';
import { copyFile } from 'node:fs/promises';
import { ioFailure } from './io.js';

/**
 * Runs copy jobs in the order given, `lanes` at a time (each holds one of libuv's four threads for as long as it
 * copies, so the merge's own reads keep the others); each job gives a promise of true when its copy is complete,
 * of false when the shard is to be copied by runs, or rejects (a failure that ends the merge).
 */
export class WholeCopies {
  /** @param {((() => Promise<boolean>) | null)[]} jobs  one per shard; null for a shard copied by runs */
  constructor(jobs, lanes) {
    this.stopped = false;
    const queue = [];
    /** Per shard: a promise of true once the shard's file holds a whole copy of its input, else of false. */
    this.results = jobs.map((job) =>
      job ? new Promise((resolve, reject) => queue.push({ job, resolve, reject })) : Promise.resolve(false),
    );
    for (const result of this.results) result.catch(() => {}); // told to the merge when it reaches that shard
    const lane = async () => {
      while (queue.length) {
        const { job, resolve, reject } = queue.shift();
        if (this.stopped) resolve(false);
        else await job().then(resolve, reject);
      }
    };
    this.lanes = Array.from({ length: Math.min(lanes, queue.length) }, lane);
  }

  /** Starts no more copies and waits for the running ones: after it, none writes to a temporary file. */
  async stop() {
    this.stopped = true;
    await Promise.all(this.lanes);
  }
}

// Both files by their descriptors: the input the merge planned from even if its path now names another file,
// and the temporary file without creating it anew should the transaction have removed it meanwhile.
const byDescriptor = (handle) => `/proc/self/fd/${handle.fd}`;

/** Whether copyWhole can run here (Linux, with /proc); elsewhere every shard is copied by runs. */
export const canCopyWhole = process.platform === 'linux' && existsSync('/proc/self/fd');

/**
 * Copies the input open as `input` over the transaction's temporary file `file`. True once the file holds the
 * input's bytes; false, with the file emptied, if the copy failed: the caller then copies by runs from `input`,
 * and those reads and writes report any error. Throws only if the file cannot be emptied.
 */
export async function copyWhole(input, file) {
  try {
    const { mode } = await file.handle.stat();
    await copyFile(byDescriptor(input), byDescriptor(file.handle), constants.COPYFILE_FICLONE);
    await file.handle.chmod(mode & 0o7777); // copyFile gives the copy its source's mode; outputs keep their own
    return true;
  } catch {
    // copied by runs instead
  }
  try {
    await file.handle.truncate(0); // nothing of a copy cut short may outlast the runs' writes
  } catch (error) {
    throw ioFailure('cannot write', file.temp, error);
  }
  return false;
}
