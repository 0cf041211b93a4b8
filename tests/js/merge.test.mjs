// LoRA merge in JS: createMergeStream (one file, any chunking), mergeShards (sharded bases) and the npm CLI's
// merge/unmerge, each byte-identical to the native CLI; plan-time errors before any output; abort and cleanup;
// the WASM heap staying flat on a base larger than the heap would need to hold it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  cliPath,
  collect,
  fixturePath,
  nativeCli,
  pb,
  randomCuts,
  rng,
  skipWithoutFixtures,
  skipWithoutNativeCli,
  split,
  webDir,
} from './helpers/common.mjs';

const { createMergeStream, mergeShards, writeSafetensors, SafetensorsError } = pb;
const { openMergeHandles } = await import(join(webDir, 'src', 'ops', 'merge.js'));

const run = (command, args) => {
  const r = spawnSync(command, args, { encoding: 'buffer', timeout: 300000, maxBuffer: 1 << 26 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout.toString('latin1'), stderr: r.stderr.toString('latin1') };
};
const runJs = (args) => run(process.execPath, [cliPath, ...args]);
const runNative = (args) => run(nativeCli, args);

function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-merge-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Every file in `dir` (name -> bytes). */
function readTree(dir) {
  const files = {};
  for (const name of readdirSync(dir).sort()) files[name] = new Uint8Array(readFileSync(join(dir, name)));
  return files;
}

// ---- generated bases and adapters ----

const count = (shape) => shape.reduce((a, b) => a * b, 1);

/** Random finite values of `dtype` (magnitudes about 2^-7..2, both signs). */
function randomData(random, dtype, n) {
  if (dtype === 'F32') {
    const f = new Float32Array(n);
    for (let i = 0; i < n; ++i) f[i] = (random() * 2 - 1) * 2;
    return new Uint8Array(f.buffer);
  }
  const u = new Uint16Array(n);
  for (let i = 0; i < n; ++i) {
    const sign = random() < 0.5 ? 0x8000 : 0;
    const mant = Math.floor(random() * 0x10000);
    // BF16: 8 exponent bits (bias 127), 7 mantissa bits; F16: 5 (bias 15), 10.
    if (dtype === 'BF16') u[i] = sign | ((120 + Math.floor(random() * 8)) << 7) | (mant & 0x7f);
    else u[i] = sign | ((8 + Math.floor(random() * 8)) << 10) | (mant & 0x3ff);
  }
  return new Uint8Array(u.buffer);
}

/** A safetensors file written by the package's writer: tensors [{name, dtype, shape, data?}] with random data. */
async function safetensors(tensors, seed = 1) {
  const random = rng(seed);
  const spec = tensors.map((t) => ({ ...t, data: t.data ?? randomData(random, t.dtype, count(t.shape)) }));
  return collect(writeSafetensors({ tensors: spec }));
}

const llamaBase = (dtype, layers = [0], dims = { hidden: 32, kv: 16, vocab: 64 }) => [
  { name: 'model.embed_tokens.weight', dtype, shape: [dims.vocab, dims.hidden] },
  ...layers.flatMap((l) => [
    { name: `model.layers.${l}.self_attn.q_proj.weight`, dtype, shape: [dims.hidden, dims.hidden] },
    { name: `model.layers.${l}.self_attn.v_proj.weight`, dtype, shape: [dims.kv, dims.hidden] },
  ]),
  { name: 'model.norm.weight', dtype, shape: [dims.hidden] },
  { name: 'lm_head.weight', dtype, shape: [dims.vocab, dims.hidden] },
];

/** A PEFT adapter directory. modules: [{path, in, out}]; rank 4, F32 factors (B non-zero, as after training). */
async function writeAdapter(dir, modules, config, { dora = false, seed = 7 } = {}) {
  mkdirSync(dir, { recursive: true });
  const random = rng(seed);
  const small = (n) => {
    const f = new Float32Array(n);
    for (let i = 0; i < n; ++i) f[i] = (random() * 2 - 1) * 0.2;
    return new Uint8Array(f.buffer);
  };
  const tensors = [];
  for (const m of modules) {
    const key = `base_model.model.${m.path}`;
    tensors.push({ name: `${key}.lora_A.weight`, dtype: 'F32', shape: [4, m.in], data: small(4 * m.in) });
    tensors.push({ name: `${key}.lora_B.weight`, dtype: 'F32', shape: [m.out, 4], data: small(4 * m.out) });
    if (dora) {
      const f = new Float32Array(m.out).map(() => 0.5 + random());
      tensors.push({
        name: `${key}.lora_magnitude_vector`,
        dtype: 'F32',
        shape: [m.out],
        data: new Uint8Array(f.buffer),
      });
    }
  }
  writeFileSync(join(dir, 'adapter_model.safetensors'), await safetensors(tensors));
  writeFileSync(
    join(dir, 'adapter_config.json'),
    JSON.stringify({ peft_type: 'LORA', r: 4, lora_alpha: 8, ...config }),
  );
  return dir;
}

const LLAMA_MODULES = [
  { path: 'model.layers.0.self_attn.q_proj', in: 32, out: 32 },
  { path: 'model.layers.0.self_attn.v_proj', in: 32, out: 16 },
];
const LLAMA_CONFIG = JSON.stringify({
  architectures: ['LlamaForCausalLM'],
  model_type: 'llama',
  hidden_size: 32,
  num_attention_heads: 4,
});
const GPT2_CONFIG = JSON.stringify({ architectures: ['GPT2LMHeadModel'], model_type: 'gpt2' });

const adapterOf = (dir) => ({
  weights: new Uint8Array(readFileSync(join(dir, 'adapter_model.safetensors'))),
  config: new Uint8Array(readFileSync(join(dir, 'adapter_config.json'))),
});

/** createMergeStream over `bytes` cut at random odd places; returns the merged file and the chunk count. */
async function streamMerge(bytes, options, seed = 3) {
  const parts = split(bytes, randomCuts(rng(seed), bytes.length, 40));
  let i = 0;
  const source = new ReadableStream({
    pull(c) {
      if (i < parts.length) c.enqueue(parts[i++]);
      else c.close();
    },
  });
  return collect(source.pipeThrough(createMergeStream(options)));
}

// ---- (a) one file: createMergeStream = native merge ----

test('createMergeStream: byte-identical to the native merge (BF16, F16, F32 bases; dtype; unmerge; DoRA; GPT-2 Conv1D)', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  const dir = tempDir(t);
  const lora = await writeAdapter(join(dir, 'lora'), LLAMA_MODULES, { target_modules: ['q_proj', 'v_proj'] });
  const dora = await writeAdapter(
    join(dir, 'dora'),
    LLAMA_MODULES,
    { target_modules: ['q_proj', 'v_proj'], use_dora: true },
    { dora: true },
  );
  const gpt2 = await writeAdapter(join(dir, 'gpt2'), [{ path: 'transformer.h.0.attn.c_attn', in: 32, out: 96 }], {
    target_modules: ['c_attn'],
    fan_in_fan_out: true,
  });
  const gpt2Dora = await writeAdapter(
    join(dir, 'gpt2-dora'),
    [{ path: 'transformer.h.0.attn.c_attn', in: 32, out: 96 }],
    { target_modules: ['c_attn'], fan_in_fan_out: true, use_dora: true },
    { dora: true },
  );
  const gpt2Base = [
    { name: 'h.0.attn.c_attn.weight', dtype: 'F32', shape: [32, 96] },
    { name: 'h.0.attn.c_attn.bias', dtype: 'F32', shape: [96] },
    { name: 'h.0.ln_1.weight', dtype: 'F32', shape: [32] },
  ];
  const cases = [
    { dtype: 'BF16', adapter: lora, args: [] },
    { dtype: 'F16', adapter: lora, args: [] },
    { dtype: 'F32', adapter: lora, args: [] },
    { dtype: 'BF16', adapter: lora, args: ['--dtype', 'f32'], options: { dtype: 'f32' } },
    { dtype: 'F32', adapter: lora, args: ['--dtype', 'f16', '--safe'], options: { dtype: 'f16', safe: true } },
    { dtype: 'BF16', adapter: lora, args: [], unmerge: true },
    { dtype: 'BF16', adapter: dora, args: [] },
    { dtype: 'F32', adapter: dora, args: [] },
    { dtype: 'F32', adapter: gpt2, config: GPT2_CONFIG, tensors: gpt2Base },
    // DoRA on a Conv1D weight: norms run across rows, so the core holds that one weight whole.
    { dtype: 'F32', adapter: gpt2Dora, config: GPT2_CONFIG, tensors: gpt2Base },
  ];
  for (const [n, c] of cases.entries()) {
    c.args ??= [];
    const baseDir = join(dir, `base${n}`);
    mkdirSync(baseDir);
    const base = await safetensors(c.tensors ?? llamaBase(c.dtype), 10 + n);
    writeFileSync(join(baseDir, 'model.safetensors'), base);
    if (c.config) writeFileSync(join(baseDir, 'config.json'), c.config);
    const out = join(dir, `out${n}`);
    const native = runNative([
      c.unmerge ? 'unmerge' : 'merge',
      '--base',
      join(baseDir, 'model.safetensors'),
      '--adapter',
      c.adapter,
      '--out',
      out,
      ...c.args,
    ]);
    assert.equal(native.status, 0, native.stderr);
    const expected = new Uint8Array(readFileSync(join(out, 'model.safetensors')));
    const options = { adapter: adapterOf(c.adapter), baseConfig: c.config, unmerge: c.unmerge, ...c.options };
    const merged = await streamMerge(base, options, n);
    assert.ok(Buffer.from(merged).equals(Buffer.from(expected)), `case ${n} (${c.dtype} ${c.args.join(' ')})`);
    if (n === 0) assert.ok(!Buffer.from(merged).equals(Buffer.from(base)), 'the merge changed the weights');
  }
  assert.equal(openMergeHandles(), 0);
});

test('createMergeStream: progress counts bytes in and out', async (t) => {
  const dir = tempDir(t);
  const lora = await writeAdapter(join(dir, 'lora'), LLAMA_MODULES, { target_modules: ['q_proj', 'v_proj'] });
  const base = await safetensors(llamaBase('BF16'));
  let last = null;
  const merged = await streamMerge(base, { adapter: adapterOf(lora), onProgress: (p) => (last = p) });
  assert.deepEqual(last, { bytesIn: base.length, bytesOut: merged.length });
});

// ---- (b) sharded bases: mergeShards and the npm CLI = native merge ----

async function writeShardedBase(dir, dtype = 'BF16') {
  mkdirSync(dir, { recursive: true });
  const s1 = llamaBase(dtype, [0]).slice(0, 3);
  const s2 = [...llamaBase(dtype, [1]).slice(1, 3), ...llamaBase(dtype).slice(3)];
  const names = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
  writeFileSync(join(dir, names[0]), await safetensors(s1, 21));
  writeFileSync(join(dir, names[1]), await safetensors(s2, 22));
  const weightMap = {};
  for (const [i, shard] of [s1, s2].entries()) for (const tensor of shard) weightMap[tensor.name] = names[i];
  const size = [...s1, ...s2].reduce((a, tensor) => a + 2 * count(tensor.shape), 0);
  writeFileSync(
    join(dir, 'model.safetensors.index.json'),
    JSON.stringify({ metadata: { total_size: size }, weight_map: weightMap }, null, 2),
  );
  writeFileSync(join(dir, 'config.json'), LLAMA_CONFIG);
  return dir;
}

const shardedModules = [0, 1].flatMap((l) => [
  { path: `model.layers.${l}.self_attn.q_proj`, in: 32, out: 32 },
  { path: `model.layers.${l}.self_attn.v_proj`, in: 32, out: 16 },
]);

/** mergeShards over a base directory; `streams`: open() gives ReadableStreams (asked for twice) instead of bytes. */
async function jsMergeShards(baseDir, adapterDir, { streams = false, ...options } = {}) {
  const opened = [];
  const base = {
    index: readFileSync(join(baseDir, 'model.safetensors.index.json'), 'utf8'),
    config: new Uint8Array(readFileSync(join(baseDir, 'config.json'))),
    open(name) {
      opened.push(name);
      const bytes = new Uint8Array(readFileSync(join(baseDir, name)));
      if (!streams) return bytes;
      const parts = split(bytes, randomCuts(rng(opened.length), bytes.length, 25));
      return new ReadableStream({
        pull(c) {
          if (parts.length) c.enqueue(parts.shift());
          else c.close();
        },
      });
    },
  };
  const files = {};
  for await (const { path, size, stream } of mergeShards({ base, adapter: adapterOf(adapterDir), ...options })) {
    files[path] = await collect(stream);
    assert.equal(files[path].length, size, path);
  }
  return { files, opened };
}

test('mergeShards and the npm CLI: a two-shard base with index and config, every file identical to the native merge', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  const dir = tempDir(t);
  const baseDir = await writeShardedBase(join(dir, 'base'));
  const adapter = await writeAdapter(join(dir, 'adapter'), shardedModules, { target_modules: ['q_proj', 'v_proj'] });
  for (const extra of [[], ['--dtype', 'f32']]) {
    const nativeOut = join(dir, `native${extra.length}`);
    const jsOut = join(dir, `js${extra.length}`);
    const args = ['--base', baseDir, '--adapter', adapter, ...extra];
    const native = runNative(['merge', ...args, '--out', nativeOut]);
    assert.equal(native.status, 0, native.stderr);
    const expected = readTree(nativeOut);
    assert.deepEqual(Object.keys(expected), [
      'config.json',
      'model-00001-of-00002.safetensors',
      'model-00002-of-00002.safetensors',
      'model.safetensors.index.json',
    ]);

    const js = runJs(['merge', ...args, '--out', jsOut]);
    assert.equal(js.status, 0, js.stderr);
    assert.deepEqual(readTree(jsOut), expected, `npm CLI ${extra.join(' ')}`);

    const options = extra.length ? { dtype: 'f32' } : {};
    for (const streams of [false, true]) {
      const { files, opened } = await jsMergeShards(baseDir, adapter, { streams, ...options });
      assert.deepEqual(Object.keys(files), [
        'model-00001-of-00002.safetensors',
        'model-00002-of-00002.safetensors',
        'model.safetensors.index.json',
        'config.json',
      ]);
      for (const [name, bytes] of Object.entries(files))
        assert.ok(Buffer.from(bytes).equals(Buffer.from(expected[name])), `${name} (streams: ${streams})`);
      assert.equal(opened.length, streams ? 4 : 2, 'streams are opened twice, random-access sources once');
    }
  }
  assert.equal(openMergeHandles(), 0);
});

test('mergeShards: a single-file base (no index) and a stream not read to its end', async (t) => {
  const dir = tempDir(t);
  const adapter = await writeAdapter(join(dir, 'adapter'), LLAMA_MODULES, { target_modules: ['q_proj', 'v_proj'] });
  const base = await safetensors(llamaBase('F16'));
  const expected = await streamMerge(base, { adapter: adapterOf(adapter) });
  const files = [];
  for await (const f of mergeShards({ base: { open: () => new Blob([base]) }, adapter: adapterOf(adapter) }))
    files.push([f.path, await collect(f.stream)]);
  assert.deepEqual(
    files.map(([p]) => p),
    ['model.safetensors'],
  );
  assert.ok(Buffer.from(files[0][1]).equals(Buffer.from(expected)));

  const it = mergeShards({ base: { open: () => base }, adapter: adapterOf(adapter) });
  await it.next();
  await assert.rejects(it.next(), /was not read to its end/);
  assert.equal(openMergeHandles(), 0);
});

test('mergeShards: only the tensors the adapter changes enter the WASM heap; the others go from input to output', async (t) => {
  const dir = tempDir(t);
  const adapter = await writeAdapter(join(dir, 'adapter'), LLAMA_MODULES, { target_modules: ['q_proj', 'v_proj'] });
  const tensors = llamaBase('BF16', [0], { hidden: 32, kv: 16, vocab: 4096 }); // embeddings and head: 256 KiB each
  const base = await safetensors(tensors);
  const expected = await streamMerge(base, { adapter: adapterOf(adapter) });
  const { getModule } = await import(join(webDir, 'src', 'init.js'));
  // Counts the bytes each handle method is called with (its first argument), until the test ends.
  const countBytes = (proto, names) => {
    const counted = Object.fromEntries(names.map((name) => [name, 0]));
    const originals = Object.fromEntries(names.map((name) => [name, proto[name]]));
    for (const name of names)
      proto[name] = function (n, ...rest) {
        counted[name] += n;
        return originals[name].call(this, n, ...rest);
      };
    t.after(() => Object.assign(proto, originals));
    return counted;
  };
  const counted = countBytes((await getModule()).Merger.prototype, ['push', 'forwarded']);
  const changed = 2 * (32 * 32 + 16 * 32); // q_proj and v_proj, BF16
  for (const open of [() => new Blob([base]), () => base, () => new Blob([base]).stream()]) {
    counted.push = counted.forwarded = 0;
    const files = [];
    for await (const f of mergeShards({ base: { open }, adapter: adapterOf(adapter) }))
      files.push(await collect(f.stream));
    assert.ok(Buffer.from(files[0]).equals(Buffer.from(expected)), 'the same bytes as the streamed merge');
    assert.equal(counted.push, changed, 'bytes pushed into the heap: the changed tensors only');
    assert.equal(
      counted.push + counted.forwarded,
      base.length - 8 - new DataView(base.buffer, base.byteOffset).getUint32(0, true),
      'every data byte once',
    );
  }
  // A consumer that transfers (detaches) every chunk it reads, as one posting them to a worker does: the merge
  // never looks at a chunk once handed over.
  const transferred = [];
  for await (const f of mergeShards({ base: { open: () => new Blob([base]) }, adapter: adapterOf(adapter) })) {
    const reader = f.stream.getReader();
    for (let r; !(r = await reader.read()).done;)
      transferred.push(structuredClone(r.value, { transfer: [r.value.buffer] }));
  }
  assert.ok(
    Buffer.concat(transferred).equals(Buffer.from(expected)),
    'mergeShards, chunks transferred by the consumer',
  );
  transferred.length = 0;
  const copies = split(base, randomCuts(rng(5), base.length, 40)).map((c) => c.slice());
  const detaching = new WritableStream({
    write: (c) => void transferred.push(structuredClone(c, { transfer: [c.buffer] })),
  });
  await new Blob(copies)
    .stream()
    .pipeThrough(createMergeStream({ adapter: adapterOf(adapter) }))
    .pipeTo(detaching);
  assert.ok(
    Buffer.concat(transferred).equals(Buffer.from(expected)),
    'createMergeStream, chunks transferred by the consumer',
  );

  // createMergeStream: the header and the changed tensors are fed, whatever the chunking; the rest is forwarded.
  const streamCounted = countBytes((await getModule()).StreamMerger.prototype, ['feed', 'forwarded']);
  const headerBytes = 8 + new DataView(base.buffer, base.byteOffset).getUint32(0, true);
  for (const seed of [3, 4]) {
    streamCounted.feed = streamCounted.forwarded = 0;
    assert.ok(
      Buffer.from(await streamMerge(base, { adapter: adapterOf(adapter) }, seed)).equals(Buffer.from(expected)),
    );
    assert.equal(
      streamCounted.feed,
      headerBytes + changed,
      'bytes fed into the heap: the header and the changed tensors',
    );
    assert.equal(streamCounted.forwarded, base.length - headerBytes - changed);
  }
  assert.equal(openMergeHandles(), 0);
});

// ---- (c) plan-time mismatches: before any output ----

test('a base/adapter shape mismatch rejects with ShapeMismatch before any output', async (t) => {
  const dir = tempDir(t);
  const bad = await writeAdapter(join(dir, 'bad'), [{ path: 'model.layers.0.self_attn.v_proj', in: 32, out: 24 }], {
    target_modules: ['v_proj'],
  });
  const base = await safetensors(llamaBase('BF16'));
  let chunks = 0;
  const reader = new Blob([base])
    .stream()
    .pipeThrough(createMergeStream({ adapter: adapterOf(bad) }))
    .getReader();
  await assert.rejects(
    (async () => {
      while (!(await reader.read()).done) ++chunks;
    })(),
    (e) => e instanceof SafetensorsError && e.code === 'ShapeMismatch' && /v_proj/.test(e.message),
  );
  assert.equal(chunks, 0);

  let opened = 0;
  const it = mergeShards({ base: { open: () => (++opened, base) }, adapter: adapterOf(bad) });
  await assert.rejects(it.next(), (e) => e instanceof SafetensorsError && e.code === 'ShapeMismatch');
  assert.equal(opened, 1, 'only the header was read');
  assert.equal(openMergeHandles(), 0);
});

test('npm CLI: plan-time errors print what the native CLI prints and create nothing', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  const dir = tempDir(t);
  const baseDir = await writeShardedBase(join(dir, 'base'));
  const bad = await writeAdapter(join(dir, 'bad'), [{ path: 'model.layers.1.self_attn.v_proj', in: 32, out: 24 }], {
    target_modules: ['v_proj'],
  });
  const hostile = join(dir, 'hostile');
  mkdirSync(hostile);
  writeFileSync(
    join(hostile, 'model.safetensors.index.json'),
    JSON.stringify({ weight_map: { a: '../model.safetensors' } }),
  );
  const tiny = join(dir, 'tiny'); // a shard too short for its length prefix: the core's error, named after the shard
  mkdirSync(tiny);
  writeFileSync(join(tiny, 'model.safetensors'), new Uint8Array(4));
  for (const args of [
    ['merge', '--base', baseDir, '--adapter', bad, '--out', join(dir, 'out')],
    ['merge', '--base', baseDir, '--adapter', bad, '--out', join(dir, 'out'), '--json'],
    ['merge', '--base', hostile, '--adapter', bad, '--out', join(dir, 'out'), '--json'],
    ['merge', '--base', join(dir, 'missing'), '--adapter', bad, '--dry-run'],
    ['merge', '--base', tiny, '--adapter', bad, '--dry-run', '--json'],
    ['unmerge', '--base', baseDir, '--adapter', bad],
    ['merge', '--base', baseDir, '--adapter', bad, '--out', join(dir, 'out'), '--dtype', 'f8'],
  ]) {
    const native = runNative(args);
    assert.deepEqual(runJs(args), native, args.join(' '));
    assert.notEqual(native.status, 0);
    assert.ok(!existsSync(join(dir, 'out')));
  }
});

// ---- (d) abort ----

test('aborting mid-stream rejects with the reason and frees the handle', async (t) => {
  const dir = tempDir(t);
  const adapter = await writeAdapter(
    join(dir, 'adapter'),
    [{ path: 'model.layers.0.self_attn.q_proj', in: 512, out: 512 }],
    { target_modules: ['q_proj'] },
  );
  const base = await safetensors([
    { name: 'model.layers.0.self_attn.q_proj.weight', dtype: 'BF16', shape: [512, 512] },
    { name: 'model.layers.0.mlp.up_proj.weight', dtype: 'BF16', shape: [2048, 512] },
  ]);
  const reason = new Error('stop');
  const controller = new AbortController();
  const parts = split(
    base,
    Array.from({ length: Math.floor(base.length / 4099) }, (_, i) => (i + 1) * 4099),
  );
  const reader = ReadableStream.from(parts)
    .pipeThrough(createMergeStream({ adapter: adapterOf(adapter), signal: controller.signal }))
    .getReader();
  assert.equal((await reader.read()).done, false);
  assert.equal(openMergeHandles(), 1);
  controller.abort(reason);
  await assert.rejects(reader.read(), (e) => e === reason);
  assert.equal(openMergeHandles(), 0);

  // mergeShards: the file being read errors with the reason, and so does the iterator.
  const shards = new AbortController();
  const it = mergeShards({ base: { open: () => base }, adapter: adapterOf(adapter), signal: shards.signal });
  const { value } = await it.next();
  const r = value.stream.getReader();
  await r.read();
  shards.abort(reason);
  await assert.rejects(r.read(), (e) => e === reason);
  await assert.rejects(it.next(), (e) => e === reason);
  assert.equal(openMergeHandles(), 0);

  // Already aborted: nothing starts.
  await assert.rejects(
    collect(
      new Blob([base])
        .stream()
        .pipeThrough(createMergeStream({ adapter: adapterOf(adapter), signal: AbortSignal.abort(reason) })),
    ),
    (e) => e === reason,
  );
  assert.equal(openMergeHandles(), 0);
});

// ---- (e) the npm CLI's summary and failures ----

const MEASURED = ['seconds', 'gbPerS', 'peakMemory', 'peakWasmHeap'];
const unmeasured = (json) =>
  Object.fromEntries(Object.entries(JSON.parse(json)).filter(([k]) => !MEASURED.includes(k)));

test('npm CLI merge --json / text: the native summary except the measured fields', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  const dir = tempDir(t);
  const baseDir = await writeShardedBase(join(dir, 'base'));
  const adapter = await writeAdapter(join(dir, 'adapter'), shardedModules, { target_modules: ['q_proj', 'v_proj'] });
  for (const extra of [['--json'], [], ['--json', '--dry-run'], ['--dry-run']]) {
    const args = (out) => ['merge', '--base', baseDir, '--adapter', adapter, '--out', join(dir, out), ...extra];
    const native = runNative(args(`n${extra.join('')}`));
    const js = runJs(args(`j${extra.join('')}`));
    assert.equal(native.status, 0, native.stderr);
    assert.equal(js.status, 0, js.stderr);
    assert.equal(js.stderr, native.stderr);
    if (extra.includes('--json')) {
      assert.deepEqual(unmeasured(js.stdout), unmeasured(native.stdout));
      const j = JSON.parse(js.stdout);
      for (const k of MEASURED) assert.equal(typeof j[k], 'number', k);
      if (!extra.includes('--dry-run')) {
        // Both measures, named: the process's peak RSS (Node's own memory besides the module's), and the WASM heap
        // (whole 64 KiB pages); natively only the RSS.
        assert.ok(j.peakMemory > 20 * 2 ** 20, `process RSS: ${j.peakMemory}`);
        assert.ok(j.peakWasmHeap > 0 && j.peakWasmHeap % 65536 === 0, `WASM heap: ${j.peakWasmHeap}`);
        assert.notEqual(j.peakMemory, j.peakWasmHeap);
        const n = JSON.parse(native.stdout);
        assert.ok(n.peakMemory > 0);
        assert.equal(n.peakWasmHeap, null);
      }
    } else {
      // Only the last line (size, seconds, rate, peak memory) is measured.
      const lines = (s) => (extra.includes('--dry-run') ? s : s.split('\n').slice(0, -2).join('\n'));
      assert.equal(lines(js.stdout), lines(native.stdout));
      if (!extra.includes('--dry-run')) {
        assert.match(
          js.stdout,
          /\n[\d.]+ [kMGTPE]?B in [\d.]+ s \([\d.]+ [kMGTPE]?B\/s\), peak memory [\d.]+ [kMGTPE]?B process RSS, [\d.]+ [kMGTPE]?B WASM heap\n$/,
        );
        assert.match(
          native.stdout,
          /\n[\d.]+ [kMGTPE]?B in [\d.]+ s \([\d.]+ [kMGTPE]?B\/s\), peak memory [\d.]+ [kMGTPE]?B process RSS\n$/,
        );
      }
    }
  }
});

test('npm CLI: a merge failing while writing (--safe, Inf in a merged tensor) leaves no OUT, as natively', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  const dir = tempDir(t);
  const adapter = await writeAdapter(join(dir, 'adapter'), LLAMA_MODULES, { target_modules: ['q_proj', 'v_proj'] });
  const inf = new Float32Array(32 * 32).fill(0.5);
  inf[100] = Infinity;
  const tensors = llamaBase('F32').map((tensor) =>
    tensor.name.endsWith('q_proj.weight') ? { ...tensor, data: new Uint8Array(inf.buffer) } : tensor,
  );
  mkdirSync(join(dir, 'base'));
  writeFileSync(join(dir, 'base', 'model.safetensors'), await safetensors(tensors));
  for (const json of [[], ['--json']]) {
    const args = (out) => [
      'merge',
      '--base',
      join(dir, 'base'),
      '--adapter',
      adapter,
      '--out',
      join(dir, out),
      '--safe',
      ...json,
    ];
    const native = runNative(args('native'));
    const js = runJs(args('js'));
    assert.equal(native.status, 1);
    assert.deepEqual(js, native);
    assert.ok(!existsSync(join(dir, 'native')) && !existsSync(join(dir, 'js')));
  }
  // An existing OUT is kept (only a directory the command created is removed), without temporary files.
  mkdirSync(join(dir, 'kept'));
  assert.equal(
    runJs(['merge', '--base', join(dir, 'base'), '--adapter', adapter, '--out', join(dir, 'kept'), '--safe']).status,
    1,
  );
  assert.deepEqual(readdirSync(join(dir, 'kept')), []);
});

// ---- the real GPT-2 adapter on a generated GPT-2-shaped base ----

test('the real peft-gpt2-seqcls-cattn-cproj adapter merged into a GPT-2-shaped base: both CLIs write the same bytes', async (t) => {
  if (skipWithoutNativeCli(t) || skipWithoutFixtures(t)) return;
  const dir = tempDir(t);
  const baseDir = join(dir, 'base');
  mkdirSync(baseDir);
  const tensors = [{ name: 'wte.weight', dtype: 'BF16', shape: [64, 768] }];
  for (let l = 0; l < 12; ++l) {
    // Layer 0's c_attn in F32 as GPT-2 ships it; the rest BF16 to keep the file small.
    tensors.push({ name: `h.${l}.attn.c_attn.weight`, dtype: l === 0 ? 'F32' : 'BF16', shape: [768, 2304] });
    tensors.push({ name: `h.${l}.attn.c_attn.bias`, dtype: 'BF16', shape: [2304] });
    tensors.push({ name: `h.${l}.attn.c_proj.weight`, dtype: 'BF16', shape: [768, 768] });
    tensors.push({ name: `h.${l}.mlp.c_proj.weight`, dtype: 'BF16', shape: [3072, 768] });
  }
  writeFileSync(join(baseDir, 'model.safetensors'), await safetensors(tensors, 99));
  writeFileSync(join(baseDir, 'config.json'), GPT2_CONFIG);
  const adapter = fixturePath('peft-gpt2-seqcls-cattn-cproj');
  const args = (out) => ['merge', '--base', baseDir, '--adapter', adapter, '--out', join(dir, out), '--json'];
  const native = runNative(args('native'));
  assert.equal(native.status, 0, native.stderr);
  const js = runJs(args('js'));
  assert.equal(js.status, 0, js.stderr);
  assert.deepEqual(unmeasured(js.stdout), unmeasured(native.stdout));
  assert.ok(JSON.parse(native.stdout).tensorsMerged >= 36);
  assert.deepEqual(readTree(join(dir, 'js')), readTree(join(dir, 'native')));
});

// ---- memory: a base far larger than the heap it needs ----

test('a 200 MB base streams through createMergeStream in a small, flat WASM heap', (t) => {
  // Its own process: WASM memory never shrinks, so the heap size there is this merge's high-water mark. The
  // base is generated as a stream and never held; the output is counted and dropped.
  const script = `
    import { createMergeStream, writeSafetensors } from ${JSON.stringify(join(webDir, 'src', 'index.js'))};
    import { getModule } from ${JSON.stringify(join(webDir, 'src', 'init.js'))};
    const module = await getModule();
    const heap0 = module.heapSize();
    const layers = 24, dim = 2048; // 24 x 2048 x 2048 BF16 = 201 MB
    // The base's bytes are made here in JS (header, then 1 MiB blocks), so the heap measured is the merge's.
    const header = {};
    const size = 2 * dim * dim;
    for (let l = 0; l < layers; ++l) header['model.layers.' + l + '.self_attn.q_proj.weight'] = { dtype: 'BF16', shape: [dim, dim], data_offsets: [l * size, (l + 1) * size] };
    let json = JSON.stringify(header);
    while (json.length % 8) json += ' ';
    const prefix = new Uint8Array(8);
    new DataView(prefix.buffer).setBigUint64(0, BigInt(json.length), true);
    const block = new Uint8Array(1 << 20);
    for (let i = 0; i < block.length; i += 2) { block[i] = (i * 31) & 0xff; block[i + 1] = 0x3c; }
    async function* base() {
      yield prefix;
      yield new TextEncoder().encode(json);
      for (let left = layers * size; left > 0; left -= block.length) yield block.slice(0, Math.min(left, block.length));
    }
    const a = new Float32Array(8 * dim).fill(0.01), b = new Float32Array(dim * 8).fill(0.02);
    const lora = [];
    for (let l = 0; l < layers; ++l) {
      lora.push({ name: 'base_model.model.model.layers.' + l + '.self_attn.q_proj.lora_A.weight', dtype: 'F32', shape: [8, dim], data: new Uint8Array(a.buffer) });
      lora.push({ name: 'base_model.model.model.layers.' + l + '.self_attn.q_proj.lora_B.weight', dtype: 'F32', shape: [dim, 8], data: new Uint8Array(b.buffer) });
    }
    const weights = writeSafetensors({ tensors: lora });
    const config = { peft_type: 'LORA', r: 8, lora_alpha: 16, target_modules: ['q_proj'] };
    let bytesIn = 0, bytesOut = 0, rss = 0;
    const merged = ReadableStream.from(base()).pipeThrough(createMergeStream({ adapter: { weights, config }, onProgress: (p) => { bytesIn = p.bytesIn; rss = Math.max(rss, process.memoryUsage.rss()); } }));
    for await (const chunk of merged) bytesOut += chunk.length;
    console.log(JSON.stringify({ bytesIn, bytesOut, heap0, heap: module.heapSize(), rss }));
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 300000 });
  assert.equal(r.status, 0, r.stderr);
  const m = JSON.parse(r.stdout);
  const MiB = (n) => `${(n / 2 ** 20).toFixed(1)} MiB`;
  t.diagnostic(
    `base ${MiB(m.bytesIn)} -> ${MiB(m.bytesOut)}; WASM heap ${MiB(m.heap0)} at load, ${MiB(m.heap)} peak; Node RSS peak ${MiB(m.rss)}`,
  );
  assert.ok(m.bytesIn > 200e6);
  assert.ok(m.heap < 64 * 2 ** 20, `WASM heap peak ${MiB(m.heap)}`);
});
