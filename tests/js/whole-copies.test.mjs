// The npm CLI's whole-shard copies (web/src/cli/whole-copies.js): jobs run in order, `lanes` at a time, a failed
// one fails only its shard, stop() starts no more and waits for the running ones; copyWhole copies the open input
// over the open temporary file (by their descriptors) keeping the temporary's mode, and says false (with the
// temporary emptied) when the copy failed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rng, webDir } from './helpers/common.mjs';

const { WholeCopies, canCopyWhole, copyWhole } = await import(join(webDir, 'src', 'cli', 'whole-copies.js'));

const turns = async (n) => {
  for (let i = 0; i < n; ++i) await new Promise((r) => setImmediate(r));
};

test('jobs run in order, no more at once than there are lanes; a shard without a job is copied by runs', async () => {
  for (const lanes of [1, 2, 3]) {
    const random = rng(lanes);
    const started = [];
    let running = 0;
    let most = 0;
    const job = (s) => async () => {
      started.push(s);
      most = Math.max(most, ++running);
      await turns(1 + Math.floor(random() * 5));
      --running;
      return s % 3 !== 2; // some copies come back false: those shards are copied by runs
    };
    const jobs = Array.from({ length: 8 }, (_, s) => (s === 4 ? null : job(s)));
    const copies = new WholeCopies(jobs, lanes);
    const results = await Promise.all(copies.results);
    assert.deepEqual(started, [0, 1, 2, 3, 5, 6, 7]);
    assert.equal(most, lanes);
    assert.deepEqual(results, [true, true, false, true, false, false, true, true]);
  }
});

test('a job that fails rejects its shard only; the lane goes on with the next', async () => {
  const failure = new Error('cannot write');
  const jobs = [async () => true, async () => Promise.reject(failure), async () => true];
  const copies = new WholeCopies(jobs, 1);
  assert.equal(await copies.results[0], true);
  await assert.rejects(copies.results[1], failure);
  assert.equal(await copies.results[2], true);
});

test('stop() waits for the running copies and starts no more: their shards come back false', async () => {
  let finished = 0;
  const started = [];
  const jobs = Array.from({ length: 5 }, (_, s) => async () => {
    started.push(s);
    await turns(3);
    ++finished;
    return true;
  });
  const copies = new WholeCopies(jobs, 2);
  await turns(1);
  await copies.stop();
  assert.deepEqual(started, [0, 1]);
  assert.equal(finished, 2, 'both running copies ended before stop() returned');
  assert.deepEqual(await Promise.all(copies.results), [true, true, false, false, false]);
});

// ---- copyWhole on real files (Linux: by /proc/self/fd) ----

const linuxOnly = { skip: canCopyWhole ? false : 'whole copies need /proc/self/fd (Linux)' };

function scratch(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-whole-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const random = rng(7);
  const bytes = (n) => Uint8Array.from({ length: n }, () => Math.floor(random() * 256));
  return { dir, bytes };
}

/** An input opened for reading and a temporary output opened as the transaction opens one ('wx', 0666). */
async function files(t, dir, input) {
  const path = join(dir, 'model.safetensors');
  writeFileSync(path, input);
  chmodSync(path, 0o400);
  const handle = await open(path, 'r');
  const temp = join(dir, 'out.safetensors.tmp-abcdef');
  const file = { temp, handle: await open(temp, 'wx', 0o666) };
  t.after(async () => {
    await handle.close();
    await file.handle.close();
  });
  return { path, handle, file, mode: statSync(temp).mode & 0o7777 };
}

test(
  'copyWhole: the temporary file holds the input, keeps its own mode, and a longer old content is gone',
  linuxOnly,
  async (t) => {
    const { dir, bytes } = scratch(t);
    const input = bytes(300_000);
    const { handle, file, mode } = await files(t, dir, input);
    await file.handle.write(bytes(400_000), 0, 400_000, 0); // whatever the file held before
    assert.equal(await copyWhole(handle, file), true);
    assert.deepEqual(new Uint8Array(readFileSync(file.temp)), input);
    assert.equal(statSync(file.temp).mode & 0o7777, mode, "not the input's 0400");
    // The transaction's handle still writes into the copy (the merge writes its tensors through it).
    await file.handle.write(Uint8Array.of(1, 2, 3), 0, 3, 10);
    assert.deepEqual([...readFileSync(file.temp).subarray(10, 13)], [1, 2, 3]);
  },
);

test('copyWhole copies the file the merge opened, even once its path names another', linuxOnly, async (t) => {
  const { dir, bytes } = scratch(t);
  const input = bytes(100_000);
  const { path, handle, file } = await files(t, dir, input);
  const other = join(dir, 'other');
  writeFileSync(other, bytes(200_000));
  renameSync(other, path);
  assert.equal(await copyWhole(handle, file), true);
  assert.deepEqual(new Uint8Array(readFileSync(file.temp)), input);
});

test('copyWhole never creates a temporary file the transaction has removed', linuxOnly, async (t) => {
  const { dir, bytes } = scratch(t);
  const { handle, file } = await files(t, dir, bytes(100_000));
  unlinkSync(file.temp); // as close() or a signal does when the merge fails
  await copyWhole(handle, file);
  assert.equal(existsSync(file.temp), false);
});

test('copyWhole: false, and the temporary file emptied, when the copy fails', linuxOnly, async (t) => {
  const { dir, bytes } = scratch(t);
  const { handle, file } = await files(t, dir, bytes(100_000));
  await file.handle.write(bytes(1000), 0, 1000, 0);
  await handle.close(); // nothing left to copy from
  assert.equal(await copyWhole(handle, file), false);
  assert.equal(statSync(file.temp).size, 0);
});
