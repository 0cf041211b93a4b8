// The WASM module survives failure: 10,000 consecutive failing calls of every kind leave the malloc heap exactly
// where it was and every later call correct. Its own file, so the heap it measures belongs to nothing else.
// (Issue 10: a module that leaked or trapped on a bad input would be broken for every later caller of an edge
// worker; the counts below are the issue's.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { collect, makeFile, pb } from './helpers/common.mjs';
import { getModule } from '../../web/src/init.js';

const { adapterInfo, combineAdapters, convert, createAdapter, extractAdapter, createMergeStream, inspect, mergeShards, planMerge, readSafetensors, translateAdapter, writeSafetensors, SafetensorsError } = pb;
const module = await getModule();
const CALLS = Number(process.env.PB_SURVIVAL_CALLS ?? 10000);
const enc = (s) => new TextEncoder().encode(s);

const f32 = (...v) => new Uint8Array(Float32Array.from(v).buffer);
const goodFile = makeFile(JSON.stringify({ w: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } }), f32(1, 2));
const base = makeFile(
  JSON.stringify({ 'model.layers.0.self_attn.q_proj.weight': { dtype: 'F32', shape: [2, 2], data_offsets: [0, 16] } }),
  f32(1, 2, 3, 4),
);
const adapterWeights = makeFile(
  JSON.stringify({
    'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight': { dtype: 'F32', shape: [1, 3], data_offsets: [0, 12] },
    'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight': { dtype: 'F32', shape: [2, 1], data_offsets: [12, 20] },
  }),
  f32(1, 1, 1, 1, 1),
);
const config = (extra) => enc(JSON.stringify({ peft_type: 'LORA', r: 1, lora_alpha: 1, target_modules: ['q_proj'], ...extra }));
const shapeMismatch = { weights: adapterWeights, config: config({}) }; // A is 1x3, the base is 2x2
const baseOf = (bytes, index) => ({ open: () => bytes, index });
// Sizes the file declares but does not back: zero-size factors of rank 2^62, and a base config whose head count
// wraps the row order's products (once a heap overwrite, a trap, or a 2^40-entry table in the module).
const Q = 'base_model.model.model.layers.0.self_attn.q_proj';
const zeroSize = {
  weights: makeFile(JSON.stringify({
    [`${Q}.lora_A.weight`]: { dtype: 'F32', shape: [2 ** 62, 0], data_offsets: [0, 0] },
    [`${Q}.lora_B.weight`]: { dtype: 'F32', shape: [0, 2 ** 62], data_offsets: [0, 0] },
  })),
  config: config({}),
};
const twoByFour = {
  weights: makeFile(JSON.stringify({
    [`${Q}.lora_A.weight`]: { dtype: 'F32', shape: [1, 4], data_offsets: [0, 16] },
    [`${Q}.lora_B.weight`]: { dtype: 'F32', shape: [4, 1], data_offsets: [16, 32] },
  }), f32(1, 2, 3, 4, 5, 6, 7, 8)),
  config: config({}),
};
const wrappingHeads = '{"model_type":"llama","num_attention_heads":9223372036854775808,"num_key_value_heads":9223372036854775808}';

async function rejects(promise, code) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof SafetensorsError, `${e?.constructor?.name}: ${e?.message}`);
    if (code) assert.equal(e.code, code, e.message);
    return;
  }
  assert.fail('the call succeeded');
}

// Each kind: a failing call through the public API, awaited to completion.
const KINDS = {
  'inspect: header length past the file': () => rejects(inspect(new Uint8Array([255, 255, 0, 0, 0, 0, 0, 0, 123])), 'InvalidHeaderLength'),
  'inspect: invalid JSON header': () => rejects(inspect(makeFile('{"w":')), 'InvalidHeaderDeserialization'),
  'readSafetensors: truncated data': () =>
    rejects((async () => {
      for await (const _ of readSafetensors(goodFile.subarray(0, goodFile.length - 3)));
    })()),
  'convert: bad input': () => rejects(collect(convert(makeFile('{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', f32(1, 2)), { dtype: 'bf16' }))),
  'writeSafetensors: data of the wrong length': () =>
    rejects(collect(writeSafetensors({ tensors: [{ name: 'w', dtype: 'F32', shape: [2], data: f32(1) }] }))),
  'adapterInfo: malformed config': () => rejects(adapterInfo({ weights: adapterWeights, config: enc('{"peft_type": "LORA", "r": ') }), 'InvalidConfig'),
  'adapterInfo: backreference pattern': () =>
    rejects(adapterInfo({ weights: adapterWeights, config: config({ target_modules: '(a)\\1' }) }), 'InvalidConfig'),
  'adapterInfo: config nested 10,000 deep': () =>
    rejects(adapterInfo({ weights: adapterWeights, config: enc(`{"peft_type":"LORA","r":1,"x":${'['.repeat(10000)}${']'.repeat(10000)}}`) }), 'InvalidConfig'),
  'translateAdapter: unsupported peft_type': () =>
    rejects(translateAdapter({ weights: adapterWeights, config: enc('{"peft_type":"LOHA","r":1}') }, { to: 'kohya' }), 'UnsupportedAdapter'),
  'adapterInfo: zero-size factors of rank 2^62': () => rejects(adapterInfo(zeroSize), 'ShapeMismatch'),
  'translateAdapter: a head count of 2^63': () =>
    rejects(translateAdapter(twoByFour, { to: 'gguf', baseConfig: wrappingHeads }), 'InvalidArgument'),
  'combineAdapters: weights that overflow float32': () =>
    rejects(combineAdapters([twoByFour, twoByFour], { weights: [1e308, 1e308] }), 'InvalidArgument'),
  'createAdapter: a target that matches no module': () =>
    rejects(createAdapter({ base: baseOf(base), targetModules: 'nope' }), 'InvalidArgument'),
  'extractAdapter: rank 0': () => rejects(extractAdapter({ base: baseOf(base), tuned: baseOf(base), rank: 0 }), 'InvalidArgument'),
  'planMerge: shape mismatch': () => rejects(planMerge({ base: baseOf(base), adapter: shapeMismatch }), 'ShapeMismatch'),
  'mergeShards: shard name with traversal': () =>
    rejects((async () => {
      for await (const _ of mergeShards({ base: baseOf(base, '{"weight_map":{"w":"../x.safetensors"}}'), adapter: shapeMismatch }));
    })(), 'InvalidConfig'),
  'createMergeStream: shape mismatch': () =>
    rejects(collect(new Blob([base]).stream().pipeThrough(createMergeStream({ adapter: shapeMismatch }))), 'ShapeMismatch'),
};

test(`${CALLS} consecutive failing calls of every kind: the heap returns to where it started, later calls are correct`, async () => {
  const expected = await inspect(goodFile);
  assert.deepEqual(expected.tensors.map((t) => t.name), ['w']);
  for (const [kind, call] of Object.entries(KINDS)) {
    for (let i = 0; i < 3; ++i) await call(); // warm-up: lazily built tables, Embind's type registry
    const before = module.heapInUse();
    for (let i = 0; i < CALLS; ++i) await call();
    const after = module.heapInUse();
    assert.equal(after, before, `${kind}: ${after - before} bytes still allocated after ${CALLS} failing calls`);
    assert.deepEqual(await inspect(goodFile), expected, `${kind}: a later inspect is still correct`);
  }
  // And the heavy paths still produce correct bytes after all of that.
  const merged = await collect(new Blob([base]).stream().pipeThrough(createMergeStream({
    adapter: { weights: makeFile(JSON.stringify({
      'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight': { dtype: 'F32', shape: [1, 2], data_offsets: [0, 8] },
      'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight': { dtype: 'F32', shape: [2, 1], data_offsets: [8, 16] },
    }), f32(1, 1, 1, 1)), config: config({}) },
  })));
  const info = await inspect(merged);
  const t = info.tensors[0];
  const values = new Float32Array(merged.slice(8 + info.headerSize + t.dataOffsets[0], 8 + info.headerSize + t.dataOffsets[1]).buffer);
  assert.deepEqual([...values], [2, 3, 4, 5], 'W + 1·B·A with B·A all ones');
});
