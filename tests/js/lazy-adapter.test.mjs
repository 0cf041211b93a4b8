// Adapters read by range: a sparse adapter file over 2 GiB in both CLIs (no abort, the same
// bytes as the compact adapter), and the API's adapter sources: Blob, {size, read} (only the header and the
// factors are read), BigInt sizes, sizes beyond 2^53 refused precisely, streams read into memory.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, collect, hasNativeCli, nativeCli, pb, rng } from './helpers/common.mjs';

const { mergeShards, adapterInfo, translateAdapter, writeSafetensors, SafetensorsError } = pb;

const run = (command, args) => spawnSync(command, args, { encoding: 'utf8', maxBuffer: 1 << 26 });
const runJs = (args) => run(process.execPath, [cliPath, ...args]);
const runNative = (args) => run(nativeCli, args);
const count = (shape) => shape.reduce((a, b) => a * b, 1);

function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-lazy-adapter-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function randomF32(random, n, scale = 1) {
  const f = new Float32Array(n);
  for (let i = 0; i < n; ++i) f[i] = (random() * 2 - 1) * scale;
  return new Uint8Array(f.buffer);
}

const safetensors = (tensors) => collect(writeSafetensors({ tensors }));

/** A one-file BF16 LLaMA-shaped base (hidden 32, 2 layers) and a PEFT adapter on q_proj / v_proj. */
async function writeModel(dir) {
  const random = rng(5);
  const bf16 = (n) => {
    const f = new Float32Array(randomF32(random, n).buffer);
    const u = new Uint16Array(n);
    const w = new Uint32Array(f.buffer);
    for (let i = 0; i < n; ++i) u[i] = w[i] >>> 16;
    return new Uint8Array(u.buffer);
  };
  const base = [
    { name: 'model.embed_tokens.weight', shape: [64, 32] },
    ...[0, 1].flatMap((l) => [
      { name: `model.layers.${l}.self_attn.q_proj.weight`, shape: [32, 32] },
      { name: `model.layers.${l}.self_attn.v_proj.weight`, shape: [16, 32] },
    ]),
    { name: 'lm_head.weight', shape: [64, 32] },
  ].map((t) => ({ ...t, dtype: 'BF16', data: bf16(count(t.shape)) }));
  mkdirSync(join(dir, 'base'), { recursive: true });
  writeFileSync(join(dir, 'base', 'model.safetensors'), await safetensors(base));
  writeFileSync(
    join(dir, 'base', 'config.json'),
    JSON.stringify({
      architectures: ['LlamaForCausalLM'],
      model_type: 'llama',
      hidden_size: 32,
      num_attention_heads: 4,
      tie_word_embeddings: false,
    }),
  );
  const lora = [];
  for (const l of [0, 1])
    for (const [m, out] of [
      ['q_proj', 32],
      ['v_proj', 16],
    ]) {
      const key = `base_model.model.model.layers.${l}.self_attn.${m}`;
      lora.push({ name: `${key}.lora_A.weight`, dtype: 'F32', shape: [4, 32], data: randomF32(random, 128, 0.2) });
      lora.push({ name: `${key}.lora_B.weight`, dtype: 'F32', shape: [out, 4], data: randomF32(random, out * 4, 0.2) });
    }
  mkdirSync(join(dir, 'adapter'), { recursive: true });
  const weights = await safetensors(lora);
  writeFileSync(join(dir, 'adapter', 'adapter_model.safetensors'), weights);
  const config = JSON.stringify({ peft_type: 'LORA', r: 4, lora_alpha: 8, target_modules: ['q_proj', 'v_proj'] });
  writeFileSync(join(dir, 'adapter', 'adapter_config.json'), config);
  return { weights, config };
}

/** `compact` (a safetensors file) with an unused tensor of `huge` bytes first, in a sparse file (ftruncate). */
function writeSparse(path, compact, huge) {
  const view = new DataView(compact.buffer, compact.byteOffset, compact.byteLength);
  const n = Number(view.getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(compact.subarray(8, 8 + n)));
  const out = {
    __metadata__: { format: 'pt' },
    'base_model.model.aaa_unused_block.weight': {
      dtype: 'F32',
      shape: [huge / 4 / 1024, 1024],
      data_offsets: [0, huge],
    },
  };
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    out[name] = { ...t, data_offsets: [huge + t.data_offsets[0], huge + t.data_offsets[1]] };
  }
  const text = new TextEncoder().encode(JSON.stringify(out));
  const head = new Uint8Array(8 + text.length);
  new DataView(head.buffer).setBigUint64(0, BigInt(text.length), true);
  head.set(text, 8);
  const data = compact.subarray(8 + n);
  writeFileSync(path, head);
  truncateSync(path, head.length + huge + data.length);
  const fd = openSync(path, 'r+');
  try {
    writeSync(fd, data, 0, data.length, head.length + huge);
  } finally {
    closeSync(fd);
  }
}

const readTree = (dir) =>
  Object.fromEntries(
    readdirSync(dir)
      .sort()
      .map((f) => [f, readFileSync(join(dir, f))]),
  );
const MEASURED = ['seconds', 'gbPerS', 'peakMemory', 'peakWasmHeap'];
const unmeasured = (json) =>
  Object.fromEntries(Object.entries(JSON.parse(json)).filter(([k]) => !MEASURED.includes(k)));

test('a sparse adapter over 2 GiB: both CLIs merge, describe and translate it by range, as the compact one', async (t) => {
  const dir = tempDir(t);
  await writeModel(dir);
  const merge = (cli, out) =>
    cli([
      'merge',
      '--base',
      join(dir, 'base'),
      '--adapter',
      join(dir, 'adapter'),
      '--out',
      join(dir, out),
      '--json',
      '--allow-partial',
    ]);
  const compactJs = merge(runJs, 'compact-js');
  assert.equal(compactJs.status, 0, compactJs.stderr);
  const compact = new Uint8Array(readFileSync(join(dir, 'adapter', 'adapter_model.safetensors')));
  const huge = 3 * 2 ** 30; // every LoRA tensor lies past 2^31 and 2^32 bytes into the file
  writeSparse(join(dir, 'adapter', 'adapter_model.safetensors'), compact, huge);
  assert.ok(statSync(join(dir, 'adapter', 'adapter_model.safetensors')).size > huge);

  const bigJs = merge(runJs, 'big-js');
  assert.equal(bigJs.status, 0, bigJs.stderr);
  assert.deepEqual(readTree(join(dir, 'big-js')), readTree(join(dir, 'compact-js')), 'npm CLI: the same merged files');
  const info = runJs(['adapter-info', join(dir, 'adapter'), '--json']);
  assert.equal(info.status, 0, info.stderr);
  const j = JSON.parse(info.stdout);
  assert.deepEqual(
    j.rejected.map((r) => r.tensor),
    ['base_model.model.aaa_unused_block.weight'],
  );
  assert.equal(j.modules.length, 4);
  const translated = runJs([
    'translate',
    join(dir, 'adapter'),
    join(dir, 'kohya-js'),
    '--to',
    'kohya',
    '--json',
    '--allow-partial',
  ]);
  assert.equal(translated.status, 0, translated.stderr);

  if (!hasNativeCli) return t.diagnostic('native CLI not built: compared the npm CLI with itself only');
  const bigNative = merge(runNative, 'big-native');
  assert.equal(bigNative.status, 0, bigNative.stderr);
  assert.deepEqual(
    readTree(join(dir, 'big-native')),
    readTree(join(dir, 'big-js')),
    'both CLIs: the same merged files',
  );
  assert.deepEqual(unmeasured(bigJs.stdout), unmeasured(bigNative.stdout));
  const nativeInfo = runNative(['adapter-info', join(dir, 'adapter'), '--json']);
  assert.equal(info.stdout, nativeInfo.stdout, 'adapter-info: the same report');
  const nativeTranslated = runNative([
    'translate',
    join(dir, 'adapter'),
    join(dir, 'kohya-native'),
    '--to',
    'kohya',
    '--json',
    '--allow-partial',
  ]);
  assert.equal(translated.stdout, nativeTranslated.stdout);
  assert.deepEqual(readTree(join(dir, 'kohya-js')), readTree(join(dir, 'kohya-native')), 'translate: the same files');
});

/** mergeShards over the one-file base with `weights` as the adapter's weights; the merged file. */
async function mergeWith(dir, weights, config) {
  const base = {
    config: new Uint8Array(readFileSync(join(dir, 'base', 'config.json'))),
    open: () => new Uint8Array(readFileSync(join(dir, 'base', 'model.safetensors'))),
  };
  const files = {};
  for await (const { path, stream } of mergeShards({ base, adapter: { weights, config } }))
    files[path] = await collect(stream);
  return files['model.safetensors'];
}

test('the API reads the adapter by range: Blob, {size, read} (BigInt size too), a stream; sizes past 2^53 refused', async (t) => {
  const dir = tempDir(t);
  const { weights, config } = await writeModel(dir);
  const expected = await mergeWith(dir, weights, config);
  assert.deepEqual(await mergeWith(dir, new Blob([weights]), config), expected, 'Blob');
  // A reader that records what is read: the header and the factors, each range once.
  const reads = [];
  const reader = {
    size: weights.length,
    read: async (offset, length) => (reads.push([offset, length]), weights.subarray(offset, offset + length)),
  };
  assert.deepEqual(await mergeWith(dir, reader, config), expected, '{size, read}');
  const total = reads.reduce((a, [, n]) => a + n, 0);
  assert.ok(total < 2 * weights.length, `read ${total} bytes of a ${weights.length}-byte file`);
  assert.deepEqual(
    await mergeWith(dir, { size: BigInt(weights.length), read: reader.read }, config),
    expected,
    'BigInt size',
  );
  const stream = new ReadableStream({
    start(c) {
      c.enqueue(weights.subarray(0, 100));
      c.enqueue(weights.subarray(100));
      c.close();
    },
  });
  assert.deepEqual(await mergeWith(dir, stream, config), expected, 'a stream, read into memory');
  for (const size of [2 ** 60, 2n ** 64n - 1n]) {
    await assert.rejects(mergeWith(dir, { size, read: reader.read }, config), (e) => {
      assert.ok(e instanceof SafetensorsError);
      assert.equal(e.code, 'InvalidArgument');
      assert.match(e.message, /2\^53 - 1 bytes/);
      return true;
    });
  }
  // adapterInfo and translateAdapter from a Blob: the same as from bytes.
  assert.deepEqual(await adapterInfo({ weights: new Blob([weights]), config }), await adapterInfo({ weights, config }));
  const a = await translateAdapter({ weights: new Blob([weights]), config }, { to: 'mlx' });
  const b = await translateAdapter({ weights, config }, { to: 'mlx' });
  assert.deepEqual(a.files, b.files);
});
