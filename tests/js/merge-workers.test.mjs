// mergeInWorkers under Node: the package's Web Worker (web/src/ops/merge-worker.js) runs in worker threads through
// tests/js/helpers/node-web-worker.mjs (Node 20 has no global Worker). A three-shard BF16 base merged by 1, 2 and
// 3 workers, its streams read at once and one after another, must give mergeShards' bytes; a cancelled stream,
// a failure inside a worker (merge --safe on a NaN), an abort and inputs that cannot be sent are checked too.
// The same module in real Web Workers in Chromium: tests/js/web-workers.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { collect, pb, rejectsWith, webDir } from './helpers/common.mjs';
import { NAMES, makeShardedModel as makeModel } from './helpers/sharded-model.mjs';
import { nodeWebWorker } from './helpers/node-web-worker.mjs';

const { mergeInWorkers, mergeShards, SafetensorsError } = pb;
const workerModule = new URL(`file://${join(webDir, 'src', 'ops', 'merge-worker.js')}`);

/** Worker factory that counts the workers made and terminated. */
function countingWorkers() {
  const counts = { made: 0, terminated: 0 };
  const createWorker = () => {
    counts.made++;
    const w = nodeWebWorker(workerModule);
    const terminate = w.terminate;
    w.terminate = () => {
      counts.terminated++;
      return terminate();
    };
    return w;
  };
  return { counts, createWorker };
}

async function expectedFiles(model, options = {}) {
  const out = [];
  for await (const f of mergeShards({ ...model, ...options }))
    out.push({ path: f.path, size: f.size, bytes: await collect(f.stream) });
  return out;
}

const sameFile = (got, want) => {
  assert.equal(got.path, want.path);
  assert.equal(got.size, want.size, want.path);
  assert.ok(Buffer.from(got.bytes).equals(Buffer.from(want.bytes)), `${want.path}: not mergeShards' bytes`);
};

test("mergeInWorkers: 1, 2 and 3 workers, streams read at once or in turn: every file is mergeShards' bytes", async () => {
  const model = await makeModel();
  const expected = await expectedFiles(model);
  assert.deepEqual(
    expected.map((f) => f.path),
    [...NAMES, 'model.safetensors.index.json', 'config.json'],
  );
  for (const workers of [1, 2, 3, 8]) {
    for (const atOnce of [true, false]) {
      const { counts, createWorker } = countingWorkers();
      const progress = [];
      const files = await mergeInWorkers({ ...model, workers, createWorker, onProgress: (p) => progress.push(p) });
      const got = atOnce
        ? await Promise.all(files.map(async (f) => ({ ...f, bytes: await collect(f.stream) })))
        : await (async () => {
            const out = [];
            for (const f of files) out.push({ ...f, bytes: await collect(f.stream) });
            return out;
          })();
      assert.equal(got.length, expected.length);
      got.forEach((f, k) => sameFile(f, expected[k]));
      assert.equal(counts.made, Math.min(workers, 3), 'one worker per shard at most');
      assert.equal(counts.terminated, counts.made, 'every worker let go once every stream ended');
      const last = progress.at(-1);
      assert.equal(last.bytesIn, last.totalIn, 'every source byte counted');
      assert.equal(
        last.bytesOut,
        expected.slice(0, 3).reduce((a, f) => a + f.size, 0),
      );
    }
  }
});

test('mergeInWorkers: a cancelled stream is skipped, the others still come whole; chunks own their buffers', async () => {
  const model = await makeModel();
  const expected = await expectedFiles(model);
  const { counts, createWorker } = countingWorkers();
  const files = await mergeInWorkers({ ...model, workers: 2, createWorker });
  const reader = files[0].stream.getReader();
  const first = await reader.read();
  assert.ok(first.value.length > 0);
  assert.equal(first.value.byteOffset, 0);
  assert.equal(first.value.buffer.byteLength, first.value.length, 'a transferred chunk is its own buffer');
  await reader.cancel();
  for (const k of [1, 2, 3, 4]) sameFile({ ...files[k], bytes: await collect(files[k].stream) }, expected[k]);
  assert.equal(counts.terminated, 2);
});

test("mergeInWorkers: a failure in a worker (--safe on a NaN in shard 3) errors every stream with the core's error", async () => {
  const model = await makeModel({ nanInShard: 2 });
  // mergeShards' own error for the same input.
  const it = mergeShards({ ...model, safe: true });
  let want;
  try {
    for await (const f of it) await collect(f.stream);
  } catch (e) {
    want = e;
  }
  assert.ok(want instanceof SafetensorsError, String(want));
  const { counts, createWorker } = countingWorkers();
  const files = await mergeInWorkers({ ...model, safe: true, workers: 2, createWorker });
  const results = await Promise.allSettled(files.slice(0, 3).map((f) => collect(f.stream)));
  const failed = results.filter((r) => r.status === 'rejected');
  assert.ok(failed.length >= 1);
  for (const r of failed) {
    assert.ok(r.reason instanceof SafetensorsError);
    assert.equal(r.reason.code, want.code);
    assert.equal(r.reason.message, want.message);
    assert.equal(r.reason.tensor, want.tensor);
  }
  assert.equal(results[2].status, 'rejected', 'the failing shard');
  assert.equal(counts.terminated, counts.made, 'the workers are stopped');
});

test('mergeInWorkers: an abort errors every stream with its reason and stops the workers', async () => {
  const model = await makeModel();
  const { counts, createWorker } = countingWorkers();
  const controller = new AbortController();
  const files = await mergeInWorkers({ ...model, workers: 2, createWorker, signal: controller.signal });
  const reader = files[0].stream.getReader();
  await reader.read();
  const reason = new Error('stop');
  controller.abort(reason);
  await assert.rejects(reader.read(), (e) => e === reason);
  await assert.rejects(collect(files[1].stream), (e) => e === reason);
  assert.equal(counts.terminated, counts.made);
});

test('mergeInWorkers: a mismatch rejects before any worker; unsendable inputs and no Worker are TypeErrors', async () => {
  const model = await makeModel();
  const { counts, createWorker } = countingWorkers();
  const wrong = {
    ...model.adapter,
    config: JSON.stringify({ peft_type: 'LORA', r: 8, lora_alpha: 8, target_modules: ['q_proj', 'v_proj'] }),
  };
  await rejectsWith(mergeInWorkers({ ...model, adapter: wrong, createWorker }), 'ShapeMismatch');
  const streamed = { ...model.base, open: (name) => model.files[name].stream() };
  await assert.rejects(
    mergeInWorkers({ ...model, base: streamed, createWorker }),
    (e) => e instanceof TypeError && /shard model-00001-of-00003\.safetensors as a Blob/.test(e.message),
  );
  assert.equal(counts.made, 0);
  if (typeof Worker !== 'function') {
    await assert.rejects(mergeInWorkers(model), (e) => e instanceof TypeError && /needs Web Workers/.test(e.message));
  }
});
