// web/bin/peft-bridge.mjs: exit statuses, JSON errors, atomic writes, and byte-identical output with the
// native CLI (build/native/peft-bridge) when it is built.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  cliPath,
  fixtureNames,
  fixturePath,
  fixturesDir,
  hasFixtures,
  nativeCli,
  readFixture,
  skipWithoutFixtures,
  skipWithoutNativeCli,
} from './helpers/common.mjs';

const run = (args, cwd, options = {}) => {
  const r = spawnSync(process.execPath, [cliPath, ...args], { cwd, encoding: 'buffer', timeout: 20000, ...options });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout?.toString('latin1') ?? '', stderr: r.stderr?.toString('latin1') ?? '' };
};
const runNative = (args, cwd) => {
  const r = spawnSync(nativeCli, args, { cwd, encoding: 'buffer' });
  return { status: r.status, stdout: r.stdout.toString('latin1'), stderr: r.stderr.toString('latin1') };
};

const ABUSE = 'syoyo-safetensors-cpp/safetensors_abuse_attempt_1.safetensors';
const GOOD = 'safetensors-jl-dtypes/model.safetensors';

test('exit statuses: 0 on success, 1 on invalid input, 2 on usage errors', (t) => {
  assert.equal(run(['--version']).status, 0);
  assert.match(run(['--version']).stdout, /^peft-bridge \d+\.\d+\.\d+\n$/);
  for (const args of [
    [],
    ['bogus'],
    ['inspect'],
    ['inspect', 'a', 'b'],
    ['inspect', '--bogus', 'a'],
    ['convert', 'a', 'b'],
    ['convert', 'a', 'b', '--dtype', 'f64'],
    ['convert', 'a', 'b', '--dtype'],
    ['convert', 'a', 'b', '--dtype', 'bf16', '--order', 'x'],
    ['convert', 'a', '--dtype', 'bf16'],
  ]) {
    const r = run(args);
    assert.equal(r.status, 2, args.join(' '));
    assert.match(r.stderr, /^error: [^\n]*\nrun `peft-bridge( [a-z-]+)? --help` for usage\n$/, args.join(' '));
    assert.equal(r.stdout, '');
  }
  for (const args of [
    ['--help'],
    ['-h'],
    ['help'],
    ['inspect', '--help'],
    ['convert', '--help'],
    ['convert', 'x', '-h'],
  ]) {
    const r = run(args);
    assert.equal(r.status, 0, args.join(' '));
    assert.match(r.stdout, /^usage: peft-bridge/);
  }
  const missing = run(['inspect', '/nonexistent/x.safetensors']);
  assert.equal(missing.status, 1);
  assert.equal(missing.stderr, 'error: IoError: cannot open `/nonexistent/x.safetensors`: No such file or directory\n');
  if (skipWithoutFixtures(t)) return;
  const bad = run(['inspect', fixturePath(ABUSE), '--json']);
  assert.equal(bad.status, 1);
  assert.equal(bad.stderr, '');
  const json = JSON.parse(bad.stdout);
  assert.equal(json.ok, false);
  assert.equal(json.error.code, 'InvalidHeaderLength');
  assert.equal(json.error.offset, 0);
  assert.equal(json.error.tensor, null);
  const text = run(['inspect', fixturePath(ABUSE)]);
  assert.equal(text.status, 1);
  assert.match(text.stderr, /^error: InvalidHeaderLength: /);
  assert.equal(text.stdout, '');
  const good = run(['inspect', fixturePath(GOOD), '--json']);
  assert.equal(good.status, 0);
  assert.equal(JSON.parse(good.stdout).ok, true);
});

test('convert writes atomically and never touches IN', (t) => {
  if (skipWithoutFixtures(t)) return;
  const dir = mkdtempSync(join(tmpdir(), 'pb-cli-'));
  try {
    const input = join(dir, 'in.safetensors');
    copyFileSync(fixturePath(GOOD), input);
    const before = readFileSync(input);
    const out = join(dir, 'out.safetensors');
    const r = run(['convert', input, out, '--dtype', 'bf16', '--json']);
    assert.equal(r.status, 0, r.stderr);
    const summary = JSON.parse(r.stdout);
    assert.equal(summary.ok, true);
    assert.equal(summary.outputSize, readFileSync(out).length);
    assert.ok(readFileSync(input).equals(before));
    assert.deepEqual(readdirSync(dir).sort(), ['in.safetensors', 'out.safetensors']);

    // A failing conversion leaves an existing OUT as it was and no temporary file behind.
    const abuse = join(dir, 'abuse.safetensors');
    copyFileSync(fixturePath(ABUSE), abuse);
    const outBefore = readFileSync(out);
    const bad = run(['convert', abuse, out, '--dtype', 'f16']);
    assert.equal(bad.status, 1);
    assert.ok(readFileSync(out).equals(outBefore));
    // A file whose header is fine but whose data is cut short fails after the temporary file was created.
    const truncated = join(dir, 'truncated.safetensors');
    writeFileSync(truncated, before.subarray(0, before.length - 10));
    const cut = run(['convert', truncated, join(dir, 'never.safetensors'), '--dtype', 'f16', '--json']);
    assert.equal(cut.status, 1);
    assert.equal(JSON.parse(cut.stdout).error.code, 'MetadataIncompleteBuffer');
    assert.deepEqual(readdirSync(dir).sort(), [
      'abuse.safetensors',
      'in.safetensors',
      'out.safetensors',
      'truncated.safetensors',
    ]);

    // OUT naming IN (directly or through a link) is refused by the output policy: exit 1, as every aliased output.
    assert.equal(run(['convert', input, input, '--dtype', 'f16']).status, 1);
    symlinkSync(input, join(dir, 'link.safetensors'));
    assert.equal(run(['convert', input, join(dir, 'link.safetensors'), '--dtype', 'f16']).status, 1);
    assert.ok(readFileSync(input).equals(before));

    // An output directory that does not exist is an I/O error.
    const nodir = run(['convert', input, join(dir, 'missing', 'out.safetensors'), '--dtype', 'f16', '--json']);
    assert.equal(nodir.status, 1);
    assert.equal(JSON.parse(nodir.stdout).error.code, 'IoError');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('both CLIs print the same bytes and exit with the same status', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const dir = mkdtempSync(join(tmpdir(), 'pb-cli-parity-'));
  try {
    const cases = [
      [],
      ['--help'],
      ['-h'],
      ['help'],
      ['--version'],
      ['bogus'],
      ['inspect'],
      ['inspect', '--help'],
      ['inspect', '--bogus'],
      ['inspect', 'a', 'b'],
      ['inspect', '/nonexistent'],
      ['inspect', '/nonexistent', '--json'],
      ['inspect', dir],
      ['inspect', dir, '--json'],
      ['convert'],
      ['convert', '--help'],
      ['convert', 'a', 'b'],
      ['convert', 'a', 'b', '--dtype'],
      ['convert', 'a', 'b', '--dtype', 'fp8'],
      ['convert', 'a', 'b', '--dtype', 'bf16', '--order', 'sorted'],
      ['convert', 'a', 'b', '--zzz'],
      ['convert', '/nonexistent', 'b', '--dtype', 'bf16'],
      ['convert', '/nonexistent', 'b', '--dtype', 'bf16', '--json'],
    ];
    const short = join(dir, 'short.safetensors');
    writeFileSync(short, new Uint8Array([1, 2, 3]));
    cases.push(
      ['inspect', short],
      ['inspect', short, '--json'],
      ['convert', short, join(dir, 'x'), '--dtype', 'f16', '--json'],
    );
    if (hasFixtures) {
      for (const name of fixtureNames()) {
        cases.push(['inspect', fixturePath(name)], ['inspect', fixturePath(name), '--json']);
      }
      cases.push(['convert', fixturePath(ABUSE), join(dir, 'o'), '--dtype', 'bf16']);
      cases.push(['convert', fixturePath(ABUSE), join(dir, 'o'), '--dtype', 'bf16', '--json']);
      cases.push(['convert', fixturePath(GOOD), fixturePath(GOOD), '--dtype', 'bf16']);
      cases.push(['convert', fixturePath(GOOD), join(dir, 'missing', 'o'), '--dtype', 'bf16', '--json']);
    }
    for (const args of cases) {
      assert.deepEqual(run(args, dir), runNative(args, dir), args.join(' '));
    }
    if (skipWithoutFixtures(t)) return;
    for (const name of [
      GOOD,
      'peft-roberta-seqcls-query-value/adapter_model.safetensors',
      'candle-i64/jfk-codes.safetensors',
    ]) {
      for (const extra of [[], ['--json'], ['--order', 'input']]) {
        const a = join(dir, 'a.safetensors');
        const b = join(dir, 'b.safetensors');
        const js = run(['convert', fixturePath(name), a, '--dtype', 'f16', ...extra]);
        const native = runNative(['convert', fixturePath(name), b, '--dtype', 'f16', ...extra]);
        assert.deepEqual(js, native, `${name} ${extra}`);
        assert.ok(readFileSync(a).equals(readFileSync(b)), name);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('fixtures directory is where the brief says', () => {
  assert.equal(existsSync(fixturesDir), hasFixtures);
  if (hasFixtures) assert.ok(readFixture(GOOD).length > 0);
});

/** A valid file: F32 `w` of `count` elements whose data is a sparse hole (`count` may make it gigabytes). */
function sparseF32(path, count) {
  const text = JSON.stringify({ w: { dtype: 'F32', shape: [count], data_offsets: [0, 4 * count] } });
  const header = new TextEncoder().encode(text);
  const prefix = new Uint8Array(8);
  new DataView(prefix.buffer).setBigUint64(0, BigInt(header.length), true);
  writeFileSync(path, Buffer.concat([prefix, header]));
  truncateSync(path, 8 + header.length + 4 * count);
}

test('a FIFO or a directory as input fails at once: `PATH` is not a regular file, or is a directory', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pb-cli-'));
  try {
    const fifo = join(dir, 'fifo');
    const made = spawnSync('mkfifo', [fifo]);
    const paths = [dir];
    if (made.status === 0) paths.push(fifo);
    else t.diagnostic('mkfifo unavailable: only the directory case runs');
    for (const path of paths) {
      // A directory is read as a model's folder (src/cli/local_model.cc): this one has none.
      const what =
        path === dir ? 'has neither model.safetensors nor model.safetensors.index.json' : 'is not a regular file';
      const text = run(['inspect', path]);
      assert.equal(text.status, 1, path);
      assert.equal(text.stdout, '');
      assert.equal(text.stderr, `error: IoError: \`${path}\` ${what}\n`);
      const json = run(['inspect', '--json', path]);
      assert.equal(json.status, 1);
      assert.equal(json.stderr, '');
      assert.deepEqual(JSON.parse(json.stdout), {
        ok: false,
        error: { code: 'IoError', message: `\`${path}\` ${what}`, tensor: null, offset: null },
      });
      const conv = run(['convert', path, join(dir, 'out'), '--dtype', 'bf16']);
      assert.equal(conv.status, 1);
      assert.equal(conv.stderr, `error: IoError: \`${path}\` ${what}\n`);
    }
    assert.deepEqual(readdirSync(dir).sort(), made.status === 0 ? ['fifo'] : []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a failed write to standard output exits 1 with an IoError line, not a crash', (t) => {
  if (!existsSync('/dev/full')) return t.skip('no /dev/full');
  const dir = mkdtempSync(join(tmpdir(), 'pb-cli-'));
  const full = openSync('/dev/full', 'w');
  try {
    const file = join(dir, 'small.safetensors');
    sparseF32(file, 4);
    const expected = 'error: IoError: cannot write to standard output: No space left on device\n';
    for (const args of [
      ['--version'],
      ['--help'],
      ['inspect', file],
      ['inspect', '--json', file],
      ['inspect', '--json', join(dir, 'missing')],
      ['convert', file, join(dir, 'out.safetensors'), '--dtype', 'bf16'],
    ]) {
      const r = run(args, undefined, { stdio: ['ignore', full, 'pipe'] });
      assert.equal(r.status, 1, args.join(' '));
      assert.equal(r.stderr, expected, args.join(' '));
    }
  } finally {
    closeSync(full);
    rmSync(dir, { recursive: true, force: true });
  }
});

for (const [signal, status] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
]) {
  test(`${signal} during convert removes the temporary file and exits ${status}`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'pb-cli-'));
    try {
      const input = join(dir, 'in.safetensors');
      sparseF32(input, 2 ** 30); // 4 GiB of F32 data, all hole: seconds of work, no disk
      const child = spawn(
        process.execPath,
        [cliPath, 'convert', input, join(dir, 'out.safetensors'), '--dtype', 'bf16'],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      const exited = new Promise((resolve) => child.on('exit', (code, sig) => resolve({ code, sig })));
      let finished = null;
      exited.then((r) => (finished = r));
      // Wait for the temporary file to appear (conversion under way), then signal.
      const deadline = Date.now() + 15000;
      while (
        !finished &&
        Date.now() < deadline &&
        !readdirSync(dir).some((n) => n.startsWith('out.safetensors.tmp-'))
      ) {
        await new Promise((r) => setTimeout(r, 20));
      }
      await new Promise((r) => setTimeout(r, 200));
      if (finished) {
        t.skip('the conversion finished before the signal could be sent');
        return;
      }
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 15000);
      const r = await exited;
      clearTimeout(timer);
      assert.deepEqual(r, { code: status, sig: null }, stderr);
      assert.deepEqual(readdirSync(dir), ['in.safetensors'], 'no temporary file and no OUT left');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
