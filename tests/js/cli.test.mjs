// web/bin/peft-bridge.mjs: exit statuses, JSON errors, atomic writes, and byte-identical output with the
// native CLI (build/native/peft-bridge) when it is built.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, fixtureNames, fixturePath, fixturesDir, hasFixtures, hasNativeCli, nativeCli, readFixture, skipWithoutFixtures } from './helpers/common.mjs';

const run = (args, cwd) => {
  const r = spawnSync(process.execPath, [cliPath, ...args], { cwd, encoding: 'buffer' });
  return { status: r.status, stdout: r.stdout.toString('latin1'), stderr: r.stderr.toString('latin1') };
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
  for (const args of [[], ['bogus'], ['inspect'], ['inspect', 'a', 'b'], ['inspect', '--bogus', 'a'], ['convert', 'a', 'b'],
    ['convert', 'a', 'b', '--dtype', 'f64'], ['convert', 'a', 'b', '--dtype'], ['convert', 'a', 'b', '--dtype', 'bf16', '--order', 'x'],
    ['convert', 'a', '--dtype', 'bf16']]) {
    const r = run(args);
    assert.equal(r.status, 2, args.join(' '));
    assert.match(r.stderr, /^error: .*\n\nusage: peft-bridge/, args.join(' '));
    assert.equal(r.stdout, '');
  }
  for (const args of [['--help'], ['-h'], ['help'], ['inspect', '--help'], ['convert', '--help'], ['convert', 'x', '-h']]) {
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
    assert.deepEqual(readdirSync(dir).sort(), ['abuse.safetensors', 'in.safetensors', 'out.safetensors', 'truncated.safetensors']);

    // OUT naming IN (directly or through a link) is a usage error.
    assert.equal(run(['convert', input, input, '--dtype', 'f16']).status, 2);
    symlinkSync(input, join(dir, 'link.safetensors'));
    assert.equal(run(['convert', input, join(dir, 'link.safetensors'), '--dtype', 'f16']).status, 2);
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
  if (!hasNativeCli) return t.skip('build/native/peft-bridge not built');
  const dir = mkdtempSync(join(tmpdir(), 'pb-cli-parity-'));
  try {
    const cases = [
      [], ['--help'], ['-h'], ['help'], ['--version'], ['bogus'],
      ['inspect'], ['inspect', '--help'], ['inspect', '--bogus'], ['inspect', 'a', 'b'], ['inspect', '/nonexistent'],
      ['inspect', '/nonexistent', '--json'], ['inspect', dir], ['inspect', dir, '--json'],
      ['convert'], ['convert', '--help'], ['convert', 'a', 'b'], ['convert', 'a', 'b', '--dtype'],
      ['convert', 'a', 'b', '--dtype', 'fp8'], ['convert', 'a', 'b', '--dtype', 'bf16', '--order', 'sorted'],
      ['convert', 'a', 'b', '--zzz'], ['convert', '/nonexistent', 'b', '--dtype', 'bf16'],
      ['convert', '/nonexistent', 'b', '--dtype', 'bf16', '--json'],
    ];
    const short = join(dir, 'short.safetensors');
    writeFileSync(short, new Uint8Array([1, 2, 3]));
    cases.push(['inspect', short], ['inspect', short, '--json'], ['convert', short, join(dir, 'x'), '--dtype', 'f16', '--json']);
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
    if (!hasFixtures) return;
    for (const name of [GOOD, 'peft-roberta-seqcls-query-value/adapter_model.safetensors', 'candle-i64/jfk-codes.safetensors']) {
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
