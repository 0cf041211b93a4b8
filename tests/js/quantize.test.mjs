// `merge --quantize`: the npm CLI (the WASM build) and the native CLI write the same bytes and print the same plan and
// summary for every scheme on golden cases (tests/golden/corpus), and mergeShards({quantize...}) streams those files.
// Whether the bytes are the Python packages' own is checked live (tests/golden/check_quantize.py).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, collect, hasNativeCli, nativeCli, pb, repoRoot, skipWithoutNativeCli } from './helpers/common.mjs';

const corpus = join(repoRoot, 'tests', 'golden', 'corpus');
// Sharded BF16, F16, F32, every linear layer, a MoE (routers and experts kept), GPT-2 (Conv1D: not Linear), LoRA on
// the embedding and lm_head.
const CASES = [
  'llama_lora_bf16',
  'llama_lora_f16',
  'llama_lora_f32',
  'llama_all_linear',
  'mixtral_experts_bf16',
  'gpt2_conv1d',
  'llama_embedding_lora',
];
// The tiny models' dims are 32..128: group 16 divides them; the default group 128 and fine-grained FP8's 128 x 128
// blocks do not, so those would quantize no weight, and GPT-2 has no nn.Linear weight but lm_head (Conv1D): both
// CLIs refuse such a quantization with the same error (it used to write an unquantized model claiming otherwise).
const SCHEMES = [
  ['--quantize', 'fp8'],
  ['--quantize', 'int8', '--group-size', '16'],
  ['--quantize', 'int4', '--group-size', '16'],
  ['--quantize', 'int4'],
  ['--quantize', 'int4', '--scheme', 'per-channel'],
  ['--quantize', 'int8', '--scheme', 'per-channel', '--dtype', 'f16'],
  ['--quantize', 'fp8', '--scheme', 'block'],
];

function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-quantize-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The --json summary without the measurements (time, memory), which differ between runs and builds. */
function stable(stdout) {
  const j = JSON.parse(stdout);
  for (const key of ['seconds', 'gbPerS', 'peakMemory', 'peakWasmHeap']) delete j[key];
  return j;
}

/** A golden case's adapter as the JS API takes it, and the npm CLI's `merge ... -o OUT QUANTIZE... -q` into OUT. */
function adapterOf(caseDir) {
  return {
    weights: new Uint8Array(readFileSync(join(caseDir, 'adapter', 'adapter_model.safetensors'))),
    config: new Uint8Array(readFileSync(join(caseDir, 'adapter', 'adapter_config.json'))),
  };
}
function npmMerge(caseDir, out, quantize) {
  const r = npm([
    'merge',
    '--base',
    join(caseDir, 'base'),
    '--adapter',
    join(caseDir, 'adapter'),
    '--out',
    out,
    ...quantize,
    '-q',
  ]);
  assert.equal(r.status, 0, r.stderr);
}

const npm = (args) => spawnSync(process.execPath, [cliPath, ...args], { encoding: 'utf8', timeout: 120000 });
const native = (args) => spawnSync(nativeCli, args, { encoding: 'utf8', timeout: 120000 });

for (const name of CASES) {
  test(`quantize ${name}: the npm CLI writes and prints the native CLI's bytes for every scheme`, async (t) => {
    if (skipWithoutNativeCli(t)) return;
    const dir = tempDir(t);
    const base = join(corpus, name, 'base');
    const adapter = join(corpus, name, 'adapter');
    for (const [i, scheme] of SCHEMES.entries()) {
      const label = `${name} ${scheme.join(' ')}`;
      const args = (out) => ['merge', '--base', base, '--adapter', adapter, '--out', out, ...scheme];
      // The plan, as printed before the work, byte for byte.
      const dryNpm = npm([...args(join(dir, 'unused')), '--dry-run']);
      const dryNative = native([...args(join(dir, 'unused')), '--dry-run']);
      assert.equal(dryNpm.status, dryNative.status, `${label}: exit ${dryNpm.stderr} / ${dryNative.stderr}`);
      assert.equal(dryNpm.stdout, dryNative.stdout, `${label}: --dry-run`);
      assert.equal(dryNpm.stderr, dryNative.stderr, `${label}: --dry-run stderr`);
      if (name === 'gpt2_conv1d' || scheme.join(' ') === '--quantize int4' || scheme.includes('block')) {
        assert.equal(dryNative.status, 1, `${label}: quantizes nothing, must be refused`);
        assert.match(
          dryNative.stderr,
          /^error: InvalidArgument: --quantize .* would quantize no weight of this model/,
          label,
        );
        const out = join(dir, `${i}-refused`);
        const refused = npm([...args(out)]);
        assert.equal(refused.status, 1, label);
        assert.equal(refused.stderr, native([...args(join(dir, `${i}-refused-native`))]).stderr, label);
        assert.ok(!existsSync(out), `${label}: nothing written`);
        continue;
      }
      assert.equal(dryNative.status, 0, `${label}: ${dryNative.stderr}`);
      assert.match(dryNative.stdout, /would quantize /, label);
      const outNpm = join(dir, `${i}-npm`);
      const outNative = join(dir, `${i}-native`);
      const rNpm = npm([...args(outNpm), '--json']);
      const rNative = native([...args(outNative), '--json']);
      assert.equal(rNative.status, 0, `${label}: ${rNative.stderr}`);
      assert.equal(rNpm.status, 0, `${label}: ${rNpm.stderr}`);
      assert.deepEqual(stable(rNpm.stdout), stable(rNative.stdout), `${label}: --json summary`);
      const files = readdirSync(outNative).sort();
      assert.deepEqual(readdirSync(outNpm).sort(), files, label);
      for (const f of files)
        assert.deepEqual(readFileSync(join(outNpm, f)), readFileSync(join(outNative, f)), `${label}: ${f}`);
      const summary = JSON.parse(rNative.stdout).quantization;
      assert.equal(summary.errors.length, summary.quantized.length, label);
      for (const e of summary.errors) assert.ok(e.relative >= 0 && e.relative < 0.2, `${label}: ${JSON.stringify(e)}`);
      const config = JSON.parse(readFileSync(join(outNative, 'config.json'), 'utf8')).quantization_config;
      assert.ok(config.ignore?.includes('lm_head') || config.modules_to_not_convert?.includes('lm_head'), label);
    }
  });
}

test("mergeShards({quantize, scheme, groupSize}) streams the npm CLI's files", async (t) => {
  const dir = tempDir(t);
  const caseDir = join(corpus, 'llama_lora_bf16');
  const out = join(dir, 'out');
  npmMerge(caseDir, out, ['--quantize', 'int4', '--group-size', '16']);
  const baseDir = join(caseDir, 'base');
  const base = {
    index: readFileSync(join(baseDir, 'model.safetensors.index.json'), 'utf8'),
    config: new Uint8Array(readFileSync(join(baseDir, 'config.json'))),
    open: (file) => new Uint8Array(readFileSync(join(baseDir, file))),
  };
  const adapter = adapterOf(caseDir);
  const files = {};
  for await (const { path, stream } of pb.mergeShards({ base, adapter, quantize: 'int4', groupSize: 16 }))
    files[path] = await collect(stream);
  for (const [file, bytes] of Object.entries(files))
    assert.deepEqual(bytes, new Uint8Array(readFileSync(join(out, file))), file);
  assert.ok(existsSync(join(out, 'config.json')));
  // The core refuses what the CLI grammar refuses, with the same words.
  await assert.rejects(async () => {
    for await (const f of pb.mergeShards({ base, adapter, quantize: 'int8', scheme: 'block' })) await f.stream.cancel();
  }, /fine-grained FP8: it needs --quantize fp8/);
});

test("createMergeStream({quantize}) on one file streams the CLI's model.safetensors", async (t) => {
  const dir = tempDir(t);
  const caseDir = join(corpus, 'llama_lora_f32');
  const out = join(dir, 'out');
  npmMerge(caseDir, out, ['--quantize', 'int8', '--scheme', 'per-channel']);
  const stream = pb.createMergeStream({
    adapter: adapterOf(caseDir),
    baseConfig: new Uint8Array(readFileSync(join(caseDir, 'base', 'config.json'))),
    quantize: 'int8',
    scheme: 'per-channel',
  });
  const input = new Blob([readFileSync(join(caseDir, 'base', 'model.safetensors'))]).stream();
  const bytes = await collect(input.pipeThrough(stream));
  assert.deepEqual(bytes, new Uint8Array(readFileSync(join(out, 'model.safetensors'))));
});

test("convert MODEL OUT --quantize: both CLIs write merge --quantize's tensors for the plain merge", (t) => {
  if (skipWithoutNativeCli(t)) return;
  const dir = tempDir(t);
  const caseDir = join(corpus, 'llama_lora_f16');
  const plain = join(dir, 'plain');
  const merge = (out, extra) =>
    native([
      'merge',
      '--base',
      join(caseDir, 'base'),
      '--adapter',
      join(caseDir, 'adapter'),
      '--out',
      out,
      '-q',
      ...extra,
    ]);
  assert.equal(merge(plain, []).status, 0);
  for (const [i, scheme] of [
    ['--quantize', 'int4', '--group-size', '16'],
    ['--quantize', 'fp8'],
  ].entries()) {
    const merged = join(dir, `m${i}`);
    assert.equal(merge(merged, scheme).status, 0);
    const rNative = native(['convert', plain, join(dir, `c${i}-native`), ...scheme, '--json']);
    const rNpm = npm(['convert', plain, join(dir, `c${i}-npm`), ...scheme, '--json']);
    assert.equal(rNative.status, 0, rNative.stderr);
    assert.equal(rNpm.status, 0, rNpm.stderr);
    assert.deepEqual(stable(rNpm.stdout), stable(rNative.stdout));
    const files = readdirSync(join(dir, `c${i}-native`)).sort();
    assert.deepEqual(readdirSync(join(dir, `c${i}-npm`)).sort(), files);
    for (const f of files) {
      assert.deepEqual(readFileSync(join(dir, `c${i}-npm`, f)), readFileSync(join(dir, `c${i}-native`, f)), f);
      // The model converted from the plain merge = merge --quantize (which quantizes the merge rounded to F16).
      if (f.endsWith('.safetensors'))
        assert.deepEqual(readFileSync(join(dir, `c${i}-native`, f)), readFileSync(join(merged, f)), f);
    }
    const dry = native(['convert', plain, join(dir, 'unused'), ...scheme, '--dry-run']);
    assert.equal(dry.stdout, npm(['convert', plain, join(dir, 'unused'), ...scheme, '--dry-run']).stdout);
    assert.match(dry.stdout, /^would convert the model, no adapter/);
  }
});

test('usage errors: --scheme or --group-size without --quantize, and bad mixes, in both CLIs', (t) => {
  const caseDir = join(corpus, 'llama_lora_bf16');
  const common = ['merge', '--base', join(caseDir, 'base'), '--adapter', join(caseDir, 'adapter'), '--dry-run'];
  const cases = [
    [['--scheme', 'block'], /--scheme needs --quantize/],
    [['--group-size', '64'], /--group-size needs --quantize/],
    [['--quantize', 'fp8', '--scheme', 'per-group'], /--quantize fp8 takes --scheme per-channel/],
    [
      ['--quantize', 'int4', '--scheme', 'per-channel', '--group-size', '32'],
      /--group-size applies to --scheme per-group/,
    ],
    [['--quantize', 'nf4'], /unknown quantize `nf4`/],
  ];
  for (const [extra, pattern] of cases) {
    const r = npm([...common, ...extra]);
    assert.equal(r.status, 2, `${extra.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, pattern);
    if (hasNativeCli) assert.equal(native([...common, ...extra]).stderr, r.stderr, extra.join(' '));
    else t.diagnostic('native CLI not built: its messages not compared');
  }
});
