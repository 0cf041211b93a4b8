// Hostile and huge JSON inputs to `merge`: the native CLI and the npm CLI refuse them alike, at plan time,
// leaving nothing in --out; a large but honest config works in both.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, collect, nativeCli, pb, skipWithoutNativeCli, webDir } from './helpers/common.mjs';

const { mergeShards, SafetensorsError } = pb;
const { openMergeHandles } = await import(join(webDir, 'src', 'ops', 'merge.js'));

const run = (command, args) => {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(command, args, { encoding: 'buffer', timeout: 300000, maxBuffer: 1 << 26 });
  if (r.error) throw r.error;
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  return { status: r.status, stdout: r.stdout.toString('latin1'), stderr: r.stderr.toString('latin1'), seconds };
};
const runBoth = (args) => {
  const native = run(nativeCli, args);
  const js = run(process.execPath, [cliPath, ...args]);
  return { native, js };
};
const outputs = ({ status, stdout, stderr }) => ({ status, stdout, stderr });

function setup(t) {
  if (skipWithoutNativeCli(t)) return null;
  const dir = mkdtempSync(join(tmpdir(), 'pb-hostile-json-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const DEEP = '['.repeat(100000) + ']'.repeat(100000);
const SHARDS = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
const LLAMA_CONFIG = {
  architectures: ['LlamaForCausalLM'],
  model_type: 'llama',
  hidden_size: 32,
  num_attention_heads: 4,
};

const zeros = (dtype, shape) => new Uint8Array(shape.reduce((a, b) => a * b, 1) * (dtype === 'F32' ? 4 : 2));
const safetensors = (tensors) =>
  collect(pb.writeSafetensors({ tensors: tensors.map((t) => ({ ...t, data: t.data ?? zeros(t.dtype, t.shape) })) }));

/** A two-shard LLaMA-shaped base; `index` and `config` replace the index and config.json texts. */
async function writeBase(dir, { index, config } = {}) {
  mkdirSync(dir, { recursive: true });
  const shard = (l) => [
    { name: `model.layers.${l}.self_attn.q_proj.weight`, dtype: 'BF16', shape: [32, 32] },
    { name: `model.layers.${l}.self_attn.v_proj.weight`, dtype: 'BF16', shape: [16, 32] },
  ];
  const weightMap = {};
  for (const [i, name] of SHARDS.entries()) {
    writeFileSync(join(dir, name), await safetensors(shard(i)));
    for (const t of shard(i)) weightMap[t.name] = name;
  }
  writeFileSync(
    join(dir, 'model.safetensors.index.json'),
    index ?? JSON.stringify({ metadata: { total_size: 6144 }, weight_map: weightMap }, null, 2),
  );
  writeFileSync(join(dir, 'config.json'), config ?? JSON.stringify(LLAMA_CONFIG));
  return dir;
}

/** A rank-4 PEFT adapter on layer 0's q_proj; `config` replaces adapter_config.json's text. */
async function writeAdapter(dir, config) {
  mkdirSync(dir, { recursive: true });
  const f = (n) => new Uint8Array(new Float32Array(n).fill(0.01).buffer);
  const key = 'base_model.model.model.layers.0.self_attn.q_proj';
  writeFileSync(
    join(dir, 'adapter_model.safetensors'),
    await safetensors([
      { name: `${key}.lora_A.weight`, dtype: 'F32', shape: [4, 32], data: f(128) },
      { name: `${key}.lora_B.weight`, dtype: 'F32', shape: [32, 4], data: f(128) },
    ]),
  );
  writeFileSync(
    join(dir, 'adapter_config.json'),
    config ?? JSON.stringify({ peft_type: 'LORA', r: 4, lora_alpha: 8, target_modules: ['q_proj'] }),
  );
  return dir;
}

/** Both CLIs refuse `merge` the same way (bytes and exit code), quickly, and --out stays as it was. */
function assertRefusedAlike(dir, base, adapter, code, message) {
  for (const json of [false, true]) {
    const out = join(dir, `out${json ? '-json' : ''}`);
    const args = ['merge', '--base', base, '--adapter', adapter, '--out', out, ...(json ? ['--json'] : [])];
    const { native, js } = runBoth(args);
    assert.deepEqual(outputs(js), outputs(native), args.join(' '));
    assert.notEqual(native.status, 0);
    if (json) {
      const e = JSON.parse(native.stdout).error;
      assert.equal(e.code, code);
      assert.match(e.message, message);
    } else {
      assert.match(native.stderr, message);
    }
    assert.ok(!existsSync(out), `${out} was created`);
    assert.ok(native.seconds < 20 && js.seconds < 20, `native ${native.seconds} s, npm ${js.seconds} s`);
  }
  // An --out that exists keeps exactly what it had: no shard, no temporary file.
  const kept = join(dir, 'kept');
  mkdirSync(kept, { recursive: true });
  writeFileSync(join(kept, 'note.txt'), 'mine');
  const { native, js } = runBoth(['merge', '--base', base, '--adapter', adapter, '--out', kept]);
  assert.deepEqual(outputs(js), outputs(native));
  assert.deepEqual(readdirSync(kept), ['note.txt']);
}

test('merge: an index with a 100,000-deep array is one precise error in both CLIs, before any output', async (t) => {
  const dir = setup(t);
  if (!dir) return;
  const weightMap = Object.fromEntries(
    SHARDS.flatMap((s, l) => ['q_proj', 'v_proj'].map((p) => [`model.layers.${l}.self_attn.${p}.weight`, s])),
  );
  const index = `{"metadata": {"total_size": 6144, "deep": ${DEEP}}, "weight_map": ${JSON.stringify(weightMap)}}`;
  const base = await writeBase(join(dir, 'base'), { index });
  const adapter = await writeAdapter(join(dir, 'adapter'));
  assertRefusedAlike(
    dir,
    base,
    adapter,
    'InvalidConfig',
    /model\.safetensors\.index\.json: nesting deeper than 128 levels at byte 168/,
  );
});

test('merge: a 100,000-deep config.json or adapter_config.json is refused alike, before any output', async (t) => {
  const dir = setup(t);
  if (!dir) return;
  const adapter = await writeAdapter(join(dir, 'adapter'));
  const deepBase = await writeBase(join(dir, 'deep-base'), { config: `{"model_type": "llama", "x": ${DEEP}}` });
  assertRefusedAlike(
    dir,
    deepBase,
    adapter,
    'InvalidConfig',
    /config\.json: nesting deeper than 128 levels at byte 156/,
  );

  const base = await writeBase(join(dir, 'base'));
  const deepAdapter = await writeAdapter(
    join(dir, 'deep-adapter'),
    `{"peft_type": "LORA", "r": 4, "loftq_config": ${DEEP}}`,
  );
  assertRefusedAlike(
    dir,
    base,
    deepAdapter,
    'InvalidConfig',
    /adapter_config\.json: nesting deeper than 128 levels at byte 173/,
  );
});

test('merge: "weight_map": {} is one precise error in both CLIs, and mergeShards rejects it', async (t) => {
  const dir = setup(t);
  if (!dir) return;
  const base = await writeBase(join(dir, 'base'), { index: '{"metadata": {}, "weight_map": {}}' });
  const adapter = await writeAdapter(join(dir, 'adapter'));
  assertRefusedAlike(
    dir,
    base,
    adapter,
    'InvalidConfig',
    /model\.safetensors\.index\.json: weight_map is empty: it names no shard/,
  );

  const it = mergeShards({
    base: { index: '{"weight_map": {}}', open: () => assert.fail('no shard may be opened') },
    adapter: {
      weights: new Uint8Array(readFileSync(join(adapter, 'adapter_model.safetensors'))),
      config: readFileSync(join(adapter, 'adapter_config.json'), 'utf8'),
    },
  });
  await assert.rejects(
    it.next(),
    (e) => e instanceof SafetensorsError && e.code === 'InvalidConfig' && /weight_map is empty/.test(e.message),
  );
  assert.equal(openMergeHandles(), 0);
});

test('merge: a 100,000-key adapter_config.json and config.json work, with identical output in both CLIs', async (t) => {
  const dir = setup(t);
  if (!dir) return;
  const many = (prefix) => Array.from({ length: 100000 }, (_, i) => `"${prefix}${i}": ${i}`).join(', ');
  const base = await writeBase(join(dir, 'base'), {
    config: `{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "float32", ${many('extra_')}}`,
  });
  const adapter = await writeAdapter(
    join(dir, 'adapter'),
    `{"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ["q_proj"], "alpha_pattern": {${many('nothing.matches.')}}}`,
  );
  const args = (out) => ['merge', '--base', base, '--adapter', adapter, '--out', join(dir, out), '--dtype', 'bf16'];
  const native = run(nativeCli, args('native-out'));
  assert.equal(native.status, 0, native.stderr);
  const js = run(process.execPath, [cliPath, ...args('js-out')]);
  assert.equal(js.status, 0, js.stderr);
  // The outcome line (size, seconds, rate, peak memory) is measured.
  const unmeasured = (s) => s.replace(/\n[\d.]+ [kMGTPE]?B in [\d.]+ s \([^\n]*\n$/, '\n<measured>\n');
  assert.match(unmeasured(native.stdout), /\n<measured>\n$/);
  assert.equal(unmeasured(js.stdout), unmeasured(native.stdout));
  for (const name of readdirSync(join(dir, 'native-out')))
    assert.ok(readFileSync(join(dir, 'native-out', name)).equals(readFileSync(join(dir, 'js-out', name))), name);
  const config = JSON.parse(readFileSync(join(dir, 'native-out', 'config.json'), 'utf8'));
  assert.equal(config.torch_dtype, 'bfloat16');
  assert.equal(config.extra_99999, 99999);
  t.diagnostic(`100k-key configs: native ${native.seconds.toFixed(2)} s, npm ${js.seconds.toFixed(2)} s`);
});
