// A failure inside the WebAssembly module never outlives its call (web/src/module-guard.js). The
// traps below are real: the benchmark hook benchMergeRows(65536, 32768, …) sizes its buffer as rows·cols·2, which
// wraps to 0 in wasm32, then writes 2^31 values from there: it overwrites the heap until it runs off the end of
// memory ("memory access out of bounds"), leaving an instance whose heap is garbage, as hostile inputs once
// did. Armed inside an API's own call (its Embind class replaced on the instance by one that traps), the
// call fails with the engine's error, the instance is discarded, and the next call of the same API, in a fresh
// instance, returns exactly what it returned before; objects tied to the dead instance fail with ModuleDiscarded.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { collect, makeFile, pb } from './helpers/common.mjs';
import { writeAdapter } from './helpers/remote-model.mjs';
import { startHub } from '../hub/server.mjs';
import { discardedInstances, getModule } from '../../web/src/init.js';

const {
  adapterInfo,
  combineAdapters,
  createAdapter,
  createAdapterCache,
  createMergeStream,
  createWriter,
  extractAdapter,
  inspect,
  translateAdapter,
  writeSafetensors,
} = pb;

const enc = (s) => new TextEncoder().encode(s);
const f32 = (...v) => new Uint8Array(Float32Array.from(v).buffer);
const Q = 'base_model.model.model.layers.0.self_attn.q_proj';
const W = 'model.layers.0.self_attn.q_proj.weight';
const config = enc(JSON.stringify({ peft_type: 'LORA', r: 1, lora_alpha: 1, target_modules: ['q_proj'] }));
const adapter = {
  weights: makeFile(
    JSON.stringify({
      [`${Q}.lora_A.weight`]: { dtype: 'F32', shape: [1, 2], data_offsets: [0, 8] },
      [`${Q}.lora_B.weight`]: { dtype: 'F32', shape: [2, 1], data_offsets: [8, 16] },
    }),
    f32(1, 2, 3, 4),
  ),
  config,
};
const weightFile = (...v) =>
  makeFile(JSON.stringify({ [W]: { dtype: 'F32', shape: [2, 2], data_offsets: [0, 16] } }), f32(...v));
const base = weightFile(1, 2, 3, 4);
const tuned = weightFile(2, 4, 6, 8);
const baseOf = (bytes) => ({ open: () => bytes });
const mergeOf = (bytes) => collect(new Blob([bytes]).stream().pipeThrough(createMergeStream({ adapter })));

/** A real trap in the current instance. */
async function trapNow() {
  const module = await getModule();
  assert.throws(
    () => module.benchMergeRows(65536, 32768, 1, 1, false),
    (e) => e instanceof WebAssembly.RuntimeError && /out of bounds/.test(e.message),
  );
}

/** The next `new <className>(…)` in the current instance traps (the instance's own class replaced: it dies with it). */
async function armTrap(className) {
  const module = await getModule();
  assert.equal(typeof module[className], 'function', className);
  module[className] = function trapping() {
    module.benchMergeRows(65536, 32768, 1, 1, false);
  };
}

/** A result whose files are streams, with each file's bytes instead (read in order, each to the end). */
async function withBytes({ files, ...rest }) {
  const bytes = [];
  for (const f of files) bytes.push([f.path, await collect(f.stream)]);
  return { ...rest, bytes };
}

// Each API: the class its call makes first, and the call.
const APIS = {
  inspect: ['Reader', () => inspect(base)],
  adapterInfo: ['JobHandle', () => adapterInfo(adapter)],
  translateAdapter: ['JobHandle', () => translateAdapter(adapter, { to: 'kohya' })],
  combineAdapters: ['CombineJob', () => combineAdapters([adapter, adapter], { weights: [1, 0.5] })],
  createAdapter: [
    'AdapterCreator',
    async () => withBytes(await createAdapter({ base: baseOf(base), targetModules: 'q_proj' })),
  ],
  extractAdapter: [
    'ExtractJob',
    async () => withBytes(await extractAdapter({ base: baseOf(base), tuned: baseOf(tuned), rank: 1 })),
  ],
  createMergeStream: ['StreamMerger', () => mergeOf(base)],
  writeSafetensors: [
    'Writer',
    () => collect(writeSafetensors({ tensors: [{ name: 'w', dtype: 'F32', shape: [2], data: f32(1, 2) }] })),
  ],
};

test("a trap inside each API's call fails that call only: the instance is discarded and the next call is correct", async () => {
  const expected = {};
  for (const [name, [, call]] of Object.entries(APIS)) expected[name] = await call();
  for (const [name, [className, call]] of Object.entries(APIS)) {
    const before = discardedInstances();
    await armTrap(className);
    await assert.rejects(
      call(),
      (e) => e instanceof WebAssembly.RuntimeError,
      `${name}: the trapping call fails with the engine's error`,
    );
    assert.equal(discardedInstances(), before + 1, `${name}: the instance was discarded`);
    assert.deepEqual(await call(), expected[name], `${name}: the next call, in a fresh instance, is correct`);
    assert.equal(discardedInstances(), before + 1, `${name}: and nothing else was discarded`);
  }
});

test('objects tied to a discarded instance fail with ModuleDiscarded; new ones work', async () => {
  const discarded = (e) =>
    e?.code === 'ModuleDiscarded' &&
    /discarded after a failure inside it \(RuntimeError: memory access out of bounds\)/.test(e.message);
  // An open writer, half written.
  const writer = await createWriter({ tensors: [{ name: 'w', dtype: 'F32', shape: [4] }] });
  const out = collect(writer.readable);
  out.catch(() => {});
  await writer.write(f32(1, 2));
  // A streaming merge, half fed.
  let feed;
  const merged = collect(new ReadableStream({ start: (c) => (feed = c) }).pipeThrough(createMergeStream({ adapter })));
  merged.catch(() => {});
  feed.enqueue(base.subarray(0, 20));
  await new Promise((resolve) => setTimeout(resolve, 20));

  await trapNow();
  await assert.rejects(writer.write(f32(3, 4)), discarded, 'the writer');
  writer.abort(new Error('done'));
  feed.enqueue(base.subarray(20));
  feed.close();
  await assert.rejects(merged, discarded, 'the merge stream');

  // New ones, in a fresh instance: correct bytes.
  const again = await createWriter({ tensors: [{ name: 'w', dtype: 'F32', shape: [4] }] });
  const bytes = collect(again.readable);
  await again.write(f32(1, 2, 3, 4));
  await again.close();
  const info = await inspect(await bytes);
  assert.deepEqual(
    info.tensors.map((t) => [t.name, t.dtype, t.shape]),
    [['w', 'F32', [4]]],
  );
  const m = await mergeOf(base);
  const t = (await inspect(m)).tensors[0];
  const h = (await inspect(m)).headerSize;
  assert.deepEqual(
    [...new Float32Array(m.slice(8 + h + t.dataOffsets[0], 8 + h + t.dataOffsets[1]).buffer)],
    [1 + 3, 2 + 6, 3 + 4, 4 + 8],
    'W + B·A',
  );
});

test('an Embind argument error (checked before any wasm runs) leaves the instance in place', async () => {
  const module = await getModule();
  const before = discardedInstances();
  assert.throws(
    () => module.urlOrigin(12),
    (e) => e.name === 'BindingError',
  );
  assert.equal(discardedInstances(), before);
  assert.equal(await getModule(), module);
  assert.equal(module.urlOrigin('https://example.com/a/b'), 'https://example.com');
});

test('an adapter cache of a discarded instance says so and fails with ModuleDiscarded; a new cache serves the same bytes', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pb-trap-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  await writeAdapter(join(dir, 'sql'));
  await writeAdapter(join(dir, 'chat'), { rank: 4 });
  const hub = await startHub({ files: { 'me/sql': join(dir, 'sql'), 'me/chat': join(dir, 'chat') } });
  t.after(() => hub.close());
  const options = { budgetBytes: 1 << 20, endpoint: hub.endpoint, retryDelay: 10 };
  const Q0 = 'model.layers.0.self_attn.q_proj';
  const list = [
    { id: 'sql', scale: 0.5 },
    { id: 'chat', scale: 2 },
  ];
  const served = async (cache) => {
    const d = await cache.compose(list, Q0);
    const adapterFile = await cache.composeAdapter(list);
    return { A: d.A, B: d.B, config: adapterFile.config, weights: await collect(adapterFile.stream()) };
  };

  const cache = createAdapterCache(options);
  await cache.register('sql', { repo: 'me/sql' });
  await cache.register('chat', { repo: 'me/chat' });
  const expected = await served(cache);
  assert.equal(cache.discarded, false);

  // A trap inside the cache's own composition (its ServingMath's compose, in this instance).
  const module = await getModule();
  module.ServingMath.prototype.compose = function trapping() {
    module.benchMergeRows(65536, 32768, 1, 1, false);
  };
  await assert.rejects(
    cache.compose(list, 'model.layers.1.self_attn.q_proj'),
    (e) => e instanceof WebAssembly.RuntimeError,
  );
  assert.equal(cache.discarded, true);
  const discarded = (e) => e?.code === 'ModuleDiscarded' && /RuntimeError: memory access out of bounds/.test(e.message);
  await assert.rejects(cache.compose(list, Q0), discarded, 'compose');
  await assert.rejects(cache.composeAdapter(list), discarded, 'composeAdapter');
  await assert.rejects(cache.register('sql', { repo: 'me/sql' }), discarded, 'register');
  await assert.rejects(cache.checkTerms(2), discarded, 'checkTerms');
  await cache.close(); // frees nothing (the instance is gone) and does not throw

  const fresh = createAdapterCache(options);
  await fresh.register('sql', { repo: 'me/sql' });
  await fresh.register('chat', { repo: 'me/chat' });
  assert.deepEqual(await served(fresh), expected);
  assert.equal(fresh.discarded, false);
  await fresh.close();
});
