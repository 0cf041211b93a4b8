// No silent no-op, no silent loss: what used to succeed while changing nothing (a merge into a quantized base, a
// --quantize that quantizes nothing) or while dropping what it was given (translate or merge through the JS API,
// combine) is refused with a precise error, the same in both CLIs (the native one and the npm one over WASM) and
// the JS API, each rule once in the core; allowPartial / --allow-partial writes the rest where a loss is a choice.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, collect, hasNativeCli, nativeCli, rejectsWith, repoRoot, webDir } from './helpers/common.mjs';

const pb = await import(join(webDir, 'src', 'node.js')); // paths are folders and files in Node

const examples = join(repoRoot, 'examples');
const MODEL = join(examples, 'tiny-llama.safetensors');
const LORA = join(examples, 'tiny-llama-lora');

const run = (command, args) => {
  const r = spawnSync(command, args, { encoding: 'buffer', timeout: 120000 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout.toString('latin1'), stderr: r.stderr.toString('latin1') };
};
const npm = (args) => run(process.execPath, [cliPath, ...args]);
const clis = [['npm', npm]];
if (hasNativeCli) clis.push(['native', (args) => run(nativeCli, args)]);

function work(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-silent-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Runs `args(name)` in both CLIs; asserts the same status, stdout and stderr; returns the npm CLI's result. */
function both(args) {
  const results = clis.map(([name, cli]) => [name, cli(args(name))]);
  for (const [name, r] of results.slice(1)) {
    assert.equal(r.status, results[0][1].status, `${name}: exit status (${r.stderr})`);
    assert.equal(r.stderr, results[0][1].stderr, `${name} prints on stderr what ${results[0][0]} prints`);
    assert.equal(r.stdout, results[0][1].stdout, `${name} prints on stdout what ${results[0][0]} prints`);
  }
  return results[0][1];
}

/** A safetensors file's tensors: name -> {dtype, shape, bytes}. */
function readTensors(file) {
  const bytes = readFileSync(file);
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8'));
  const out = {};
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    out[name] = {
      dtype: t.dtype,
      shape: t.shape,
      bytes: bytes.subarray(8 + n + t.data_offsets[0], 8 + n + t.data_offsets[1]),
    };
  }
  return out;
}

/** A safetensors file from {name: {dtype, shape, bytes}}. */
function safetensors(tensors) {
  const header = {};
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.bytes.length] };
    offset += t.bytes.length;
  }
  let json = JSON.stringify(header);
  while ((8 + json.length) % 8) json += ' ';
  const out = Buffer.alloc(8 + json.length + offset);
  out.writeBigUInt64LE(BigInt(json.length), 0);
  out.write(json, 8, 'utf8');
  let at = 8 + json.length;
  for (const t of Object.values(tensors)) {
    Buffer.from(t.bytes).copy(out, at);
    at += t.bytes.length;
  }
  return out;
}

function f32(shape, seed) {
  const n = shape.reduce((a, b) => a * b, 1);
  const values = new Float32Array(n);
  let x = seed;
  for (let i = 0; i < n; ++i) {
    x = (x * 1103515245 + 12345) % 2147483648;
    values[i] = (x / 2147483648 - 0.5) * 0.2;
  }
  return { dtype: 'F32', shape, bytes: new Uint8Array(values.buffer) };
}

/** The example adapter in `dir`, with `extra` tensors added to its weights and `config` fields changed. */
function adapterDir(dir, extra = {}, config = {}) {
  mkdirSync(dir, { recursive: true });
  const tensors = { ...readTensors(join(LORA, 'adapter_model.safetensors')), ...extra };
  writeFileSync(join(dir, 'adapter_model.safetensors'), safetensors(tensors));
  const cfg = JSON.parse(readFileSync(join(LORA, 'adapter_config.json'), 'utf8'));
  writeFileSync(join(dir, 'adapter_config.json'), JSON.stringify({ ...cfg, ...config }, null, 2));
  return dir;
}

const apiAdapter = (dir) => ({
  weights: new Uint8Array(readFileSync(join(dir, 'adapter_model.safetensors'))),
  config: new Uint8Array(readFileSync(join(dir, 'adapter_config.json'))),
});
/** A one-file base as mergeShards takes it. */
const apiBase = (dir) => ({
  config: new Uint8Array(readFileSync(join(dir, 'config.json'))),
  open: () => new Uint8Array(readFileSync(join(dir, 'model.safetensors'))),
});
async function drain(files) {
  for await (const f of files) await collect(f.stream);
}

// A foreign tensor no PEFT layer loads: merge, translate and combine must not drop it unsaid.
const UNKNOWN = 'base_model.model.model.layers.0.self_attn.rotary_emb.inv_freq';

test('merge into a quantized base is refused (UnsupportedBase), naming module, tensor and scheme, in both CLIs and the JS API', async (t) => {
  const dir = work(t);
  const fp8 = join(dir, 'fp8');
  const base = join(dir, 'base');
  mkdirSync(base);
  copyFileSync(MODEL, join(base, 'model.safetensors'));
  copyFileSync(join(examples, 'config.json'), join(base, 'config.json'));
  const converted = npm(['convert', base, fp8, '--quantize', 'fp8', '-q']);
  assert.equal(converted.status, 0, converted.stderr);
  assert.equal(readTensors(join(fp8, 'model.safetensors'))['model.layers.0.self_attn.q_proj.weight'].dtype, 'F8_E4M3');

  const r = both((name) => ['merge', '--base', fp8, '--adapter', LORA, '-o', join(dir, `out-${name}`)]);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /UnsupportedBase/);
  assert.match(
    r.stderr,
    /adapter module `model\.layers\.0\.self_attn\.q_proj`: base tensor `model\.layers\.0\.self_attn\.q_proj\.weight` is quantized \(compressed-tensors float-quantized: stored as F8_E4M3, `model\.layers\.0\.self_attn\.q_proj\.weight_scale` beside it\)/,
  );
  assert.match(r.stderr, /model\.layers\.1\.self_attn\.v_proj/);
  assert.doesNotMatch(r.stdout, /merge 4 module\(s\)/);
  const json = both((name) => ['merge', '--base', fp8, '--adapter', LORA, '-o', join(dir, `json-${name}`), '--json']);
  const error = JSON.parse(json.stdout).error;
  assert.equal(error.code, 'UnsupportedBase');
  assert.equal(error.problems.length, 4);
  assert.ok(error.problems.every((p) => p.code === 'UnsupportedBase'));

  await rejectsWith(
    drain(pb.mergeShards({ base: apiBase(fp8), adapter: apiAdapter(LORA) })),
    'UnsupportedBase',
    /q_proj\.weight_scale/,
  );
  const stream = pb.createMergeStream({
    adapter: apiAdapter(LORA),
    baseConfig: readFileSync(join(fp8, 'config.json')),
  });
  await rejectsWith(
    collect(new Blob([readFileSync(join(fp8, 'model.safetensors'))]).stream().pipeThrough(stream)),
    'UnsupportedBase',
    /float-quantized/,
  );
  // The same model unquantized merges.
  const plain = both((name) => ['merge', '--base', base, '--adapter', LORA, '-o', join(dir, `plain-${name}`), '-q']);
  assert.equal(plain.status, 0, plain.stderr);
});

test('a --quantize that would quantize nothing is refused, and what stays unquantized is warned once per class', async (t) => {
  const dir = work(t);
  const base = join(dir, 'base');
  mkdirSync(base);
  copyFileSync(MODEL, join(base, 'model.safetensors'));
  copyFileSync(join(examples, 'config.json'), join(base, 'config.json'));
  // in_features are 32 and 64: groups of 100 divide none of them.
  const group100 = ['--quantize', 'int4', '--group-size', '100'];
  const merged = both((name) => [
    'merge',
    '--base',
    base,
    '--adapter',
    LORA,
    '-o',
    join(dir, `m-${name}`),
    ...group100,
  ]);
  assert.equal(merged.status, 1, merged.stderr);
  assert.match(merged.stderr, /InvalidArgument/);
  assert.match(
    merged.stderr,
    /--quantize int4 --scheme per-group --group-size 100 would quantize no weight of this model/,
  );
  assert.match(
    merged.stderr,
    /2 x `model\.layers\.\*\.mlp\.down_proj\.weight`: in_features 64 is not a multiple of the group size 100/,
  );
  assert.match(merged.stderr, /--group-size 100 divides the in_features of none of them; 32 divides every one/);
  const converted = both((name) => ['convert', base, join(dir, `c-${name}`), ...group100]);
  assert.equal(converted.status, 1, converted.stderr);
  assert.match(converted.stderr, /would quantize no weight of this model/);
  await rejectsWith(
    drain(pb.mergeShards({ base: apiBase(base), adapter: apiAdapter(LORA), quantize: 'int4', groupSize: 100 })),
    'InvalidArgument',
    /--group-size 100 divides the in_features of none of them/,
  );

  // Groups of 64 divide down_proj's 64 columns only: the other six classes are warned, one line each.
  const r = both((name) => [
    'merge',
    '--base',
    base,
    '--adapter',
    LORA,
    '-o',
    join(dir, `g64-${name}`),
    '--quantize',
    'int4',
    '--group-size',
    '64',
    '-q',
  ]);
  assert.equal(r.status, 0, r.stderr);
  const warnings = r.stderr.split('\n').filter((l) => l.startsWith('warning: '));
  assert.equal(warnings.length, 6, r.stderr);
  assert.ok(
    warnings.includes(
      'warning: --quantize int4 --scheme per-group --group-size 64: 2 weight(s) ' +
        '`model.layers.*.self_attn.q_proj.weight` stay unquantized: in_features 32 is not a multiple of the group size 64',
    ),
    r.stderr,
  );
  for (const [name, cli] of clis) {
    const json = cli([
      'merge',
      '--base',
      base,
      '--adapter',
      LORA,
      '-o',
      join(dir, `j64-${name}`),
      '--quantize',
      'int4',
      '--group-size',
      '64',
      '--json',
    ]);
    assert.equal(json.status, 0, json.stderr);
    assert.deepEqual(
      JSON.parse(json.stdout).quantization.warnings,
      warnings.map((w) => w.slice('warning: '.length)),
      name,
    );
  }
});

test('the JS API refuses what the CLIs refuse: translate and merge drop no tensor unless allowPartial', async (t) => {
  const dir = work(t);
  // Without the base's config.json the GGUF row order of q_proj is unknown: translate drops its 4 modules' 8
  // tensors, which the CLIs refuse and translateAdapter used to write silently.
  const cli = both((name) => ['translate', LORA, join(dir, `${name}.gguf`), '--to', 'gguf']);
  assert.equal(cli.status, 1, cli.stderr);
  assert.match(cli.stderr, /UnresolvedTensor/);
  await rejectsWith(
    pb.translateAdapter(LORA, { to: 'gguf' }),
    'UnresolvedTensor',
    /translate would drop 4 tensor\(s\)/,
  );
  await rejectsWith(pb.translateAdapter(LORA, { to: 'gguf', dryRun: true }), 'UnresolvedTensor', /q_proj/);
  const partial = await pb.translateAdapter(LORA, { to: 'gguf', allowPartial: true });
  assert.equal(partial.rejected, 4);
  assert.equal(partial.files.length, 1);

  // A tensor the merge cannot apply: both CLIs fail with UnresolvedTensor, and so do mergeShards and createMergeStream.
  const extra = adapterDir(join(dir, 'extra'), { [UNKNOWN]: f32([16], 3) });
  const base = join(dir, 'base');
  mkdirSync(base);
  copyFileSync(MODEL, join(base, 'model.safetensors'));
  copyFileSync(join(examples, 'config.json'), join(base, 'config.json'));
  const refused = both((name) => ['merge', '--base', base, '--adapter', extra, '-o', join(dir, `m-${name}`)]);
  assert.equal(refused.status, 1, refused.stderr);
  assert.match(refused.stderr, /UnresolvedTensor/);
  assert.match(refused.stderr, /rotary_emb\.inv_freq/);
  await rejectsWith(
    drain(pb.mergeShards({ base: apiBase(base), adapter: apiAdapter(extra) })),
    'UnresolvedTensor',
    /merge would drop 1 tensor\(s\)/,
  );
  const stream = pb.createMergeStream({
    adapter: apiAdapter(extra),
    baseConfig: readFileSync(join(base, 'config.json')),
  });
  await rejectsWith(
    collect(new Blob([readFileSync(MODEL)]).stream().pipeThrough(stream)),
    'UnresolvedTensor',
    /inv_freq/,
  );
  // allowPartial / --allow-partial: the rest is merged, the loss said.
  const allowed = both((name) => [
    'merge',
    '--base',
    base,
    '--adapter',
    extra,
    '-o',
    join(dir, `a-${name}`),
    '--allow-partial',
    '-q',
  ]);
  assert.equal(allowed.status, 0, allowed.stderr);
  assert.match(allowed.stderr, /^warning: dropped /m);
  const files = [];
  for await (const f of pb.mergeShards({ base: apiBase(base), adapter: apiAdapter(extra), allowPartial: true }))
    files.push(await collect(f.stream));
  assert.deepEqual(Buffer.from(files[0]), readFileSync(join(dir, 'a-npm', 'model.safetensors')));
});

test('combine refuses an adapter tensor it would drop, unless --allow-partial / allowPartial', async (t) => {
  const dir = work(t);
  const extra = adapterDir(join(dir, 'extra'), { [UNKNOWN]: f32([16], 3) });
  const r = both((name) => ['combine', LORA, extra, '-o', join(dir, `c-${name}`)]);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /UnresolvedTensor/);
  assert.match(r.stderr, /combine would drop 1 tensor\(s\)/);
  assert.match(r.stderr, /rotary_emb\.inv_freq/);
  await rejectsWith(pb.combineAdapters([LORA, extra]), 'UnresolvedTensor', /inv_freq/);
  const allowed = both((name) => ['combine', LORA, extra, '-o', join(dir, `a-${name}`), '--allow-partial']);
  assert.equal(allowed.status, 0, allowed.stderr);
  assert.match(allowed.stdout, /dropped `.*extra`: .*rotary_emb\.inv_freq \(--allow-partial\)/);
  const combined = await pb.combineAdapters([LORA, extra], { allowPartial: true });
  assert.ok(
    combined.notes.some((n) => n.includes('inv_freq')),
    JSON.stringify(combined.notes),
  );
});

test('combine writes the base embedding PEFT saves with a targeted embedding unchanged, not weighted', async (t) => {
  const dir = work(t);
  const embedding = readTensors(MODEL)['model.embed_tokens.weight'];
  const key = 'base_model.model.model.embed_tokens';
  // PEFT's save_embedding_layers: with embed_tokens targeted, the base embedding is saved as `…base_layer.weight`.
  const pair = [1, 2].map((seed) =>
    adapterDir(
      join(dir, `emb${seed}`),
      {
        [`${key}.lora_embedding_A`]: f32([4, 128], seed),
        [`${key}.lora_embedding_B`]: f32([32, 4], seed + 10),
        [`${key}.base_layer.weight`]: embedding,
      },
      { target_modules: ['q_proj', 'v_proj', 'embed_tokens'] },
    ),
  );
  const r = both((name) => ['combine', ...pair, '--weights', '-1,1', '-o', join(dir, `c-${name}`)]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /model\.embed_tokens\.base_layer\.weight: the base weight PEFT saves with the adapter/);
  for (const [name] of clis) {
    const out = readTensors(join(dir, `c-${name}`, 'adapter_model.safetensors'));
    assert.deepEqual(
      Buffer.from(out[`${key}.base_layer.weight`].bytes),
      Buffer.from(embedding.bytes),
      `${name}: the base's embedding`,
    );
  }
  const combined = await pb.combineAdapters(pair, { weights: [-1, 1] });
  const file = combined.files.find((f) => f.name === 'adapter_model.safetensors');
  const path = join(dir, 'api.safetensors');
  writeFileSync(path, file.bytes);
  assert.deepEqual(Buffer.from(readTensors(path)[`${key}.base_layer.weight`].bytes), Buffer.from(embedding.bytes));
  // Copies that differ cannot both be loaded over the model's embedding: refused.
  const other = adapterDir(
    join(dir, 'emb3'),
    {
      [`${key}.lora_embedding_A`]: f32([4, 128], 5),
      [`${key}.lora_embedding_B`]: f32([32, 4], 6),
      [`${key}.base_layer.weight`]: f32([128, 32], 7),
    },
    { target_modules: ['q_proj', 'v_proj', 'embed_tokens'] },
  );
  const differ = both((name) => ['combine', pair[0], other, '-o', join(dir, `d-${name}`)]);
  assert.equal(differ.status, 1, differ.stderr);
  assert.match(differ.stderr, /hold different ones/);
});
