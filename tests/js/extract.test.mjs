// extract: the npm CLI must print the same bytes, exit with the same statuses and write the same files as the native
// CLI (both are the core's), and the JS API's extractAdapter must give the CLI's files, from local paths and from
// two Hub repos read by Range (the local stand-in Hub, tests/hub/server.mjs).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync, execFile } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  copyFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  cliPath,
  collect,
  makeFile,
  nativeCli,
  rejectsWith,
  repoRoot,
  rng,
  skipWithoutNativeCli,
  webDir,
} from './helpers/common.mjs';
import { startHub } from '../hub/server.mjs';

// The Node entry (local paths as models).
const { extractAdapter } = await import(join(webDir, 'src', 'node.js'));
const { openMergeHandles } = await import(join(webDir, 'src', 'ops', 'merge.js'));
const CORPUS = join(repoRoot, 'tests', 'golden', 'corpus');
const base = (name) => join(CORPUS, name, 'base');
const tuned = (name) => join(CORPUS, name, 'peft_merged');
const CASES = ['llama_lora_f32', 'gpt2_conv1d_f32', 'qwen2_lora_bias', 'llama_modules_to_save', 'llama_embedding_lora'];

const work = mkdtempSync(join(tmpdir(), 'pb-extract-'));

/** A one-layer llama of 1 MiB weights (larger than the first 64 KiB Range request), and its fine-tune: q_proj plus
 * a rank-2 delta, the norm scaled. Written as two model folders; returns their paths. */
function bigModels() {
  const n = 512;
  const random = rng(7);
  const q = Float32Array.from({ length: n * n }, () => random() - 0.5);
  const norm = new Float32Array(n).fill(1);
  const u = Array.from({ length: 2 * n }, () => random() - 0.5);
  const tunedQ = q.map(
    (x, i) => x + 0.1 * (u[Math.floor(i / n)] * u[n + (i % n)] + u[n - 1 - Math.floor(i / n)] * u[2 * n - 1 - (i % n)]),
  );
  const tunedNorm = norm.map((x, i) => x + (i % 3 === 0 ? 0.01 : 0));
  const file = (qv, normv) => {
    const header = {
      'model.layers.0.self_attn.q_proj.weight': { dtype: 'F32', shape: [n, n], data_offsets: [0, 4 * n * n] },
      'model.norm.weight': { dtype: 'F32', shape: [n], data_offsets: [4 * n * n, 4 * n * n + 4 * n] },
    };
    const data = new Uint8Array(4 * n * n + 4 * n);
    data.set(new Uint8Array(qv.buffer), 0);
    data.set(new Uint8Array(normv.buffer), 4 * n * n);
    return makeFile(JSON.stringify(header), data);
  };
  const config = readFileSync(join(base('llama_lora_f32'), 'config.json'));
  const dirs = [];
  for (const [name, bytes] of [
    ['big-base', file(q, norm)],
    ['big-tuned', file(tunedQ, tunedNorm)],
  ]) {
    const dir = join(work, name);
    mkdirSync(dir);
    writeFileSync(join(dir, 'model.safetensors'), bytes);
    writeFileSync(join(dir, 'config.json'), config);
    dirs.push(dir);
  }
  return dirs;
}
const [bigBase, bigTuned] = bigModels();

let hub;
before(async () => {
  hub = await startHub({
    files: {
      'me/base': base('llama_lora_f32'),
      'me/tuned': tuned('llama_lora_f32'),
      'me/sharded-base': base('llama_lora_bf16'),
      'me/sharded-tuned': tuned('llama_lora_bf16'),
      'me/big-base': bigBase,
      'me/big-tuned': bigTuned,
    },
  });
});
after(async () => {
  await hub?.close();
  rmSync(work, { recursive: true, force: true });
});

let dirs = 0;
const freshDir = () => join(work, `d${dirs++}`);

const run = (cmd, args, env = {}) => {
  const r = spawnSync(cmd, args, { encoding: 'buffer', timeout: 120000, env: { ...process.env, ...env } });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout.toString('latin1'), stderr: r.stderr.toString('latin1') };
};
// Asynchronous, for commands that read from the stand-in Hub served by this process.
const runAsync = (cmd, args, env = {}) =>
  new Promise((resolve) => {
    execFile(
      cmd,
      args,
      { env: { ...process.env, ...env }, encoding: 'latin1', timeout: 120000 },
      (error, stdout, stderr) => resolve({ status: error ? error.code : 0, stdout, stderr }),
    );
  });
const hubEnv = () => ({ HF_ENDPOINT: hub.endpoint, HF_TOKEN: '', HF_HOME: join(work, 'home'), PB_HTTP_RETRIES: '0' });

const readTree = (dir) =>
  existsSync(dir)
    ? Object.fromEntries(
        readdirSync(dir)
          .sort()
          .map((n) => [n, readFileSync(join(dir, n))]),
      )
    : null;

/** Runs `extract` with both CLIs (each into its own output folder, `OUT` in args replaced); asserts the same status,
 * stdout, stderr and files; returns the native run and its files. */
async function both(args, env = {}) {
  const dir = freshDir();
  mkdirSync(dir);
  const results = [];
  for (const [who, cmd, pre] of [
    ['native', nativeCli, []],
    ['npm', process.execPath, [cliPath]],
  ]) {
    const out = join(dir, who);
    const r = await runAsync(cmd, [...pre, 'extract', ...args.map((a) => (a === 'OUT' ? out : a))], env);
    // The output folder's own path is the only expected difference.
    r.stdout = r.stdout.replaceAll(out, 'OUT');
    r.stderr = r.stderr.replaceAll(out, 'OUT');
    results.push({ ...r, files: readTree(out), out });
  }
  const [native, npm] = results;
  assert.equal(npm.status, native.status, `${args.join(' ')}: status: ${native.stderr} / ${npm.stderr}`);
  assert.equal(npm.stdout, native.stdout, args.join(' '));
  assert.equal(npm.stderr, native.stderr, args.join(' '));
  assert.deepEqual(npm.files, native.files, args.join(' '));
  return native;
}

async function streamsToFiles(files) {
  const out = {};
  for (const f of files) {
    const bytes = await collect(f.stream);
    assert.equal(bytes.length, f.size);
    out[f.path] = Buffer.from(bytes);
  }
  return out;
}

const SETTINGS = [
  ['--rank', '8'],
  ['--energy', '0.99'],
  ['--rank', '4', '--embeddings', 'lora'],
  ['--embeddings', 'skip', '--max-rank', '6'],
  ['--rank', '8', '--dtype', 'f32'],
];

test('extract: both CLIs write the same adapter and print the same texts, for every golden case and setting', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  for (const name of CASES) {
    for (const settings of SETTINGS) {
      const r = await both(['--base', base(name), '--tuned', tuned(name), '-o', 'OUT', ...settings]);
      assert.equal(r.status, 0, `${name} ${settings.join(' ')}: ${r.stderr}`);
      assert.match(r.stdout, /^extract: \d+ module\(s\) to decompose/);
      assert.match(r.stdout, /wrote: adapter_model\.safetensors \(.*\), adapter_config\.json\n$/);
      assert.deepEqual(Object.keys(r.files), ['adapter_config.json', 'adapter_model.safetensors']);
      const config = JSON.parse(r.files['adapter_config.json']);
      assert.equal(config.peft_type, 'LORA');
      assert.equal(config.r, config.lora_alpha);
      assert.equal(config.base_model_name_or_path, base(name));
    }
  }
});

test('extract: --dry-run, --json and -q print the same in both CLIs; a dry run writes nothing', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  const name = 'qwen2_lora_bias';
  for (const extra of [['--dry-run'], ['--dry-run', '--json'], ['--json', '-o', 'OUT'], ['-q', '-o', 'OUT']]) {
    const r = await both(['--base', base(name), '--tuned', tuned(name), '--rank', '4', ...extra]);
    assert.equal(r.status, 0, r.stderr);
    if (extra.includes('--dry-run')) assert.equal(r.files, null);
    if (extra.includes('--json')) {
      const j = JSON.parse(r.stdout);
      assert.equal(j.ok, true);
      assert.equal(j.dryRun, extra.includes('--dry-run'));
      assert.ok(j.modules.length > 0);
    }
    if (extra.includes('-q')) assert.equal(r.stdout, '');
  }
});

test('extract: the progress line is the same bytes in both CLIs', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  const r = await both(
    ['--base', base('llama_lora_bf16'), '--tuned', tuned('llama_lora_bf16'), '--rank', '4', '-o', 'OUT'],
    { PB_PROGRESS: 'always', PB_PROGRESS_CLOCK_MS: '2000' },
  );
  assert.equal(r.status, 0);
  assert.match(r.stderr, /100%/);
});

/** `src`'s model.safetensors with tensor `tensor`'s shape replaced by `shape` (the same bytes), in a new folder. */
function reshaped(src, tensor, shape) {
  const dir = freshDir();
  mkdirSync(dir);
  const bytes = readFileSync(join(src, 'model.safetensors'));
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8'));
  header[tensor].shape = shape;
  let text = JSON.stringify(header);
  while ((8 + text.length) % 8) text += ' ';
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(text.length));
  writeFileSync(join(dir, 'model.safetensors'), Buffer.concat([prefix, Buffer.from(text), bytes.subarray(8 + n)]));
  copyFileSync(join(src, 'config.json'), join(dir, 'config.json'));
  return dir;
}

test('extract: usage errors and failures are the same bytes and statuses in both CLIs, and leave no output', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  const llama = base('llama_lora_f32');
  const llamaTuned = tuned('llama_lora_f32');
  const full = freshDir();
  mkdirSync(full);
  writeFileSync(join(full, 'keep.txt'), 'x');
  const otherShape = reshaped(llamaTuned, 'model.layers.0.self_attn.q_proj.weight', [16, 64]);
  const linked = freshDir();
  mkdirSync(linked);
  symlinkSync(join(llamaTuned, 'model.safetensors'), join(linked, 'model.safetensors'));
  copyFileSync(join(llamaTuned, 'config.json'), join(linked, 'config.json'));
  const cases = [
    [2, ['--base', llama, '--tuned', llamaTuned]], // no -o
    [2, ['--tuned', llamaTuned, '--dry-run']],
    [2, ['--base', llama, '--dry-run']],
    [2, ['--base', llama, '--tuned', llamaTuned, '--rank', '0', '--dry-run']],
    [2, ['--base', llama, '--tuned', llamaTuned, '--rank', 'x', '--dry-run']],
    [2, ['--base', llama, '--tuned', llamaTuned, '--energy', '1.5', '--dry-run']],
    [2, ['--base', llama, '--tuned', llamaTuned, '--rank', '4', '--energy', '0.9', '--dry-run']],
    [2, ['--base', llama, '--tuned', llamaTuned, '--embeddings', 'keep', '--dry-run']],
    [2, ['--base', llama, '--tuned', llamaTuned, '--dtype', 'int8', '--dry-run']],
    [2, ['--base', llama, '--tuned', llamaTuned, 'extra', '--dry-run']],
    [1, ['--base', llama, '--tuned', otherShape, '-o', 'OUT']],
    [1, ['--base', llama, '--tuned', otherShape, '--json', '--dry-run']],
    [1, ['--base', llama, '--tuned', tuned('gpt2_conv1d_f32'), '-o', 'OUT']],
    [1, ['--base', llama, '--tuned', join(work, 'missing'), '-o', 'OUT']],
    [1, ['--base', join(llama, 'config.json'), '--tuned', llamaTuned, '-o', 'OUT']],
    [1, ['--base', llama, '--tuned', llamaTuned, '--modules', 'nothing', '--dry-run']],
    [1, ['--base', llama, '--tuned', llama, '-o', 'OUT']], // nothing changed: found only after reading everything
    [1, ['--base', llama, '--tuned', llama, '--json', '-o', 'OUT']],
    [1, ['--base', llama, '--tuned', llamaTuned, '-o', full]],
    [1, ['--base', llama, '--tuned', llamaTuned, '-o', join(llamaTuned, 'sub')]], // inside an input folder
    [1, ['--base', llama, '--tuned', llamaTuned, '-o', join(full, 'keep.txt', 'sub')]], // cannot be made: no plan told
    [1, ['--base', llama, '--tuned', linked, '-o', 'OUT']], // a shard leading out of its folder
    [0, ['--base', llama, '--tuned', linked, '--follow-links', '-o', 'OUT']],
  ];
  for (const [status, args] of cases) {
    const r = await both(args);
    assert.equal(r.status, status, `${args.join(' ')}: ${r.stderr}`);
    if (args.includes('OUT') && status !== 0) assert.equal(r.files, null, `${args.join(' ')}: left output`);
  }
  assert.deepEqual(readdirSync(full), ['keep.txt']);
  assert.ok(!existsSync(join(llamaTuned, 'sub')));
  // The shape mismatch names the tensor.
  const r = run(nativeCli, ['extract', '--base', llama, '--tuned', otherShape, '--dry-run']);
  assert.match(r.stderr, /q_proj/);
});

test('extractAdapter: the CLI files from local paths and from a MergeBase; dryRun is the --dry-run --json plan', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  for (const [name, options, args] of [
    ['llama_lora_f32', { rank: 8 }, ['--rank', '8']],
    ['gpt2_conv1d_f32', { energy: 0.99, dtype: 'bf16' }, ['--energy', '0.99', '--dtype', 'bf16']],
    [
      'llama_embedding_lora',
      { rank: '4', embeddings: 'lora', modules: ['q_proj', 'v_proj'] },
      ['--rank', '4', '--embeddings', 'lora', '--modules', 'q_proj,v_proj'],
    ],
    ['llama_lora_bf16', { maxRank: 4 }, ['--max-rank', '4']], // sharded
  ]) {
    const out = freshDir();
    const r = run(nativeCli, ['extract', '--base', base(name), '--tuned', tuned(name), '-o', out, '-q', ...args]);
    assert.equal(r.status, 0, r.stderr);
    const progress = [];
    const made = await extractAdapter({
      base: base(name),
      tuned: tuned(name),
      ...options,
      onProgress: (p) => progress.push(p),
    });
    assert.deepEqual(await streamsToFiles(made.files), readTree(out), name);
    assert.equal(made.config, readFileSync(join(out, 'adapter_config.json'), 'utf8'));
    const json = JSON.parse(
      run(nativeCli, ['extract', '--base', base(name), '--tuned', tuned(name), '-o', freshDir(), '--json', ...args])
        .stdout,
    );
    delete json.ok;
    delete json.dryRun;
    assert.deepEqual(made.summary, json);
    const text = run(nativeCli, [
      'extract',
      '--base',
      base(name),
      '--tuned',
      tuned(name),
      '-o',
      freshDir(),
      ...args,
    ]).stdout;
    assert.equal(made.text, Buffer.from(text, 'latin1').toString('utf8'));
    const last = progress.at(-1);
    assert.equal(last.bytesIn, last.totalIn);
    assert.equal(last.modulesDone, last.modules);
    // A MergeBase of bytes gives the same adapter (baseName set to the path, which the config records).
    const mergeBase = (dir) => ({
      open: (shard) => new Uint8Array(readFileSync(join(dir, shard))),
      index: existsSync(join(dir, 'model.safetensors.index.json'))
        ? readFileSync(join(dir, 'model.safetensors.index.json'))
        : null,
      config: readFileSync(join(dir, 'config.json'), 'utf8'),
    });
    const again = await extractAdapter({
      base: mergeBase(base(name)),
      tuned: mergeBase(tuned(name)),
      baseName: base(name),
      ...options,
    });
    assert.deepEqual(await streamsToFiles(again.files), readTree(out), `${name} (MergeBase)`);
    // The plan alone.
    const plan = await extractAdapter({ base: base(name), tuned: tuned(name), ...options, dryRun: true });
    const dry = JSON.parse(
      run(nativeCli, ['extract', '--base', base(name), '--tuned', tuned(name), '--dry-run', '--json', ...args]).stdout,
    );
    delete dry.ok;
    delete dry.dryRun;
    assert.deepEqual(plan.summary, dry);
    assert.deepEqual(plan.files, []);
  }
  assert.equal(openMergeHandles(), 0);
});

test("extractAdapter: the core's errors, with the CLI's messages; a stream base needs ranges", async (t) => {
  if (skipWithoutNativeCli(t)) return;
  const llama = base('llama_lora_f32');
  await rejectsWith(
    extractAdapter({ base: llama, tuned: tuned('llama_lora_f32'), rank: 0 }),
    'InvalidArgument',
    /--rank/,
  );
  await rejectsWith(
    extractAdapter({ base: llama, tuned: tuned('llama_lora_f32'), embeddings: 'keep' }),
    'InvalidArgument',
    /unknown embeddings `keep` \(expected save, lora or skip\)/,
  ); // the CLI's message
  await rejectsWith(extractAdapter({ base: llama, tuned: tuned('gpt2_conv1d_f32') }), 'ShapeMismatch');
  await rejectsWith(extractAdapter({ base: llama, tuned: llama }), 'InvalidArgument', /no decomposed module differs/);
  const streamBase = { open: (name) => new Blob([readFileSync(join(llama, name))]).stream() };
  await rejectsWith(
    extractAdapter({ base: streamBase, tuned: tuned('llama_lora_f32') }),
    'InvalidArgument',
    /by ranges/,
  );
  await assert.rejects(extractAdapter({ base: llama }), TypeError);
  await assert.rejects(extractAdapter({ base: 42, tuned: llama }), TypeError);
  assert.equal(openMergeHandles(), 0);
});

test('extractAdapter: an AbortSignal stops it, before or while it reads, and frees the handle', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  const name = 'llama_lora_bf16';
  const before = new AbortController();
  before.abort(new Error('stop now'));
  await assert.rejects(extractAdapter({ base: base(name), tuned: tuned(name), signal: before.signal }), /stop now/);
  const during = new AbortController();
  let calls = 0;
  await assert.rejects(
    extractAdapter({
      base: base(name),
      tuned: tuned(name),
      rank: 4,
      signal: during.signal,
      onProgress: () => {
        if (++calls === 2) during.abort(new Error('stop midway'));
      },
    }),
    /stop midway/,
  );
  assert.equal(calls, 2);
  assert.equal(openMergeHandles(), 0);
  // From the Hub: the Range reads under way are aborted too.
  const remote = new AbortController();
  await assert.rejects(
    extractAdapter({
      base: { repo: 'me/sharded-base' },
      tuned: { repo: 'me/sharded-tuned' },
      rank: 4,
      endpoint: hub.endpoint,
      retries: 0,
      signal: remote.signal,
      onProgress: () => remote.abort(new Error('stop remote')),
    }),
    /stop remote/,
  );
  assert.equal(openMergeHandles(), 0);
});

test("extract from two Hub repos: both CLIs and extractAdapter alike, the local models' bytes, Range reads only", async (t) => {
  if (skipWithoutNativeCli(t)) return;
  for (const [repos, local, args, options] of [
    [['me/base', 'me/tuned'], [base('llama_lora_f32'), tuned('llama_lora_f32')], ['--rank', '8'], { rank: 8 }],
    [
      ['me/sharded-base', 'me/sharded-tuned'],
      [base('llama_lora_bf16'), tuned('llama_lora_bf16')],
      ['--energy', '0.99', '--embeddings', 'lora'],
      { energy: 0.99, embeddings: 'lora' },
    ],
    [['me/big-base', 'me/big-tuned'], [bigBase, bigTuned], ['--energy', '0.999'], { energy: 0.999 }],
  ]) {
    const r = await both(['--base', `hf://${repos[0]}`, '--tuned', `hf://${repos[1]}`, '-o', 'OUT', ...args], hubEnv());
    assert.equal(r.status, 0, r.stderr);
    const remoteFiles = r.files;
    assert.equal(JSON.parse(remoteFiles['adapter_config.json']).base_model_name_or_path, repos[0]);
    // The weights equal those of the local models.
    const here = freshDir();
    const l = run(nativeCli, ['extract', '--base', local[0], '--tuned', local[1], '-o', here, '-q', ...args]);
    assert.equal(l.status, 0, l.stderr);
    assert.deepEqual(remoteFiles['adapter_model.safetensors'], readTree(here)['adapter_model.safetensors']);

    hub.requests.length = 0;
    const made = await extractAdapter({
      base: { repo: repos[0] },
      tuned: { repo: repos[1] },
      ...options,
      endpoint: hub.endpoint,
    });
    assert.deepEqual(await streamsToFiles(made.files), remoteFiles);
    // Every request for a weights file asks for a range, and never for a whole file.
    const dirOf = { [repos[0]]: local[0], [repos[1]]: local[1] };
    const shards = hub.requests.filter((q) => q.kind === 'cdn' || q.path?.endsWith('.safetensors'));
    assert.ok(shards.some((q) => q.kind === 'cdn'));
    for (const q of shards) {
      assert.match(q.range ?? '', /^bytes=\d+-\d+$/, `${q.method} ${q.url} without a range`);
      const [, from, to] = /^bytes=(\d+)-(\d+)$/.exec(q.range);
      const size = statSync(join(dirOf[q.repo], q.path)).size;
      // A file larger than the first 64 KiB request is never asked for whole.
      if (size > 65536)
        assert.ok(
          !(Number(from) === 0 && Number(to) + 1 >= size),
          `${q.repo}/${q.path}: the whole file (${q.range} of ${size})`,
        );
    }
    if (repos[0] === 'me/big-base') {
      const big = hub.requests.filter((q) => q.kind === 'cdn');
      assert.ok(big.length >= 4, `${big.length} Range requests`);
      assert.equal(made.summary.decomposed, 1);
      assert.equal(made.summary.modules.find((m) => m.rank !== undefined).rank, 2);
    }
  }
  assert.equal(openMergeHandles(), 0);
});

test("extractAdapter: the WebAssembly heap holds one module's delta, not the models", async (t) => {
  if (skipWithoutNativeCli(t)) return;
  // Two 2048x2048 float32 modules per model (32 MiB each); the fine-tune adds a rank-4 delta to each.
  const n = 2048;
  const dirs = [];
  for (const name of ['heap-base', 'heap-tuned']) {
    const header = {};
    const parts = [];
    for (let l = 0; l < 2; ++l) {
      const random = rng(100 + l);
      const w = Float32Array.from({ length: n * n }, () => random() - 0.5);
      if (name === 'heap-tuned') {
        const r = rng(200 + l);
        const u = Float32Array.from({ length: 4 * n }, () => r() - 0.5);
        for (let k = 0; k < 4; ++k)
          for (let i = 0; i < n; ++i)
            for (let j = 0; j < n; ++j) w[i * n + j] += 0.05 * u[k * n + i] * u[((k + 1) % 4) * n + j];
      }
      header[`model.layers.${l}.self_attn.q_proj.weight`] = {
        dtype: 'F32',
        shape: [n, n],
        data_offsets: [4 * n * n * l, 4 * n * n * (l + 1)],
      };
      parts.push(new Uint8Array(w.buffer));
    }
    const data = new Uint8Array(8 * n * n);
    parts.forEach((p, i) => data.set(p, i * 4 * n * n));
    const dir = join(work, name);
    mkdirSync(dir);
    writeFileSync(join(dir, 'model.safetensors'), makeFile(JSON.stringify(header), data));
    copyFileSync(join(base('llama_lora_f32'), 'config.json'), join(dir, 'config.json'));
    dirs.push(dir);
  }
  const { getModule } = await import(join(webDir, 'src', 'init.js'));
  const module = await getModule();
  const before = module.HEAPU8.length;
  const made = await extractAdapter({ base: dirs[0], tuned: dirs[1], rank: 4 });
  const grown = module.HEAPU8.length - before;
  assert.equal(made.summary.largestDeltaBytes, 4 * n * n);
  // The growth is bounded by one delta plus the SVD's workspace (the subspace bases), far below the 64 MiB read.
  assert.ok(grown <= made.summary.largestDeltaBytes + (16 << 20), `the heap grew by ${grown} bytes`);
  const out = freshDir();
  const r = run(nativeCli, ['extract', '--base', dirs[0], '--tuned', dirs[1], '--rank', '4', '-o', out, '-q']);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(await streamsToFiles(made.files), readTree(out));
});
