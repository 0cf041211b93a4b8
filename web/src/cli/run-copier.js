// The npm CLI's copy lane: runs of an input file copied to their places in an output file by positional reads and
// writes, in the background, while the merge goes on with the tensors it changes (web/src/cli/merge-command.js).
// Each lane reads a piece into its own buffer and writes it out, so there are as many reads or writes in flight
// at most as the copier was given buffers, and it holds no more memory than those, however long the runs.

export class RunCopier {
  /**
   * @param {(offset: number, target: Uint8Array) => Promise<unknown>} readInto  fills target from the input
   * @param {(offset: number, bytes: Uint8Array) => Promise<unknown>} writeAt  writes bytes at an output offset
   * @param {Uint8Array[]} buffers  one per lane, all of the piece size; the copier's until finish() returns
   */
  constructor(readInto, writeAt, buffers) {
    this.readInto = readInto;
    this.writeAt = writeAt;
    this.pieceSize = buffers[0].length;
    this.queue = []; // [inputOffset, outputOffset, length] still to copy, in the order added
    this.idle = [...buffers]; // the buffers of lanes not running
    this.running = new Set();
    this.failure = null; // the first error: nothing is copied after it
    this.onCopied = (n) => {}; // told the bytes of each piece once written
  }

  /** Queues `length` input bytes from `inputOffset` to be written at `outputOffset`; ignored after a failure. */
  add(inputOffset, outputOffset, length) {
    if (length <= 0 || this.failure) return;
    this.queue.push([inputOffset, outputOffset, length]);
    while (this.idle.length && this.queue.length) {
      const lane = this.lane(this.idle.pop());
      this.running.add(lane);
      lane.then(() => this.running.delete(lane));
    }
  }

  /** Copies pieces off the front of the queue until it is empty or a copy fails; never rejects. */
  async lane(buffer) {
    try {
      while (this.queue.length && !this.failure) {
        const run = this.queue[0];
        const [from, to] = run;
        const n = Math.min(this.pieceSize, run[2]);
        run[0] += n;
        run[1] += n;
        run[2] -= n;
        if (run[2] === 0) this.queue.shift();
        const piece = buffer.subarray(0, n);
        await this.readInto(from, piece);
        await this.writeAt(to, piece);
        this.onCopied(n);
      }
    } catch (error) {
      this.failure ??= error;
      this.queue.length = 0;
    } finally {
      this.idle.push(buffer);
    }
  }

  /** Waits until every queued run is copied, or after a failure until no lane runs; then throws the failure. */
  async finish() {
    while (this.running.size) await Promise.all([...this.running]);
    if (this.failure) throw this.failure;
  }
}
