// One dtype vocabulary for every `dtype` option, read by the core (core/dtype.h ParseFloatDtypeOption): the JS
// entry points take every spelling the CLIs' --dtype takes (bfloat16, FP16, half…) with the bytes of the short
// name, and refuse anything else with SafetensorsError InvalidArgument and the CLIs' message.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { collect, makeFile, rejectsWith, repoRoot, webDir } from './helpers/common.mjs';

const pb = await import(join(webDir, 'src', 'node.js'));
const corpus = join(repoRoot, 'tests', 'golden', 'corpus');
const LLAMA = 'llama_lora_f32';
const BAD = /unknown dtype `f8` \(expected bf16, f16 or f32\)/;

async function streamsToFiles(files) {
  const out = {};
  for (const f of files) out[f.path] = await collect(f.stream);
  return out;
}

function mergeInputs() {
  const baseDir = join(corpus, LLAMA, 'base');
  const adapterDir = join(corpus, LLAMA, 'adapter');
  return {
    base: {
      index: null,
      config: new Uint8Array(readFileSync(join(baseDir, 'config.json'))),
      open: (name) => new Uint8Array(readFileSync(join(baseDir, name))),
    },
    adapter: {
      weights: new Uint8Array(readFileSync(join(adapterDir, 'adapter_model.safetensors'))),
      config: new Uint8Array(readFileSync(join(adapterDir, 'adapter_config.json'))),
    },
  };
}

async function merged(dtype) {
  const files = {};
  for await (const { path, stream } of pb.mergeShards({ ...mergeInputs(), dtype })) files[path] = await collect(stream);
  return files;
}

const f32File = () =>
  makeFile(
    JSON.stringify({ w: { dtype: 'F32', shape: [3], data_offsets: [0, 12] } }),
    new Uint8Array(new Float32Array([1.5, -2.25, 3.0078125]).buffer),
  );

// Each entry point: the output for a dtype spelling, compared as bytes (or JSON text).
const entryPoints = {
  convert: async (dtype) => collect(pb.convert(f32File(), { dtype })),
  merge: merged,
  create: async (dtype) => {
    const made = await pb.createAdapter({
      base: join(corpus, 'llama_dora', 'base'),
      targetModules: 'q_proj',
      seed: 3,
      dtype,
    });
    return { config: made.config, files: await streamsToFiles(made.files) };
  },
  extract: async (dtype) => {
    const made = await pb.extractAdapter({
      base: join(corpus, LLAMA, 'base'),
      tuned: join(corpus, LLAMA, 'peft_merged'),
      rank: 8,
      dtype,
    });
    return { config: made.config, files: await streamsToFiles(made.files) };
  },
  combine: async (dtype) => {
    const adapter = join(corpus, LLAMA, 'adapter');
    const made = await pb.combineAdapters([adapter, adapter], { weights: [1, 0.5], dtype });
    return made.files.map((f) => [f.name, f.bytes]);
  },
};

for (const [name, run] of Object.entries(entryPoints)) {
  test(`${name}: 'bfloat16' and 'BF16' are bf16, 'Half' is f16; a bad dtype is InvalidArgument`, async () => {
    const bf16 = await run('bf16');
    assert.deepEqual(await run('bfloat16'), bf16);
    assert.deepEqual(await run('BF16'), bf16);
    assert.deepEqual(await run('Half'), await run('f16'));
    assert.notDeepEqual(bf16, await run('f32'));
    await rejectsWith(
      Promise.resolve().then(() => run('f8')),
      'InvalidArgument',
      BAD,
    );
  });
}
