// Naming tables supplied at run time (docs/naming-tables.md): `--naming-table FILE` in both CLIs (identical bytes and
// exit codes) and `namingTables` in the JS API add a model family without recompiling; malformed or unreadable tables
// fail precisely, before any input is read.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, hasNativeCli, nativeCli, rejectsWith, webDir, writePeftAdapterDir } from './helpers/common.mjs';

const pb = await import(join(webDir, 'src', 'node.js'));

const run = (argv0, args) => {
  const r = spawnSync(argv0[0], [...argv0.slice(1), ...args], { encoding: 'buffer', timeout: 60000 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout.toString('latin1'), stderr: r.stderr.toString('latin1') };
};
const npmCli = [process.execPath, cliPath];

/** Both CLIs on the same arguments: identical status, stdout and stderr; returns the result. `args` may be a
 * function of a tag ('npm' / 'native') where each CLI needs its own output directory. */
function both(t, args) {
  const argsFor = typeof args === 'function' ? args : () => args;
  const js = run(npmCli, argsFor('npm'));
  if (!hasNativeCli) {
    t.diagnostic('native CLI not built: npm CLI only');
    return js;
  }
  const native = run([nativeCli], argsFor('native'));
  assert.deepEqual(js, native, `npm and native CLIs differ on ${argsFor('npm').join(' ')}`);
  return js;
}

// A family no built-in table knows: blocks.N.attn.{wq,wk} under "model.", with llama.cpp names.
const TOY_TABLE = {
  model_types: ['toymodel'],
  architectures: ['ToyForCausalLM'],
  gguf_arch: 'toy',
  body_prefixes: ['model.'],
  modules: [
    { hf: 'blocks.{N}.attn.wq', canonical: 'layers/{N}/attention/query', gguf: 'blk.{N}.attn_q', kind: 'linear' },
    { hf: 'blocks.{N}.attn.wk', canonical: 'layers/{N}/attention/key', gguf: 'blk.{N}.attn_k', kind: 'linear' },
  ],
};

function setUp(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-naming-table-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const adapter = writePeftAdapterDir(
    join(dir, 'adapter'),
    ['model.blocks.0.attn.wq', 'model.blocks.1.attn.wk'],
    ['wq', 'wk'],
  );
  const table = join(dir, 'toymodel.json');
  writeFileSync(table, JSON.stringify(TOY_TABLE));
  return { dir, adapter, table };
}

test('--naming-table adds a family: translate --to gguf-names uses it, identically in both CLIs', (t) => {
  const { dir, adapter, table } = setUp(t);
  const without = both(t, (cli) => [
    'translate',
    adapter,
    join(dir, `out0-${cli}`),
    '--to',
    'gguf-names',
    '--arch',
    'toymodel',
  ]);
  assert.equal(without.status, 1);
  assert.match(without.stderr, /toymodel/);
  const r = both(t, (cli) => [
    'translate',
    adapter,
    join(dir, `out-${cli}`),
    '--to',
    'gguf-names',
    '--arch',
    'toymodel',
    '--naming-table',
    table,
  ]);
  assert.equal(r.status, 0, r.stderr);
  const bytes = readFileSync(join(dir, 'out-npm', 'adapter_model.safetensors'));
  assert.deepEqual(
    bytes,
    readFileSync(join(dir, hasNativeCli ? 'out-native' : 'out-npm', 'adapter_model.safetensors')),
  );
  const header = JSON.parse(bytes.subarray(8, 8 + Number(bytes.readBigUInt64LE(0))).toString());
  assert.ok(Object.hasOwn(header, 'blk.0.attn_q.weight.lora_a'), Object.keys(header).join(', '));
  assert.ok(Object.hasOwn(header, 'blk.1.attn_k.weight.lora_b'), Object.keys(header).join(', '));
  // adapter-info and merge take the option too (merge: the plan names the table's family).
  const info = both(t, ['adapter-info', adapter, '--arch', 'toymodel', '--naming-table', table, '--json']);
  assert.equal(info.status, 0, info.stderr);
});

test('a malformed or unreadable --naming-table fails first, naming the file, identically in both CLIs', (t) => {
  const { dir, adapter } = setUp(t);
  const bad = join(dir, 'bad.json');
  writeFileSync(bad, JSON.stringify({ ...TOY_TABLE, modules: 'not a list' }));
  for (const args of [
    ['adapter-info', adapter, '--naming-table', bad, '--json'],
    ['translate', adapter, join(dir, 'o'), '--to', 'kohya', '--naming-table', bad],
    ['merge', '--base', join(dir, 'no-such-base'), '--adapter', adapter, '-o', join(dir, 'm'), '--naming-table', bad],
  ]) {
    const r = both(t, args);
    assert.equal(r.status, 1, args.join(' '));
    assert.match(r.stdout + r.stderr, /InvalidConfig/);
    assert.ok((r.stdout + r.stderr).includes(bad), r.stdout + r.stderr);
  }
  const missing = both(t, ['adapter-info', adapter, '--naming-table', join(dir, 'missing.json')]);
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /missing\.json/);
});

test('JS API: namingTables takes {path, text}, a JSON text or a table object; a bad one is InvalidConfig', async (t) => {
  const { adapter, table } = setUp(t);
  for (const entry of [{ path: table, text: readFileSync(table, 'utf8') }, JSON.stringify(TOY_TABLE), TOY_TABLE]) {
    const r = await pb.translateAdapter(adapter, { to: 'gguf-names', arch: 'toymodel', namingTables: [entry] });
    const names = r.plan.map((x) => x.to);
    assert.ok(names.includes('blk.0.attn_q.weight.lora_a'), names.join(', '));
  }
  await rejectsWith(
    pb.translateAdapter(adapter, { to: 'gguf-names', arch: 'toymodel', namingTables: [{ ...TOY_TABLE, modules: 3 }] }),
    'InvalidConfig',
    /namingTables\[0\]/,
  );
  await assert.rejects(pb.adapterInfo(adapter, { namingTables: 'toymodel.json' }), TypeError);
});
