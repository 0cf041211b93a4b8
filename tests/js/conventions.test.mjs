// Command-line conventions users know from the hf CLI, llama.cpp and mergekit, from the one grammar both CLIs
// share (src/app/command_line.cc): `--opt=value`, `-o`, dtype spellings, `-q`, `-V`, one-line usage errors with a
// hint, and a closed stdout pipe ending quietly. Each case runs both CLIs and compares bytes and exit codes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, hasNativeCli, makeFile, nativeCli, repoRoot } from './helpers/common.mjs';

const exec = (command, args, options = {}) => {
  const r = spawnSync(command, args, { encoding: 'buffer', timeout: 60000, ...options });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout.toString('latin1'), stderr: r.stderr.toString('latin1') };
};
const npm = (args) => exec(process.execPath, [cliPath, ...args]);
const native = (args) => exec(nativeCli, args);

/** Both CLIs give the same bytes and status; returns the npm CLI's result. */
function same(t, args) {
  const js = npm(args);
  if (!hasNativeCli) {
    t.diagnostic('native CLI not built: npm CLI only');
    return js;
  }
  assert.deepEqual(js, native(args), args.join(' '));
  return js;
}

function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-conventions-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const f32 = (...v) => new Uint8Array(Float32Array.from(v).buffer);

test('usage errors are one line and a hint, identical in both CLIs', (t) => {
  const cases = [
    [[], 'error: missing command\nrun `peft-bridge --help` for usage\n'],
    [['frobnicate'], 'error: unknown command `frobnicate`\nrun `peft-bridge --help` for usage\n'],
    [['merge', '--adapter', 'a', '-o', 'x'], 'error: --base is required\nrun `peft-bridge merge --help` for usage\n'],
    [
      ['merge', '--base', 'b', '--adapter', 'a'],
      'error: -o/--out is required (or --dry-run)\nrun `peft-bridge merge --help` for usage\n',
    ],
    [
      ['convert', 'a', 'b', '--dtype=f64'],
      'error: unknown dtype `f64` (expected bf16, f16 or f32)\nrun `peft-bridge convert --help` for usage\n',
    ],
    [['inspect', '--json=yes', 'f'], 'error: --json takes no value\nrun `peft-bridge inspect --help` for usage\n'],
    [
      ['translate', 'a', 'b', '--to', 'onnx'],
      'error: unknown to `onnx` (expected peft, mlx, kohya, gguf-names or gguf)\nrun `peft-bridge translate --help` for usage\n',
    ],
  ];
  for (const [args, stderr] of cases) {
    const r = same(t, args);
    assert.equal(r.status, 2, args.join(' '));
    assert.equal(r.stderr, stderr);
    assert.equal(r.stdout, '');
  }
});

test('a long argument is echoed clipped on a character boundary, in both CLIs (the npm CLI aborted on a split é)', (t) => {
  const arg = 'a' + 'é'.repeat(150); // 301 bytes: a 200-byte cut falls inside an é
  const r = same(t, [arg]);
  assert.equal(r.status, 2);
  const stderr = Buffer.from(r.stderr, 'latin1').toString('utf8');
  assert.equal(
    stderr,
    `error: unknown command \`a${'é'.repeat(99)}… (301 bytes)\`\nrun \`peft-bridge --help\` for usage\n`,
  );
  const huge = same(t, ['merge', '--base', 'b', '--adapter', 'a', '-o', 'o', `--${'x'.repeat(100000)}=1`]);
  assert.equal(huge.status, 2);
  assert.ok(
    huge.stderr.length < 400,
    `${huge.stderr.length} bytes of usage error for a 100 kB option (one argument may hold 128 KiB on Linux)`,
  );
});

test('-V, -h, help COMMAND', (t) => {
  assert.match(same(t, ['-V']).stdout, /^peft-bridge \d+\.\d+\.\d+\n$/);
  assert.match(same(t, ['help', 'merge']).stdout, /^usage: peft-bridge merge /);
  assert.match(same(t, ['merge', '-h']).stdout, /^usage: peft-bridge merge /);
  // Remote bases merge (docs/remote.md): the help says so rather than "the base must be local".
  const mergeHelp = same(t, ['merge', '--help']).stdout;
  assert.doesNotMatch(mergeHelp, /must be local/);
  assert.match(mergeHelp, /Both may be remote:[^]*hf:\/\/OWNER\/REPO\[\/FOLDER\]\[@REVISION\]/);
});

test('--opt=value, dtype spellings and -q give the same files as the long forms', (t) => {
  const dir = tempDir(t);
  const input = join(dir, 'in.safetensors');
  writeFileSync(
    input,
    makeFile(JSON.stringify({ w: { dtype: 'F32', shape: [3], data_offsets: [0, 12] } }), f32(1, 2.5, -3)),
  );
  const reference = same(t, ['convert', input, join(dir, 'ref.safetensors'), '--dtype', 'bf16']);
  assert.equal(reference.status, 0, reference.stderr);
  rmSync(join(dir, 'ref.safetensors'));
  const viaNpm = npm(['convert', input, join(dir, 'ref.safetensors'), '--dtype', 'bf16']);
  const expected = readFileSync(join(dir, 'ref.safetensors'));
  for (const [i, spelling] of ['--dtype=BF16', '--dtype=bfloat16'].entries()) {
    const out = join(dir, `out-${i}.safetensors`);
    const r = npm(['convert', input, out, spelling, '-q']);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, '', '-q prints no summary');
    assert.deepEqual(readFileSync(out), expected, spelling);
    if (hasNativeCli) {
      rmSync(out);
      const n = native(['convert', input, out, spelling, '-q']);
      assert.deepEqual(n, r);
      assert.deepEqual(readFileSync(out), expected, `${spelling} (native)`);
    }
  }
  assert.equal(viaNpm.stdout, reference.stdout);
});

test('a closed stdout pipe ends quietly with status 0', (t) => {
  const dir = tempDir(t);
  // A header with enough tensors that the text report is far larger than a pipe buffer.
  const tensors = {};
  for (let i = 0; i < 20000; ++i)
    tensors[`tensor_with_a_long_name_${i}`] = { dtype: 'F32', shape: [0], data_offsets: [0, 0] };
  const file = join(dir, 'many.safetensors');
  writeFileSync(file, makeFile(JSON.stringify(tensors)));
  const commands = [[process.execPath, cliPath]];
  if (hasNativeCli) commands.push([nativeCli]);
  for (const [command, ...pre] of commands) {
    const r = exec('/bin/bash', [
      '-c',
      'set -o pipefail; "$@" | head -c 100 >/dev/null',
      'bash',
      command,
      ...pre,
      'inspect',
      file,
    ]);
    assert.equal(r.status, 0, `${command}: ${r.stderr}`);
    assert.equal(r.stderr, '', command);
  }
});

/** Every key of a --json document (recursively), except under `metadata` (the file's own, user-chosen keys). */
function keysOf(value, path = '', out = []) {
  if (Array.isArray(value)) value.forEach((v, i) => keysOf(v, `${path}[${i}]`, out));
  else if (value && typeof value === 'object')
    for (const [k, v] of Object.entries(value)) {
      out.push(`${path}.${k}`);
      if (k !== 'metadata') keysOf(v, `${path}.${k}`, out);
    }
  return out;
}

test('one key style: every --json output uses camelCase keys, the same in both CLIs', (t) => {
  const golden = join(repoRoot, 'tests', 'golden', 'corpus', 'gpt2_dora_conv1d');
  const out = join(tempDir(t), 'merged');
  const runs = [
    ['inspect', join(golden, 'base', 'model.safetensors'), '--json'],
    ['adapter-info', join(golden, 'adapter'), '--json'],
    ['translate', join(golden, 'adapter'), out, '--to', 'kohya', '--dry-run', '--json'],
    ['merge', '--base', join(golden, 'base'), '--adapter', join(golden, 'adapter'), '--dry-run', '--json'],
    ['merge', '--base', join(golden, 'base'), '--adapter', join(golden, 'base'), '--dry-run', '--json'], // an error
  ];
  for (const args of runs) {
    const js = npm(args);
    const doc = JSON.parse(js.stdout);
    const snake = keysOf(doc).filter((k) => /_/.test(k.slice(k.lastIndexOf('.') + 1)));
    assert.deepEqual(snake, [], `${args[0]}: snake_case keys`);
    if (hasNativeCli) {
      const n = native(args);
      assert.deepEqual(keysOf(JSON.parse(n.stdout)), keysOf(doc), `${args[0]}: the same keys in both CLIs`);
    }
  }
});
