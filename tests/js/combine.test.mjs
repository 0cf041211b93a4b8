// combine in both CLIs (the native one and the npm one over WASM) and combineAdapters: the same bytes, statuses
// and files for every method, on adapters of the golden corpus (PEFT-written: an f32 r=8, an rsLoRA bf16 r=16,
// one with rank and alpha patterns). PEFT itself judges the numbers in tests/golden/check_combine.py.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, hasNativeCli, nativeCli, repoRoot, webDir } from './helpers/common.mjs';

const pb = await import(join(webDir, 'src', 'node.js')); // paths are adapter folders in Node

const corpus = join(repoRoot, 'tests', 'golden', 'corpus');
const A = join(corpus, 'llama_lora_f32', 'adapter');
const RS = join(corpus, 'llama_rslora', 'adapter');
const PAT = join(corpus, 'llama_patterns', 'adapter');
const DORA = join(corpus, 'llama_dora', 'adapter');

const run = (command, args) => {
  const r = spawnSync(command, args, { encoding: 'buffer', timeout: 120000 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout.toString('latin1'), stderr: r.stderr.toString('latin1') };
};
const clis = [['npm', (args) => run(process.execPath, [cliPath, ...args])]];
if (hasNativeCli) clis.push(['native', (args) => run(nativeCli, args)]);
const filesOf = (dir) =>
  Object.fromEntries(
    readdirSync(dir)
      .sort()
      .map((n) => [n, readFileSync(join(dir, n)).toString('hex')]),
  );

function work(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-combine-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Runs `args(outDir)` in both CLIs; asserts the same status, stdout, stderr and files; returns npm's result and files. */
function both(t, args) {
  const dir = work(t);
  const results = clis.map(([name, cli]) => {
    const out = join(dir, name);
    const r = cli(args(out));
    let files = null;
    try {
      files = filesOf(out);
    } catch {
      files = null;
    }
    return [name, r, files];
  });
  for (const [name, r, files] of results.slice(1)) {
    assert.deepEqual(r, results[0][1], `${name} prints what ${results[0][0]} prints`);
    assert.deepEqual(files, results[0][2], `${name} writes what ${results[0][0]} writes`);
  }
  return { ...results[0][1], files: results[0][2] };
}

test('cat by default: exact, the same plan, outcome and files in both CLIs', (t) => {
  const r = both(t, (out) => ['combine', A, RS, PAT, '--weights', '0.7,-1,2', '-o', out]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^combine 3 adapter\(s\) with cat: 10 module\(s\), rank 30, F32\n/);
  // Weights as given: 0.7, not 0.69999999999999996 (the shortest text that reads back as the same double).
  assert.match(r.stdout, /adapter \S+0\.7\n.*adapter \S+-1\n.*adapter \S+2\n/s); // "×" read as latin1 here
  assert.match(r.stdout, /model\.layers\.0\.self_attn\.q_proj: 3 adapter\(s\), rank 8\+16\+4 -> 30\n/);
  assert.match(
    r.stdout,
    /largest relative error [0-9.e-]+ \(.*\)\nwrote: adapter_model\.safetensors, adapter_config\.json\n$/,
  );
  const worst = Number(/largest relative error ([0-9.e-]+)/.exec(r.stdout)[1]);
  assert.ok(worst < 1e-6, `cat is exact to float32 rounding (${worst})`);
  const config = JSON.parse(Buffer.from(r.files['adapter_config.json'], 'hex').toString());
  assert.equal(config.r, 30);
  assert.equal(config.lora_alpha, 30);
  assert.equal(config.use_rslora, false);
  const json = both(t, (out) => ['combine', A, RS, PAT, '--weights', '0.5,-1,2', '-o', out, '--json']);
  const j = JSON.parse(json.stdout);
  assert.equal(j.method, 'cat');
  assert.equal(j.modules.length, 10);
  assert.ok(j.modules.every((m) => m.relativeError < 1e-6 && m.keptEnergy === null));
  assert.deepEqual(
    j.inputs.map((i) => i.weight),
    [0.5, -1, 2],
  );
});

test('every method: the same bytes natively and in WASM', (t) => {
  const runs = [
    ['--method', 'linear'],
    ['--method', 'linear', '--peft-compat'],
    ['--method', 'svd', '--rank', '6'],
    ['--method', 'svd', '--svd-clamp', '0.9'],
    ['--method', 'ties', '--density', '0.5'],
    ['--method', 'ties', '--density', '0.5', '--majority-sign', 'frequency', '--peft-compat'],
    ['--method', 'dare_linear', '--density', '0.4', '--seed', '3'],
    ['--method', 'dare_ties', '--density', '0.6', '--seed', '9'],
    ['--method', 'magnitude_prune', '--density', '0.3'],
    ['--method', 'ties_svd', '--density', '0.5', '--rank', '4'],
    ['--method', 'dare_linear_svd', '--density', '0.5', '--seed', '1'],
    ['--method', 'dare_ties_svd', '--density', '0.5'],
    ['--method', 'magnitude_prune_svd', '--density', '0.7', '--rank', '3'],
    ['--method', 'cat', '--dtype', 'bf16'],
  ];
  for (const extra of runs) {
    // The elementwise methods need one rank: the f32 adapter with itself at two weights.
    const inputs = extra[1].startsWith('svd') || extra[1].endsWith('_svd') || extra[1] === 'cat' ? [A, RS] : [A, A];
    const r = both(t, (out) => ['combine', ...inputs, '--weights', '0.8,-0.3', '-o', out, '-q', ...extra]);
    assert.equal(r.status, 0, `${extra.join(' ')}: ${r.stderr}`);
    assert.ok(r.files['adapter_model.safetensors'], extra.join(' '));
  }
  // The svd methods report the energy they kept.
  const svd = JSON.parse(
    both(t, (out) => ['combine', A, RS, '--method', 'svd', '--rank', '4', '-o', out, '--json']).stdout,
  );
  assert.ok(
    svd.modules.every((m) => m.keptEnergy > 0 && m.keptEnergy <= 1),
    JSON.stringify(svd.modules[0]),
  );
  assert.ok(
    svd.modules.some((m) => m.relativeError > 1e-3),
    'rank 4 of a rank-24 sum is approximate',
  );
});

test('refusals and usage errors: precise, the same in both CLIs, nothing written', (t) => {
  const dora = both(t, (out) => ['combine', A, DORA, '-o', out]);
  assert.equal(dora.status, 1);
  assert.match(
    dora.stderr,
    /^error: UnsupportedAdapter: cannot combine:\n  `.*llama_dora\/adapter`: DoRA magnitudes .*: model\.layers\.0/,
  );
  assert.equal(dora.files, null);
  const ranks = both(t, (out) => ['combine', A, RS, '--method', 'ties', '--density', '0.5', '-o', out]);
  assert.equal(ranks.status, 1);
  assert.match(ranks.stderr, /same rank/);
  const count = both(t, (out) => ['combine', A, RS, '--weights', '1,2,3', '-o', out]);
  assert.equal(count.status, 1);
  assert.equal(count.stderr, 'error: InvalidArgument: 3 weight(s) for 2 adapter(s): give one weight per adapter\n');
  const density = both(t, (out) => ['combine', A, A, '--method', 'ties', '-o', out]);
  assert.equal(density.stderr, 'error: InvalidArgument: ties needs --density (the fraction kept, in [0, 1])\n');
  const usage = both(t, (out) => ['combine', A, A, '--weights', '1,x', '-o', out]);
  assert.equal(usage.status, 2);
  assert.equal(
    usage.stderr,
    'error: --weights: `x` is not a number (W1,W2,... one per adapter)\nrun `peft-bridge combine --help` for usage\n',
  );
  const dry = both(t, (out) => ['combine', A, RS, '--dry-run']);
  assert.equal(dry.status, 0);
  assert.match(
    dry.stdout,
    /^would combine 2 adapter\(s\) with cat: .*\n[\s\S]*would write: adapter_model\.safetensors, adapter_config\.json\n$/,
  );
});

test('combineAdapters: the files the CLI writes, the CLI --json summary', async (t) => {
  const r = both(t, (out) => [
    'combine',
    A,
    RS,
    '--weights',
    '1,0.25',
    '--method',
    'svd',
    '--rank',
    '5',
    '-o',
    out,
    '--json',
  ]);
  const api = await pb.combineAdapters([A, RS], { weights: [1, 0.25], method: 'svd', rank: 5 });
  const byName = Object.fromEntries(api.files.map((f) => [f.name, Buffer.from(f.bytes).toString('hex')]));
  assert.deepEqual(byName, r.files);
  const cli = JSON.parse(r.stdout);
  assert.deepEqual(api.modules, cli.modules);
  assert.equal(api.rank, 5);
  const planned = await pb.combineAdapters([A, RS], { dryRun: true });
  assert.deepEqual(planned.files, []);
  assert.equal(planned.modules[0].relativeError, null);
  await assert.rejects(
    pb.combineAdapters([A, A], { method: 'ties' }),
    (e) => e.code === 'InvalidArgument' && /density/.test(e.message),
  );
  await assert.rejects(
    pb.combineAdapters([A, A], { weights: ['x'] }),
    (e) => e.code === 'InvalidArgument' && /weights/.test(e.message),
  );
});
