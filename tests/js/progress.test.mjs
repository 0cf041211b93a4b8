// Progress that helps, in both CLIs: merge and convert print their plan before the work and draw the core's
// progress line (src/app/progress_text.h) on stderr. PB_PROGRESS=always draws it without a terminal and
// PB_PROGRESS_CLOCK_MS fixes its clock, so the two CLIs' stderr must be the same bytes; --json, -q and
// --no-progress turn it off. Every case runs the native and the npm CLI in two identical trees (helpers/two-trees).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { f32Bytes, makeFile, skipWithoutNativeCli, writePeftAdapterDir } from './helpers/common.mjs';
import { both } from './helpers/two-trees.mjs';

const FORCED = { PB_PROGRESS: 'always', PB_PROGRESS_CLOCK_MS: '2000' };
const Q = 'model.layers.0.self_attn.q_proj';
const V = 'model.layers.0.self_attn.v_proj';
const SHARDS = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];

const f32 = f32Bytes;
const writeAdapter = (dir) => writePeftAdapterDir(dir, [Q, V], ['q_proj', 'v_proj'], 64);

/** A 64x64 llama base in two shards (q_proj in the first, v_proj and a norm in the second), with its index. */
function writeShardedBase(dir, { weight = 1 } = {}) {
  mkdirSync(dir, { recursive: true });
  const square = (begin) => ({ dtype: 'F32', shape: [64, 64], data_offsets: [begin, begin + 16384] });
  writeFileSync(join(dir, SHARDS[0]), makeFile(JSON.stringify({ [`${Q}.weight`]: square(0) }), f32(4096, weight)));
  const second = {
    [`${V}.weight`]: square(0),
    'model.norm.weight': { dtype: 'F32', shape: [64], data_offsets: [16384, 16640] },
  };
  writeFileSync(join(dir, SHARDS[1]), makeFile(JSON.stringify(second), f32(4160, weight)));
  const weightMap = { [`${Q}.weight`]: SHARDS[0], [`${V}.weight`]: SHARDS[1], 'model.norm.weight': SHARDS[1] };
  writeFileSync(
    join(dir, 'model.safetensors.index.json'),
    JSON.stringify({ metadata: { total_size: 33024 }, weight_map: weightMap }),
  );
  writeFileSync(
    join(dir, 'config.json'),
    JSON.stringify({
      architectures: ['LlamaForCausalLM'],
      model_type: 'llama',
      hidden_size: 64,
      num_attention_heads: 1,
    }),
  );
}

const setupMerge = (options) => (root) => {
  writeAdapter(join(root, 'rob'));
  writeShardedBase(join(root, 'base'), options);
};

/** The lines drawn ("\r"-led, the last ended by "\n"), spaces that pad over a longer line trimmed. */
const drawn = (stderr) =>
  stderr
    .split('\r')
    .slice(1)
    .map((l) => l.trimEnd());

test('merge: the same progress bytes in both CLIs: each shard as it starts, then the total', (t) => {
  if (skipWithoutNativeCli(t)) return;
  // One shard after the other (the shards of a merge with threads go at once: one line for all, below).
  const r = both(
    t,
    setupMerge(),
    ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out', '--threads', '1'],
    FORCED,
  );
  assert.equal(r.status, 0, r.stderr);
  // 33,024 source bytes; every elapsed time reads 2 s.
  assert.deepEqual(drawn(r.stderr), [
    `[                    ]   0%  0 B / 33.0 kB  0 B/s  ETA --:--  ${SHARDS[0]}`,
    `[#########           ]  49%  16.4 kB / 33.0 kB  8.19 kB/s  ETA 0:02  ${SHARDS[1]}`,
    `[####################] 100%  33.0 kB / 33.0 kB  16.5 kB/s  in 0:02  ${SHARDS[1]}`,
  ]);
  assert.ok(r.stderr.endsWith('\n'), 'the line is ended');
  // The plan came first: it is stdout's beginning, the measured outcome its last line.
  const lines = r.stdout.split('\n');
  assert.equal(lines[0], 'merge 2 module(s) into 2 tensor(s) (architecture llama)');
  assert.match(lines[1], new RegExp(`^  ${SHARDS[0]}: 1 tensors, [\\d.]+ kB$`));
  assert.match(
    lines.at(-2),
    /^33\.0 kB in [\d.]+ s \([\d.]+ [kMG]?B\/s\), peak memory [\d.]+ [kMG]?B process RSS(, [\d.]+ [kMG]?B WASM heap)?$/,
  );
});

test('merge: shards merged at once (threads natively, worker threads in the npm CLI) draw one line that counts the files', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const r = both(
    t,
    setupMerge(),
    ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out', '--threads', '2'],
    FORCED,
  );
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(drawn(r.stderr), [
    '[                    ]   0%  0 B / 33.0 kB  0 B/s  ETA --:--  2 files at once',
    '[####################] 100%  33.0 kB / 33.0 kB  16.5 kB/s  in 0:02  2 files at once',
  ]);
});

test('merge: the plan is printed before the work, so a failure mid-merge still shows it; the line is ended first', (t) => {
  if (skipWithoutNativeCli(t)) return;
  // One shard after the other (shards merged at once draw "2 files at once", above).
  const r = both(
    t,
    setupMerge({ weight: NaN }),
    ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out', '--safe', '--threads', '1'],
    FORCED,
  );
  assert.equal(r.status, 1);
  assert.match(r.stdout, /^merge 2 module\(s\) into 2 tensor\(s\)/);
  assert.doesNotMatch(r.stdout, / in [\d.]+ s /, 'no outcome');
  // The first shard's line, ended, then the error on a line of its own.
  assert.match(r.stderr, new RegExp(`^\\r\\[ +\\]   0%  0 B / 33\\.0 kB  0 B/s  ETA --:--  ${SHARDS[0]}\\nerror: `));
  assert.deepEqual(r.after, r.before, 'nothing written');
});

test('merge: no progress with --json, -q or --no-progress, nor without a terminal unless forced', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const args = ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out'];
  for (const extra of [['--json'], ['-q'], ['--quiet'], ['--no-progress']]) {
    const r = both(t, setupMerge(), [...args, ...extra], FORCED);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stderr, '', extra.join(' '));
    if (extra[0] === '--json') assert.equal(JSON.parse(r.stdout).bytesIn, 33024, 'exact bytes in --json');
    if (extra[0] === '--no-progress') assert.match(r.stdout, /^merge 2 module/);
    else if (extra[0] !== '--json') assert.equal(r.stdout, '');
  }
  const plain = both(t, setupMerge(), args, { PB_PROGRESS: 'no', PB_PROGRESS_CLOCK_MS: '2000' });
  assert.equal(plain.stderr, '', 'stderr is no terminal here');
  assert.match(plain.stdout, /^merge 2 module/);
});

test('merge --dry-run: the plan alone, no progress', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const r = both(t, setupMerge(), ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out', '--dry-run'], FORCED);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '');
  assert.match(r.stdout, /^would merge 2 module\(s\) into 2 tensor\(s\) \(architecture llama\)\n/);
  assert.doesNotMatch(r.stdout, / in [\d.]+ s /);
});

/** An F32 file of two tensors, 40,000 and 1,000 floats. */
function writeTensors(root) {
  const header = {
    a: { dtype: 'F32', shape: [200, 200], data_offsets: [0, 160000] },
    b: { dtype: 'F32', shape: [1000], data_offsets: [160000, 164000] },
  };
  writeFileSync(join(root, 'in.safetensors'), makeFile(JSON.stringify(header), f32(41000, 1.5)));
}

test('convert: the plan on stdout first, the same progress bytes in both CLIs', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const r = both(t, writeTensors, ['convert', 'in.safetensors', 'out.safetensors', '--dtype', 'bf16'], FORCED);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'convert 2 of 2 tensors; output 82.1 kB\n');
  const lines = drawn(r.stderr);
  assert.equal(lines.length, 2, r.stderr);
  assert.match(lines[0], /^\[ {20}\]   0%  0 B \/ 164 kB  0 B\/s  ETA --:--  in\.safetensors$/);
  assert.match(lines[1], /^\[#{20}\] 100%  164 kB \/ 164 kB  82\.\d kB\/s  in 0:02  in\.safetensors$/);
  assert.ok(r.stderr.endsWith('\n'));
  const json = both(
    t,
    writeTensors,
    ['convert', 'in.safetensors', 'out.safetensors', '--dtype', 'bf16', '--json'],
    FORCED,
  );
  assert.equal(json.stderr, '');
  assert.ok(Number.isInteger(JSON.parse(json.stdout).outputSize), 'exact bytes in --json');
  const quiet = both(
    t,
    writeTensors,
    ['convert', 'in.safetensors', 'out.safetensors', '--dtype', 'bf16', '-q'],
    FORCED,
  );
  assert.deepEqual([quiet.stdout, quiet.stderr], ['', '']);
});

test('convert: a refused output prints neither plan nor progress', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const r = both(t, writeTensors, ['convert', 'in.safetensors', 'in.safetensors', '--dtype', 'bf16'], FORCED);
  assert.equal(r.status, 1);
  assert.equal(r.stdout, '');
  assert.match(r.stderr, /^error: /);
});

test('translate: the same progress bytes in both CLIs, over the adapter weights file', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const setup = (root) => writeAdapter(join(root, 'rob'));
  const r = both(t, setup, ['translate', 'rob', 'out', '--to', 'mlx'], FORCED);
  assert.equal(r.status, 0, r.stderr);
  const lines = drawn(r.stderr);
  assert.equal(lines.length, 2, r.stderr);
  assert.match(lines[0], /^\[ {20}\]   0%  0 B \/ 2\.\d\d kB  0 B\/s  ETA --:--  adapter_model\.safetensors$/);
  assert.match(lines[1], /^\[#{20}\] 100%  (2\.\d\d kB) \/ \1  1\.\d\d kB\/s  in 0:02  adapter_model\.safetensors$/);
  // The plan before the work, the outcome after it.
  assert.match(
    r.stdout,
    /^translate peft -> mlx: 4 tensor\(s\) mapped, 0 rejected\n(  .*\n)+wrote: adapters.safetensors, adapter_config.json\n$/,
  );
  for (const extra of [['--json'], ['-q'], ['--no-progress'], ['--dry-run']]) {
    const off = both(t, setup, ['translate', 'rob', 'out', '--to', 'mlx', ...extra], FORCED);
    assert.equal(off.status, 0, off.stderr);
    assert.equal(off.stderr, '', extra.join(' '));
  }
});
