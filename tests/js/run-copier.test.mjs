// The npm CLI's copy lane (web/src/cli/run-copier.js): runs of an input copied to their output offsets in
// pieces, at most `lanes` at once, in the background; the first failure stops it and is what finish() throws.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { rng, webDir } from './helpers/common.mjs';

const { RunCopier } = await import(join(webDir, 'src', 'cli', 'run-copier.js'));
const buffers = (lanes, pieceSize) => Array.from({ length: lanes }, () => new Uint8Array(pieceSize));

// An input of `size` pseudo-random bytes and an output of the same size, both with I/O that completes after a
// random number of event-loop turns; counts the operations in flight and records every write.
function fakeFiles(size, seed, { failRead = null, failWrite = null } = {}) {
  const random = rng(seed);
  const input = new Uint8Array(size).map(() => Math.floor(random() * 256));
  const output = new Uint8Array(size);
  const stats = { inFlight: 0, most: 0, reads: 0, writes: [] };
  const later = async () => {
    for (let turns = Math.floor(random() * 4); turns > 0; --turns) await new Promise((r) => setImmediate(r));
  };
  const io = async (work) => {
    stats.most = Math.max(stats.most, ++stats.inFlight);
    try {
      await later();
      return work();
    } finally {
      --stats.inFlight;
    }
  };
  const readInto = (offset, target) =>
    io(() => {
      if (failRead !== null && offset <= failRead && failRead < offset + target.length)
        throw new Error(`read failed at ${offset}`);
      ++stats.reads;
      target.set(input.subarray(offset, offset + target.length));
      return target;
    });
  const writeAt = (offset, bytes) =>
    io(() => {
      if (failWrite !== null && offset <= failWrite && failWrite < offset + bytes.length)
        throw new Error(`write failed at ${offset}`);
      stats.writes.push([offset, bytes.length]);
      output.set(bytes, offset);
    });
  return { input, output, stats, readInto, writeAt };
}

test('runs are copied to their output offsets in pieces, with at most `lanes` reads or writes in flight', async () => {
  for (const [lanes, pieceSize] of [
    [1, 7],
    [2, 64],
    [3, 5],
    [8, 1000],
  ]) {
    const f = fakeFiles(5000, lanes);
    const copier = new RunCopier(f.readInto, f.writeAt, buffers(lanes, pieceSize));
    let copied = 0;
    copier.onCopied = (n) => (copied += n);
    // Runs added while earlier ones are being copied, and some moved: input [a, b) to output [c, c + b - a).
    const runs = [
      [0, 0, 100],
      [300, 100, 1200],
      [100, 1300, 200],
      [1500, 1500, 0],
      [1500, 1500, 3500],
    ];
    for (const [from, to, length] of runs) {
      copier.add(from, to, length);
      await new Promise((r) => setImmediate(r));
    }
    await copier.finish();
    const expected = new Uint8Array(5000);
    for (const [from, to, length] of runs) expected.set(f.input.subarray(from, from + length), to);
    assert.deepEqual(f.output, expected, `lanes ${lanes}, pieces of ${pieceSize}`);
    assert.equal(copied, 5000, 'every byte reported once');
    assert.ok(f.stats.most <= lanes, `at most ${lanes} in flight (saw ${f.stats.most})`);
    assert.ok(
      f.stats.writes.every(([, n]) => n <= pieceSize),
      'no write longer than a piece',
    );
    if (lanes > 1) assert.ok(f.stats.most > 1, 'lanes run at once');
  }
});

test('the first failed read or write stops the copy; finish() throws it and later runs are ignored', async () => {
  for (const failure of [{ failRead: 2100 }, { failWrite: 2100 }]) {
    const f = fakeFiles(6000, 9, failure);
    const copier = new RunCopier(f.readInto, f.writeAt, buffers(2, 256));
    copier.add(0, 0, 6000);
    await assert.rejects(copier.finish(), /failed at 2048/);
    assert.ok(copier.failure instanceof Error);
    const written = f.stats.writes.length;
    assert.ok(
      f.stats.writes.every(([offset]) => offset < 2048 + 2 * 256),
      'nothing copied past the lanes that were running',
    );
    copier.add(0, 0, 100); // ignored: the copy already failed
    await assert.rejects(copier.finish(), /failed at 2048/);
    assert.equal(f.stats.writes.length, written, 'nothing written after the failure');
    assert.equal(f.stats.inFlight, 0, 'finish() returns only once no lane runs');
  }
});

test('finish() on a copier given nothing returns at once', async () => {
  const f = fakeFiles(10, 1);
  const copier = new RunCopier(f.readInto, f.writeAt, buffers(2, 16));
  copier.add(3, 3, 0);
  await copier.finish();
  assert.equal(f.stats.reads, 0);
});
