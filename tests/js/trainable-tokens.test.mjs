// PEFT's trainable tokens (trainable_token_indices) in both CLIs, on the golden corpus's llama_trainable_tokens
// adapter (written by PEFT itself): adapter-info says which rows of which module the tensor replaces, the
// formats that cannot hold them refuse the tensor by name, and the merge plan replaces those rows. Both CLIs
// must print the same bytes. (The merged tensors against PEFT's: golden.test.mjs and golden_merge_test.cc.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, nativeCli, repoRoot, skipWithoutNativeCli } from './helpers/common.mjs';

const caseDir = join(repoRoot, 'tests', 'golden', 'corpus', 'llama_trainable_tokens');
const KEY = 'model.embed_tokens.token_adapter.trainable_tokens_delta';

/** Runs both CLIs on `args` (each `{out}` becomes a folder of its own per CLI); asserts the same status and output. */
function both(t, args, dir = '') {
  if (skipWithoutNativeCli(t)) return null;
  const run = (cmd, argv) => {
    const r = spawnSync(cmd, argv, { encoding: 'utf8', timeout: 60000 });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  const spell = (who) => args.map((a) => a.replace('{out}', join(dir, who)));
  const js = run(process.execPath, [cliPath, ...spell('out')]);
  const native = run(nativeCli, spell('native'));
  native.stdout = native.stdout.replaceAll(join(dir, 'native'), join(dir, 'out'));
  native.stderr = native.stderr.replaceAll(join(dir, 'native'), join(dir, 'out'));
  assert.deepEqual(js, native, 'the npm CLI and the native CLI differ');
  return js;
}

function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-tokens-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('adapter-info lists the trainable-token rows and the module they replace, in both CLIs', (t) => {
  const text = both(t, ['adapter-info', join(caseDir, 'adapter')]);
  if (!text) return;
  assert.equal(text.status, 0, text.stderr);
  assert.match(
    text.stdout,
    new RegExp(
      `${KEY.replaceAll('.', '\\.')}  trainable_tokens F32 \\[3, 32\\] replaces rows 3, 7, 42 of model\\.embed_tokens`,
    ),
  );
  const json = both(t, ['adapter-info', join(caseDir, 'adapter'), '--json']);
  const info = JSON.parse(json.stdout);
  assert.deepEqual(info.extras, [
    {
      key: KEY,
      kind: 'trainable_tokens',
      dtype: 'F32',
      shape: [3, 32],
      module: 'model.embed_tokens',
      tokenIndices: [3, 7, 42],
    },
  ]);
});

for (const format of ['mlx', 'kohya', 'gguf-names']) {
  test(`translate --to ${format} refuses the trainable-token tensor by name, in both CLIs`, (t) => {
    const dir = tempDir(t);
    const r = both(
      t,
      [
        'translate',
        join(caseDir, 'adapter'),
        '{out}',
        '--to',
        format,
        '--base-config',
        join(caseDir, 'base', 'config.json'),
      ],
      dir,
    );
    if (!r) return;
    assert.notEqual(r.status, 0);
    assert.match(
      r.stderr + r.stdout,
      new RegExp(
        `${KEY.replaceAll('.', '\\.')}.*a trainable_tokens tensor \\(3 replaced rows of \`model\\.embed_tokens\`\\)`,
      ),
    );
  });
}

test('translate --to peft keeps the rows and trainable_token_indices, in both CLIs', (t) => {
  const dir = tempDir(t);
  const r = both(t, ['translate', join(caseDir, 'adapter'), '{out}', '--to', 'peft', '-q'], dir);
  if (!r) return;
  assert.equal(r.status, 0, r.stderr);
  const info = JSON.parse(both(t, ['adapter-info', join(dir, 'out'), '--json']).stdout);
  assert.deepEqual(
    info.extras.map((e) => e.tokenIndices),
    [[3, 7, 42]],
  );
});

test('merge --dry-run plans the row replacement and unmerge refuses it, in both CLIs', (t) => {
  const dir = tempDir(t);
  const plan = both(
    t,
    ['merge', '--base', join(caseDir, 'base'), '--adapter', join(caseDir, 'adapter'), '--out', '{out}', '--dry-run'],
    dir,
  );
  if (!plan) return;
  assert.equal(plan.status, 0, plan.stderr);
  assert.match(plan.stdout, /`model\.embed_tokens\.weight`: rows 3, 7, 42 replaced by the adapter's trainable tokens/);
  const un = both(
    t,
    ['unmerge', '--base', join(caseDir, 'peft_merged'), '--adapter', join(caseDir, 'adapter'), '--out', '{out}'],
    dir,
  );
  assert.notEqual(un.status, 0);
  assert.match(un.stderr, /trainable-token rows replaced the base's rows.*cannot be unmerged/);
});
