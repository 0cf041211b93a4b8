// create: the npm CLI must print the same bytes, exit with the same statuses and write the same files as the native
// CLI (with --seed, the same bytes everywhere), and the JS API's createAdapter must give the CLI's files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, collect, nativeCli, rejectsWith, repoRoot, skipWithoutNativeCli, webDir } from './helpers/common.mjs';

// The Node entry (local paths as bases).
const { createAdapter } = await import(join(webDir, 'src', 'node.js'));
const { openMergeHandles } = await import(join(webDir, 'src', 'ops', 'merge.js'));
const CORPUS = join(repoRoot, 'tests', 'golden', 'corpus');
const base = (name) => join(CORPUS, name, 'base');

const run = (cmd, args, env = {}) => {
  const r = spawnSync(cmd, args, { encoding: 'buffer', timeout: 60000, env: { ...process.env, ...env } });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout.toString('latin1'), stderr: r.stderr.toString('latin1') };
};

function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-create-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const readTree = (dir) =>
  existsSync(dir)
    ? Object.fromEntries(
        readdirSync(dir)
          .sort()
          .map((n) => [n, readFileSync(join(dir, n))]),
      )
    : null;

/** Runs `create` with both CLIs (each into its own output folder, `OUT` in args replaced); asserts the same status,
 * stdout, stderr and files; returns the native run and its files. */
function both(t, args, env = {}) {
  const dir = tempDir(t);
  const results = [];
  for (const [who, cmd, pre] of [
    ['native', nativeCli, []],
    ['npm', process.execPath, [cliPath]],
  ]) {
    const out = join(dir, who);
    const r = run(cmd, [...pre, 'create', ...args.map((a) => (a === 'OUT' ? out : a))], env);
    // The output folder's own path is the only expected difference.
    r.stdout = r.stdout.replaceAll(out, 'OUT');
    r.stderr = r.stderr.replaceAll(out, 'OUT');
    results.push({ ...r, files: readTree(out) });
  }
  const [native, npm] = results;
  assert.equal(npm.status, native.status, `status: ${native.stderr} / ${npm.stderr}`);
  assert.equal(npm.stdout, native.stdout);
  assert.equal(npm.stderr, native.stderr);
  assert.deepEqual(npm.files, native.files);
  return native;
}

test('create: both CLIs write the same adapter, for every kind of target and setting', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const runs = [
    [base('llama_lora_bf16'), '--target-modules', 'q_proj,v_proj'], // a sharded base
    [base('llama_lora_f32'), '--target-modules', 'all-linear', '--r', '4', '--alpha', '16'],
    [base('llama_dora'), '--target-modules', 'q_proj,down_proj', '--dora', '--seed', '123'],
    [base('gpt2_dora_conv1d'), '--target-modules', 'all-linear', '--dora', '--dtype', 'bf16'], // Conv1D
    [
      base('llama_lora_f16'),
      '--target-regex',
      '.*\\.mlp\\.(up|down)_proj',
      '--init',
      'gaussian',
      '--rslora',
      '--alpha',
      '16.5',
    ],
    [join(base('llama_lora_f16'), 'model.safetensors'), '--target-modules', 'o_proj', '--dtype', 'fp16'],
  ];
  for (const args of runs) {
    const r = both(t, ['--base', ...args, '-o', 'OUT']);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^create: \d+ LoRA module\(s\)/);
    assert.match(r.stdout, /wrote: adapter_model\.safetensors \(.*\), adapter_config\.json\n$/);
    assert.deepEqual(Object.keys(r.files), ['adapter_config.json', 'adapter_model.safetensors']);
    const config = JSON.parse(r.files['adapter_config.json']);
    assert.equal(config.peft_type, 'LORA');
    assert.equal(config.base_model_name_or_path, args[0]);
  }
});

test('create: --dry-run and --json print the plan, the same in both CLIs, and write nothing', (t) => {
  if (skipWithoutNativeCli(t)) return;
  for (const extra of [['--dry-run'], ['--dry-run', '--json'], ['--json', '-o', 'OUT'], ['-q', '-o', 'OUT']]) {
    const r = both(t, ['--base', base('llama_dora'), '--target-modules', 'all-linear', '--dora', ...extra]);
    assert.equal(r.status, 0, r.stderr);
    if (extra.includes('--dry-run')) assert.equal(r.files, null);
    if (extra.includes('--json')) {
      const j = JSON.parse(r.stdout);
      assert.equal(j.ok, true);
      assert.equal(j.modules.length, 14);
      assert.ok(j.baseBytesRead > 0);
    }
    if (extra.includes('-q')) assert.equal(r.stdout, '');
  }
});

test('create: with a seed, the same bytes every run; another seed, other A values', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const a = both(t, ['--base', base('llama_lora_f32'), '--target-modules', 'q_proj', '--seed', '9', '-o', 'OUT']);
  const b = both(t, ['--base', base('llama_lora_f32'), '--target-modules', 'q_proj', '--seed', '9', '-o', 'OUT']);
  const c = both(t, ['--base', base('llama_lora_f32'), '--target-modules', 'q_proj', '--seed', '10', '-o', 'OUT']);
  assert.deepEqual(a.files, b.files);
  assert.notDeepEqual(a.files['adapter_model.safetensors'], c.files['adapter_model.safetensors']);
  assert.deepEqual(a.files['adapter_config.json'], c.files['adapter_config.json']);
});

test('create: errors are the same bytes and statuses in both CLIs', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const dir = tempDir(t);
  const full = join(dir, 'full');
  mkdirSync(full);
  writeFileSync(join(full, 'keep.txt'), 'x');
  const llama = base('llama_dora');
  const cases = [
    [2, ['--base', llama, '--target-modules', 'q_proj']], // no -o
    [2, ['--base', llama, '--target-modules', 'q_proj', '--r', '0', '--dry-run']],
    [2, ['--base', llama, '--target-modules', 'q_proj', '--alpha', 'x', '--dry-run']],
    [2, ['--base', llama, '--target-modules', 'q_proj', '--target-regex', 'q', '--dry-run']],
    [2, ['--base', llama, '--dry-run']],
    [2, ['--base', llama, '--target-modules', 'q_proj', '--init', 'xavier', '--dry-run']],
    [2, ['--target-modules', 'q_proj', '--dry-run']],
    [1, ['--base', llama, '--target-modules', 'qproj,v_proj', '--dry-run']],
    [1, ['--base', llama, '--target-modules', 'embed_tokens', '--dry-run']],
    [1, ['--base', llama, '--target-regex', 'q_proj', '--dry-run']],
    [1, ['--base', llama, '--target-regex', '(?<=a)b', '--dry-run']],
    [1, ['--base', join(llama, 'config.json'), '--target-modules', 'q_proj', '--dry-run']],
    [1, ['--base', join(dir, 'missing'), '--target-modules', 'q_proj', '--dry-run']],
    [1, ['--base', llama, '--target-modules', 'q_proj', '-o', full]],
    [1, ['--base', llama, '--target-modules', 'q_proj', '-o', join(llama, 'sub')]],
    // A folder that cannot be made: reported before the plan is told.
    [1, ['--base', llama, '--target-modules', 'q_proj', '-o', join(full, 'keep.txt', 'sub')]],
    [1, ['--base', llama, '--target-modules', 'nothing', '--json', '--dry-run']],
  ];
  for (const [status, args] of cases) {
    const r = both(t, args);
    assert.equal(r.status, status, `${args.join(' ')}: ${r.stderr}`);
  }
  assert.ok(!existsSync(join(llama, 'sub')));
  assert.deepEqual(readdirSync(full), ['keep.txt']);
  // --force writes into a non-empty folder and keeps its other files.
  const r = run(nativeCli, ['create', '--base', llama, '--target-modules', 'q_proj', '-o', full, '--force', '-q']);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(readdirSync(full).sort(), ['adapter_config.json', 'adapter_model.safetensors', 'keep.txt']);
});

test('create --dora: the progress line is the same bytes in both CLIs', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const r = both(t, ['--base', base('llama_lora_bf16'), '--target-modules', 'all-linear', '--dora', '-o', 'OUT'], {
    PB_PROGRESS: 'always',
    PB_PROGRESS_CLOCK_MS: '2000',
  });
  assert.equal(r.status, 0);
  assert.match(r.stderr, /100%/);
});

async function streamsToFiles(files) {
  const out = {};
  for (const f of files) {
    const bytes = await collect(f.stream);
    assert.equal(bytes.length, f.size);
    out[f.path] = Buffer.from(bytes);
  }
  return out;
}

test('createAdapter: the CLI files, from a path or a MergeBase, with progress and abort', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  const dir = tempDir(t);
  const llama = base('llama_dora');
  for (const [options, args] of [
    [{ targetModules: ['q_proj', 'v_proj'], seed: 3 }, ['--target-modules', 'q_proj,v_proj', '--seed', '3']],
    [
      { targetModules: 'all-linear', dora: true, r: 4, alpha: 16, dtype: 'bf16' },
      ['--target-modules', 'all-linear', '--dora', '--r', '4', '--alpha', '16', '--dtype', 'bf16'],
    ],
    [
      { targetRegex: '.*q_proj', init: 'gaussian', seed: 18446744073709551615n },
      ['--target-regex', '.*q_proj', '--init', 'gaussian', '--seed', '18446744073709551615'],
    ],
  ]) {
    const out = join(dir, String(readdirSync(dir).length));
    const r = run(nativeCli, ['create', '--base', llama, '-o', out, '-q', ...args]);
    assert.equal(r.status, 0, r.stderr);
    const progress = [];
    const created = await createAdapter({ base: llama, ...options, onProgress: (p) => progress.push(p) });
    assert.deepEqual(await streamsToFiles(created.files), readTree(out));
    assert.equal(created.config, readFileSync(join(out, 'adapter_config.json'), 'utf8'));
    assert.equal(created.summary.modules.length > 0, true);
    if (options.dora)
      assert.deepEqual(progress.at(-1), {
        bytesIn: created.summary.baseBytesRead,
        totalIn: created.summary.baseBytesRead,
      });
    // A MergeBase of bytes gives the same adapter (baseName set to the path, which the config records).
    const mergeBase = {
      open: (name) => new Uint8Array(readFileSync(join(llama, name))),
      config: readFileSync(join(llama, 'config.json'), 'utf8'),
    };
    const again = await createAdapter({ base: mergeBase, baseName: llama, ...options });
    assert.deepEqual(await streamsToFiles(again.files), readTree(out));
  }
  // A stream base: fine without DoRA (headers only); DoRA needs the weights by range.
  const streamBase = {
    open: (name) => new Blob([readFileSync(join(llama, name))]).stream(),
    config: readFileSync(join(llama, 'config.json')),
  };
  const streamed = await createAdapter({ base: streamBase, baseName: llama, targetModules: 'q_proj', seed: 3 });
  assert.equal((await streamsToFiles(streamed.files))['adapter_model.safetensors'].length, streamed.files[0].size);
  await rejectsWith(
    createAdapter({ base: streamBase, targetModules: 'q_proj', dora: true }),
    'InvalidArgument',
    /DoRA needs model\.safetensors by ranges/,
  );
  await rejectsWith(
    createAdapter({ base: llama, targetModules: 'nope' }),
    'InvalidArgument',
    /`nope` matches no module/,
  );
  await rejectsWith(
    createAdapter({ base: llama, targetModules: 'q_proj', r: 0 }),
    'InvalidArgument',
    /--r must be a positive integer/,
  );
  await assert.rejects(createAdapter({ targetModules: 'q_proj' }), TypeError);
  const controller = new AbortController();
  controller.abort(new Error('stop'));
  await assert.rejects(createAdapter({ base: llama, targetModules: 'q_proj', signal: controller.signal }), /stop/);
  // Aborting while the weights stream is read errors it; cancelling it frees the core's handle too.
  const later = new AbortController();
  const open = await createAdapter({ base: llama, targetModules: 'all-linear', signal: later.signal });
  const reader = open.files[0].stream.getReader();
  await reader.read();
  later.abort(new Error('later'));
  await assert.rejects(reader.read(), /later/);
  const cancelled = await createAdapter({ base: llama, targetModules: 'q_proj' });
  await cancelled.files[0].stream.cancel();
  assert.equal(openMergeHandles(), 0);
});
