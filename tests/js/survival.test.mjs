// The WASM module survives failure: 10,000 consecutive failing calls of every kind leave the malloc heap exactly
// where it was and every later call correct. Its own file, so the heap it measures belongs to nothing else.
// The adapter cache too: hostile registrations read from the local Hub stand-in and
// hostile compositions over registered adapters.
// (A module that leaked or trapped on a bad input would be broken for every later caller of an edge worker,
// hence thousands of calls in a row.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { collect, makeFile, pb } from './helpers/common.mjs';
import { getModule } from '../../web/src/init.js';
import { startHub } from '../hub/server.mjs';

const {
  adapterInfo,
  combineAdapters,
  convert,
  createAdapter,
  createAdapterCache,
  extractAdapter,
  createMergeStream,
  inspect,
  mergeShards,
  planMerge,
  readSafetensors,
  translateAdapter,
  writeSafetensors,
  SafetensorsError,
} = pb;
const module = await getModule();
const CALLS = Number(process.env.PB_SURVIVAL_CALLS ?? 10000);
// A registration is 4 HTTP requests to the Hub stand-in (listing, config, header, its CDN redirect): about 100 ms
// each on the shared 2-core test machine, so the hostile registrations run a twentieth of CALLS each (the heap is
// compared exactly, so one leaked byte per call would show after any number); PB_SURVIVAL_REGISTRATIONS=10000 for
// the full count.
const REGISTRATIONS = Number(process.env.PB_SURVIVAL_REGISTRATIONS ?? Math.ceil(CALLS / 20));
const enc = (s) => new TextEncoder().encode(s);

const f32 = (...v) => new Uint8Array(Float32Array.from(v).buffer);
const goodFile = makeFile(JSON.stringify({ w: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } }), f32(1, 2));
const base = makeFile(
  JSON.stringify({ 'model.layers.0.self_attn.q_proj.weight': { dtype: 'F32', shape: [2, 2], data_offsets: [0, 16] } }),
  f32(1, 2, 3, 4),
);
const adapterWeights = makeFile(
  JSON.stringify({
    'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight': {
      dtype: 'F32',
      shape: [1, 3],
      data_offsets: [0, 12],
    },
    'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight': {
      dtype: 'F32',
      shape: [2, 1],
      data_offsets: [12, 20],
    },
  }),
  f32(1, 1, 1, 1, 1),
);
const config = (extra) =>
  enc(JSON.stringify({ peft_type: 'LORA', r: 1, lora_alpha: 1, target_modules: ['q_proj'], ...extra }));
const shapeMismatch = { weights: adapterWeights, config: config({}) }; // A is 1x3, the base is 2x2
const baseOf = (bytes, index) => ({ open: () => bytes, index });
// Sizes the file declares but does not back: zero-size factors of rank 2^62, and a base config whose head count
// wraps the row order's products (once a heap overwrite, a trap, or a 2^40-entry table in the module).
const Q = 'base_model.model.model.layers.0.self_attn.q_proj';
const zeroSize = {
  weights: makeFile(
    JSON.stringify({
      [`${Q}.lora_A.weight`]: { dtype: 'F32', shape: [2 ** 62, 0], data_offsets: [0, 0] },
      [`${Q}.lora_B.weight`]: { dtype: 'F32', shape: [0, 2 ** 62], data_offsets: [0, 0] },
    }),
  ),
  config: config({}),
};
const twoByFour = {
  weights: makeFile(
    JSON.stringify({
      [`${Q}.lora_A.weight`]: { dtype: 'F32', shape: [1, 4], data_offsets: [0, 16] },
      [`${Q}.lora_B.weight`]: { dtype: 'F32', shape: [4, 1], data_offsets: [16, 32] },
    }),
    f32(1, 2, 3, 4, 5, 6, 7, 8),
  ),
  config: config({}),
};
const wrappingHeads =
  '{"model_type":"llama","num_attention_heads":9223372036854775808,"num_key_value_heads":9223372036854775808}';

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
  'inspect: header length past the file': () =>
    rejects(inspect(new Uint8Array([255, 255, 0, 0, 0, 0, 0, 0, 123])), 'InvalidHeaderLength'),
  'inspect: invalid JSON header': () => rejects(inspect(makeFile('{"w":')), 'InvalidHeaderDeserialization'),
  'readSafetensors: truncated data': () =>
    rejects(
      (async () => {
        for await (const _ of readSafetensors(goodFile.subarray(0, goodFile.length - 3)));
      })(),
    ),
  'convert: bad input': () =>
    rejects(
      collect(
        convert(makeFile('{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', f32(1, 2)), { dtype: 'bf16' }),
      ),
    ),
  'writeSafetensors: data of the wrong length': () =>
    rejects(collect(writeSafetensors({ tensors: [{ name: 'w', dtype: 'F32', shape: [2], data: f32(1) }] }))),
  'adapterInfo: malformed config': () =>
    rejects(adapterInfo({ weights: adapterWeights, config: enc('{"peft_type": "LORA", "r": ') }), 'InvalidConfig'),
  'adapterInfo: backreference pattern': () =>
    rejects(adapterInfo({ weights: adapterWeights, config: config({ target_modules: '(a)\\1' }) }), 'InvalidConfig'),
  'adapterInfo: config nested 10,000 deep': () =>
    rejects(
      adapterInfo({
        weights: adapterWeights,
        config: enc(`{"peft_type":"LORA","r":1,"x":${'['.repeat(10000)}${']'.repeat(10000)}}`),
      }),
      'InvalidConfig',
    ),
  'translateAdapter: unsupported peft_type': () =>
    rejects(
      translateAdapter({ weights: adapterWeights, config: enc('{"peft_type":"LOHA","r":1}') }, { to: 'kohya' }),
      'UnsupportedAdapter',
    ),
  'adapterInfo: zero-size factors of rank 2^62': () => rejects(adapterInfo(zeroSize), 'ShapeMismatch'),
  'translateAdapter: a head count of 2^63': () =>
    rejects(translateAdapter(twoByFour, { to: 'gguf', baseConfig: wrappingHeads }), 'InvalidArgument'),
  'combineAdapters: weights that overflow float32': () =>
    rejects(combineAdapters([twoByFour, twoByFour], { weights: [1e308, 1e308] }), 'InvalidArgument'),
  'createAdapter: a target that matches no module': () =>
    rejects(createAdapter({ base: baseOf(base), targetModules: 'nope' }), 'InvalidArgument'),
  'extractAdapter: rank 0': () =>
    rejects(extractAdapter({ base: baseOf(base), tuned: baseOf(base), rank: 0 }), 'InvalidArgument'),
  'planMerge: shape mismatch': () =>
    rejects(planMerge({ base: baseOf(base), adapter: shapeMismatch }), 'ShapeMismatch'),
  'mergeShards: shard name with traversal': () =>
    rejects(
      (async () => {
        for await (const _ of mergeShards({
          base: baseOf(base, '{"weight_map":{"w":"../x.safetensors"}}'),
          adapter: shapeMismatch,
        }));
      })(),
      'InvalidConfig',
    ),
  'createMergeStream: shape mismatch': () =>
    rejects(
      collect(new Blob([base]).stream().pipeThrough(createMergeStream({ adapter: shapeMismatch }))),
      'ShapeMismatch',
    ),
};

test(`${CALLS} consecutive failing calls of every kind: the heap returns to where it started, later calls are correct`, async () => {
  const expected = await inspect(goodFile);
  assert.deepEqual(
    expected.tensors.map((t) => t.name),
    ['w'],
  );
  for (const [kind, call] of Object.entries(KINDS)) {
    for (let i = 0; i < 3; ++i) await call(); // warm-up: lazily built tables, Embind's type registry
    const before = module.heapInUse();
    for (let i = 0; i < CALLS; ++i) await call();
    const after = module.heapInUse();
    assert.equal(after, before, `${kind}: ${after - before} bytes still allocated after ${CALLS} failing calls`);
    assert.deepEqual(await inspect(goodFile), expected, `${kind}: a later inspect is still correct`);
  }
  // And the heavy paths still produce correct bytes after all of that.
  const merged = await collect(
    new Blob([base])
      .stream()
      .pipeThrough(
        createMergeStream({
          adapter: {
            weights: makeFile(
              JSON.stringify({
                'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight': {
                  dtype: 'F32',
                  shape: [1, 2],
                  data_offsets: [0, 8],
                },
                'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight': {
                  dtype: 'F32',
                  shape: [2, 1],
                  data_offsets: [8, 16],
                },
              }),
              f32(1, 1, 1, 1),
            ),
            config: config({}),
          },
        }),
      ),
  );
  const info = await inspect(merged);
  const t = info.tensors[0];
  const values = new Float32Array(
    merged.slice(8 + info.headerSize + t.dataOffsets[0], 8 + info.headerSize + t.dataOffsets[1]).buffer,
  );
  assert.deepEqual([...values], [2, 3, 4, 5], 'W + 1·B·A with B·A all ones');
});

test(`${CALLS} consecutive failing calls of every kind on the adapter cache: hostile registrations and compositions; the heap returns, answers stay correct`, async (t) => {
  const good = {
    weights: makeFile(
      JSON.stringify({
        [`${Q}.lora_A.weight`]: { dtype: 'F32', shape: [1, 2], data_offsets: [0, 8] },
        [`${Q}.lora_B.weight`]: { dtype: 'F32', shape: [2, 1], data_offsets: [8, 16] },
      }),
      f32(1, 2, 3, 4),
    ),
    config: config({}),
  };
  const repo = (a) => ({ 'adapter_model.safetensors': a.weights, 'adapter_config.json': a.config });
  const hub = await startHub({
    files: {
      'me/good': repo(good),
      'me/zero': repo(zeroSize),
      'me/malformed': repo({ weights: good.weights, config: enc('{"peft_type": "LORA", "r": ') }),
      'me/redos': repo({ weights: good.weights, config: config({ target_modules: '(a)\\1' }) }),
      'me/mismatch': repo(shapeMismatch),
      'me/base': {
        'model.safetensors': base,
        'config.json': '{"model_type":"llama","architectures":["LlamaForCausalLM"]}',
      },
    },
  });
  t.after(() => hub.close());
  const cache = createAdapterCache({
    budgetBytes: 1 << 20,
    endpoint: hub.endpoint,
    retryDelay: 1,
    maxTerms: 3,
    maxRank: 2,
    maxRegistrations: 4,
  });
  t.after(() => cache.close());
  for (const id of ['a', 'b', 'c']) await cache.register(id, { repo: 'me/good', base: { repo: 'me/base' } });
  const M = 'model.layers.0.self_attn.q_proj';
  const weight = f32(1, 2, 3, 4);
  const answers = async () => {
    const d = await cache.compose(
      [
        { id: 'a', scale: 0.5 },
        { id: 'b', scale: 2 },
      ],
      M,
    );
    const file = await cache.composeAdapter([
      { id: 'a', scale: 0.5 },
      { id: 'b', scale: 2 },
    ]);
    return {
      A: d.A,
      B: d.B,
      merged: d.applyTo(weight, { dtype: 'F32', shape: [2, 2] }),
      config: file.config,
      weights: await collect(file.stream()),
    };
  };
  const expected = await answers();
  // W + (0.5 + 2)·B·A with B·A = [[3, 6], [4, 8]] (A = [1, 2], B = [3, 4]ᵀ)
  assert.deepEqual(
    [...new Float32Array(expected.merged.slice().buffer)],
    [1 + 2.5 * 3, 2 + 2.5 * 6, 3 + 2.5 * 4, 4 + 2.5 * 8],
  );

  const CACHE_KINDS = {
    'register: zero-size factors of rank 2^62': () =>
      rejects(cache.register('x', { repo: 'me/zero' }), 'ShapeMismatch'),
    'register: malformed adapter_config.json': () =>
      rejects(cache.register('x', { repo: 'me/malformed' }), 'InvalidConfig'),
    'register: a backreference pattern': () => rejects(cache.register('x', { repo: 'me/redos' }), 'InvalidConfig'),
    'register: an adapter that does not fit its base': () =>
      rejects(cache.register('x', { repo: 'me/mismatch', base: { repo: 'me/base' } }), 'ShapeMismatch'),
    'register: a missing repo': () => rejects(cache.register('x', { repo: 'me/none' }), 'IoError'),
    'compose: more terms than maxTerms': () => rejects(cache.compose(Array(4).fill({ id: 'a' }), M), 'InvalidArgument'),
    'compose: a rank above maxRank': () =>
      rejects(cache.compose([{ id: 'a' }, { id: 'b' }, { id: 'c' }], M), 'LimitExceeded'),
    'composeAdapter: a rank above maxRank': () =>
      rejects(cache.composeAdapter([{ id: 'a' }, { id: 'b' }, { id: 'c' }]), 'LimitExceeded'),
    'module: a module the adapter does not have': () => rejects(cache.module('a', 'model.layers.9.mlp.nope')),
    'applyTo: a weight of another shape': () =>
      rejects(
        (async () =>
          (await cache.compose([{ id: 'a' }], M)).applyTo(f32(1, 2, 3, 4, 5, 6), { dtype: 'F32', shape: [2, 3] }))(),
      ),
  };
  for (const [kind, call] of Object.entries(CACHE_KINDS)) {
    const calls = kind.startsWith('register') ? REGISTRATIONS : CALLS;
    for (let i = 0; i < 3; ++i) await call(); // warm-up
    const before = module.heapInUse();
    const started = performance.now();
    for (let i = 0; i < calls; ++i) await call();
    const after = module.heapInUse();
    t.diagnostic(`${kind}: ${calls} calls in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    assert.equal(after, before, `${kind}: ${after - before} bytes still allocated after ${calls} failing calls`);
    assert.deepEqual(await answers(), expected, `${kind}: later compositions are still correct`);
  }
  assert.equal(cache.stats().registered, 3);
});
