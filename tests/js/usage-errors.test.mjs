// Usage errors in both CLIs: a mistyped or PEFT-spelled option gets a "did you mean", and under --json the error
// is a JSON document on stdout (a script reading stdout as JSON gets one), exit status 2 either way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cliPath, hasNativeCli, nativeCli, skipWithoutNativeCli } from './helpers/common.mjs';

const run = (command, args) => {
  const r = spawnSync(command, args, { encoding: 'utf8', timeout: 60000 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
};
const clis = [['npm', (args) => run(process.execPath, [cliPath, ...args])]];
if (hasNativeCli) clis.push(['native', (args) => run(nativeCli, args)]);

function both(t, args) {
  skipWithoutNativeCli(t);
  const results = clis.map(([name, cli]) => [name, cli(args)]);
  for (const [name, r] of results.slice(1)) assert.deepEqual(r, results[0][1], `${name} prints what npm prints`);
  return results[0][1];
}

test('an unknown option names the one meant: PEFT spellings and near misses', (t) => {
  const cases = [
    [
      ['create', '--base', 'b', '-o', 'o', '--target-modules', 'q_proj', '--lora-alpha', '16'],
      '--lora-alpha',
      '--alpha',
    ],
    [['create', '--base', 'b', '-o', 'o', '--target_modules', 'q_proj'], '--target_modules', '--target-modules'],
    [['merge', '--base', 'b', '--adapter', 'a', '-o', 'o', '--dtpye', 'bf16'], '--dtpye', '--dtype'],
    [['merge', '--base', 'b', '--adapter', 'a', '--ouput', 'o'], '--ouput', '--out'],
  ];
  for (const [args, given, meant] of cases) {
    const r = both(t, args);
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.match(
      r.stderr,
      new RegExp(
        `^error: unknown option \`${given}\` \\(did you mean \`${meant}\`\\?\\)\\nrun \`peft-bridge ${args[0]} --help\` for usage\\n$`,
      ),
    );
  }
  const far = both(t, ['merge', '--base', 'b', '--adapter', 'a', '-o', 'o', '--completely-different']);
  assert.equal(
    far.stderr,
    'error: unknown option `--completely-different`\nrun `peft-bridge merge --help` for usage\n',
  );
});

test('under --json a usage error is a JSON document on stdout, status 2', (t) => {
  const r = both(t, ['adapter-info', '--json', '--strcit', 'x']);
  assert.equal(r.status, 2);
  assert.equal(r.stderr, '');
  const doc = JSON.parse(r.stdout);
  assert.equal(doc.ok, false);
  assert.equal(doc.error.code, 'InvalidArgument');
  assert.equal(doc.error.message, 'unknown option `--strcit` (did you mean `--strict`?)');
  assert.equal(doc.usage, 'run `peft-bridge adapter-info --help` for usage');
  // After `--`, --json is an argument, not the flag.
  const plain = both(t, ['adapter-info', '--strcit', '--', '--json']);
  assert.equal(plain.stdout, '');
  assert.match(plain.stderr, /^error: unknown option `--strcit`/);
});
