// LoRA adapters: the JS API (adapterInfo, translateAdapter) and the npm CLI's adapter-info / translate, which must
// print the same bytes, exit with the same statuses and write the same files as the native CLI.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  cliPath,
  countingIterable,
  countingStream,
  fixturePath,
  hasNativeCli,
  nativeCli,
  pb,
  peftAdapterBytes,
  randomCuts,
  repoRoot,
  rng,
  skipWithoutFixtures,
  skipWithoutNativeCli,
  split,
} from './helpers/common.mjs';

const { adapterInfo, translateAdapter, SafetensorsError } = pb;

const ADAPTERS = [
  'peft-gpt2-seqcls-cattn-cproj',
  'peft-roberta-seqcls-query-value',
  'mlx-lm-qwen2.5-0.5b',
  'mlx-examples-pr685-minicpm',
];
const TARGETS = ['mlx', 'kohya', 'gguf-names', 'peft'];
const GPT2 = 'peft-gpt2-seqcls-cattn-cproj';

const runJs = (args, cwd) => {
  const r = spawnSync(process.execPath, [cliPath, ...args], { cwd, encoding: 'buffer', timeout: 30000 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout.toString('latin1'), stderr: r.stderr.toString('latin1') };
};
const runNative = (args, cwd) => {
  const r = spawnSync(nativeCli, args, { cwd, encoding: 'buffer' });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout.toString('latin1'), stderr: r.stderr.toString('latin1') };
};

/** Skips without the native CLI or the fixtures; returns true if it did. */
function skipWithoutBoth(t) {
  return skipWithoutNativeCli(t) || skipWithoutFixtures(t);
}

function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-adapter-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Every file under `dir` (relative name -> bytes). */
function readTree(dir) {
  const files = {};
  for (const name of readdirSync(dir).sort()) files[name] = readFileSync(join(dir, name));
  return files;
}

const LLAMA_CONFIG = { peft_type: 'LORA', r: 2, lora_alpha: 4, target_modules: ['q_proj', 'v_proj'] };
const Q = 'model.layers.0.self_attn.q_proj';
const V = 'model.layers.1.self_attn.v_proj';

/** A small PEFT adapter directory: modules with rank-2 A/B factors (4x4 layers) and the given config. */
function writePeftAdapter(dir, modules, config = LLAMA_CONFIG) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'adapter_model.safetensors'), peftAdapterBytes(modules));
  if (config !== null)
    writeFileSync(join(dir, 'adapter_config.json'), typeof config === 'string' ? config : JSON.stringify(config));
  return dir;
}

test('adapter-info: both CLIs print the same bytes for the real adapters', (t) => {
  if (skipWithoutBoth(t)) return;
  for (const name of ADAPTERS) {
    for (const extra of [[], ['--json'], ['--strict'], ['--strict', '--json']]) {
      const args = ['adapter-info', fixturePath(name), ...extra];
      const js = runJs(args);
      assert.deepEqual(js, runNative(args), args.join(' '));
      if (extra.length === 0) assert.equal(js.status, 0, js.stderr);
    }
    // The weights file itself, with the config beside it.
    const file = join(
      fixturePath(name),
      readdirSync(fixturePath(name)).find((n) => n.endsWith('.safetensors')),
    );
    assert.deepEqual(runJs(['adapter-info', file, '--json']), runNative(['adapter-info', file, '--json']), file);
  }
});

test('translate: both CLIs write byte-identical files and print the same plan', (t) => {
  if (skipWithoutBoth(t)) return;
  const dir = tempDir(t);
  for (const name of ADAPTERS) {
    for (const to of TARGETS) {
      for (const extra of [[], ['--json']]) {
        const label = `${name} --to ${to} ${extra.join(' ')}`;
        const a = join(dir, 'js');
        const b = join(dir, 'native');
        // --allow-partial: heads a target cannot hold (modules_to_save in kohya, ...) are dropped with a warning.
        const js = runJs(['translate', fixturePath(name), a, '--to', to, '--allow-partial', ...extra]);
        const native = runNative(['translate', fixturePath(name), b, '--to', to, '--allow-partial', ...extra]);
        assert.deepEqual(js, native, label);
        assert.equal(js.status, 0, `${label}: ${js.stderr}`);
        const files = readTree(a);
        assert.ok(Object.keys(files).length > 0, label);
        assert.deepEqual(files, readTree(b), label);
        rmSync(a, { recursive: true });
        rmSync(b, { recursive: true });
      }
    }
  }
});

test('translate --dry-run and --old-peft match the native CLI; a dry run writes nothing', (t) => {
  if (skipWithoutBoth(t)) return;
  const dir = tempDir(t);
  for (const args of [
    ['translate', fixturePath(GPT2), join(dir, 'out'), '--to', 'mlx', '--dry-run'],
    ['translate', fixturePath(GPT2), join(dir, 'out'), '--to', 'kohya', '--dry-run', '--json'],
    [
      'translate',
      fixturePath('mlx-lm-qwen2.5-0.5b'),
      join(dir, 'out'),
      '--dry-run',
      '--to',
      'peft',
      '--old-peft',
      '--json',
    ],
    ['translate', fixturePath(GPT2), join(dir, 'out'), '--to', 'mlx', '--strict', '--dry-run'],
  ]) {
    const js = runJs(args);
    assert.deepEqual(js, runNative(args), args.join(' '));
    assert.deepEqual(readdirSync(dir), [], args.join(' '));
  }
  const js = runJs(['translate', fixturePath('mlx-lm-qwen2.5-0.5b'), join(dir, 'a'), '--to', 'peft', '--old-peft']);
  const native = runNative([
    'translate',
    fixturePath('mlx-lm-qwen2.5-0.5b'),
    join(dir, 'b'),
    '--to',
    'peft',
    '--old-peft',
  ]);
  assert.deepEqual(js, native);
  if (js.status === 0) assert.deepEqual(readTree(join(dir, 'a')), readTree(join(dir, 'b')));
});

test('errors, usage errors and file rules: same bytes and exit statuses as the native CLI', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const dir = tempDir(t);
  const binOnly = join(dir, 'bin-only');
  mkdirSync(binOnly);
  writeFileSync(join(binOnly, 'adapter_model.bin'), 'not really a pickle');
  const empty = join(dir, 'empty');
  mkdirSync(empty);
  const two = join(dir, 'two');
  writePeftAdapter(two, [Q]);
  writeFileSync(join(two, 'b.safetensors'), readFileSync(join(two, 'adapter_model.safetensors')));
  rmSync(join(two, 'adapter_model.safetensors'));
  writeFileSync(join(two, 'a.safetensors'), readFileSync(join(two, 'b.safetensors')));
  const one = join(dir, 'one'); // a single .safetensors file without an adapter's usual name
  writePeftAdapter(one, [Q]);
  writeFileSync(join(one, 'lora.safetensors'), readFileSync(join(one, 'adapter_model.safetensors')));
  rmSync(join(one, 'adapter_model.safetensors'));
  const good = writePeftAdapter(join(dir, 'good'), [Q, V]);
  const badConfig = writePeftAdapter(join(dir, 'bad-config'), [Q], '{"peft_type": "LORA", "r": ');
  const loha = writePeftAdapter(join(dir, 'loha'), [Q], { ...LLAMA_CONFIG, peft_type: 'LOHA' });
  const unknown = writePeftAdapter(join(dir, 'unknown'), [Q, 'model.layers.0.self_attn.k_proj']);
  const notDir = join(dir, 'plain-file');
  writeFileSync(notDir, 'x');
  const baseConfig = join(dir, 'config.json');
  writeFileSync(
    baseConfig,
    JSON.stringify({ model_type: 'llama', num_attention_heads: 2, num_key_value_heads: 2, num_hidden_layers: 2 }),
  );

  const cases = [
    ['adapter-info'],
    ['adapter-info', '--help'],
    ['adapter-info', good, '-h'],
    ['adapter-info', 'a', 'b'],
    ['adapter-info', '--bogus', good],
    ['adapter-info', good, '--from'],
    ['adapter-info', good, '--from', 'lycoris'],
    ['adapter-info', good, '--arch'],
    ['adapter-info', good, '--base-config'],
    ['adapter-info', good, '--arch', '--help'],
    ['translate'],
    ['translate', '--help'],
    ['translate', good],
    ['translate', good, 'o'],
    ['translate', good, 'o', '--to'],
    ['translate', good, 'o', '--to', 'onnx'],
    ['translate', good, 'o', '--to', 'mlx', '--from', 'x'],
    ['translate', good, 'o', '-x', '--to', 'mlx'],
    ['translate', good, 'o', 'p', '--to', 'mlx'],
  ];
  for (const json of [[], ['--json']]) {
    cases.push(
      ['adapter-info', binOnly, ...json],
      ['adapter-info', '/nonexistent/adapter', ...json],
      ['adapter-info', join(binOnly, 'adapter_model.bin'), ...json],
      ['adapter-info', join(dir, 'weights.pt'), ...json],
      ['adapter-info', empty, ...json],
      ['adapter-info', two, ...json],
      ['adapter-info', one, ...json],
      ['adapter-info', join(two, 'a.safetensors'), ...json],
      ['adapter-info', badConfig, ...json],
      ['adapter-info', loha, ...json],
      ['adapter-info', unknown, ...json],
      ['adapter-info', unknown, '--strict', ...json],
      ['adapter-info', good, '--from', 'mlx', ...json],
      ['adapter-info', good, '--base-config', baseConfig, ...json],
      ['adapter-info', good, '--base-config', join(dir, 'missing.json'), ...json],
      ['adapter-info', good, '--arch', 'llama', ...json],
      ['translate', binOnly, join(dir, 'never'), '--to', 'peft', ...json],
      ['translate', '/nonexistent/adapter', join(dir, 'never'), '--to', 'mlx', ...json],
      ['translate', badConfig, join(dir, 'never'), '--to', 'mlx', ...json],
      ['translate', loha, join(dir, 'never'), '--to', 'kohya', ...json],
      ['translate', unknown, join(dir, 'never'), '--to', 'mlx', '--strict', ...json],
      ['translate', good, notDir, '--to', 'mlx', ...json],
      ['translate', good, join(dir, 'missing', 'deeper'), '--to', 'mlx', ...json],
      ['translate', good, join(dir, 'never'), '--to', 'gguf-names', '--base-config', baseConfig, '--dry-run', ...json],
      ['translate', good, join(dir, 'never'), '--to', 'gguf-names', '--dry-run', ...json],
    );
  }
  for (const args of cases) {
    assert.deepEqual(runJs(args, dir), runNative(args, dir), args.join(' '));
  }
  // Relative paths: a weights file named directly finds adapter_config.json in `.`.
  for (const args of [
    ['adapter-info', 'adapter_model.safetensors'],
    ['adapter-info', 'adapter_model.safetensors', '--json'],
    ['translate', 'adapter_model.safetensors', 'out', '--to', 'mlx', '--dry-run'],
  ]) {
    assert.deepEqual(runJs(args, good), runNative(args, good), args.join(' '));
  }
  assert.ok(!existsSync(join(dir, 'never')), 'no OUT_DIR left by a failed translate');
  assert.ok(!existsSync(join(dir, 'missing')));
  // With the base config, llama.cpp's row order for q_proj is known: same files from both CLIs.
  for (const to of TARGETS) {
    const args = (out) => [
      'translate',
      good,
      join(dir, out),
      '--to',
      to,
      '--base-config',
      baseConfig,
      '--arch',
      'llama',
    ];
    const js = runJs(args('js'));
    assert.deepEqual(js, runNative(args('native')), to);
    assert.equal(js.status, 0, js.stderr);
    assert.deepEqual(readTree(join(dir, 'js')), readTree(join(dir, 'native')), to);
    rmSync(join(dir, 'js'), { recursive: true });
    rmSync(join(dir, 'native'), { recursive: true });
  }

  // The two error cases the brief names, spelled out.
  const bin = runJs(['adapter-info', binOnly]);
  assert.equal(bin.status, 1);
  assert.match(bin.stderr, /^error: UnsupportedAdapter: `adapter_model\.bin` is a pickled PyTorch file/);
  const missing = runJs(['adapter-info', '/nonexistent/adapter', '--json']);
  assert.equal(missing.status, 1);
  assert.deepEqual(JSON.parse(missing.stdout).error, {
    code: 'IoError',
    message: 'cannot open `/nonexistent/adapter`: No such file or directory',
    tensor: null,
    offset: null,
  });
});

test('translate: modules whose kohya names collide are rejected with the reason, the rest is written', (t) => {
  const dir = tempDir(t);
  // `a_b.c` and `a.b_c` both become `lora_te_model_a_b_c` once dots are underscores.
  const input = writePeftAdapter(join(dir, 'in'), ['model.a_b.c', 'model.a.b_c'], {
    peft_type: 'LORA',
    r: 2,
    lora_alpha: 4,
    target_modules: ['c', 'b_c'],
  });
  // Without --allow-partial the loss is refused, listing both tensors; nothing is written.
  const refused = runJs(['translate', input, join(dir, 'out'), '--to', 'kohya']);
  assert.equal(refused.status, 1);
  assert.match(refused.stderr, /^error: UnresolvedTensor: translate would drop 2 tensor\(s\); pass --allow-partial/);
  assert.ok(!existsSync(join(dir, 'out')));
  const js = runJs(['translate', input, join(dir, 'out'), '--to', 'kohya', '--json', '--allow-partial']);
  assert.equal(js.status, 0, js.stderr);
  assert.equal(js.stderr.match(/^warning: dropped /gm).length, 2);
  const summary = JSON.parse(js.stdout);
  assert.equal(summary.mapped, 2);
  assert.equal(summary.rejected, 2);
  assert.match(summary.tensors.find((m) => m.to === null).reason, /also the name of `model\.a_b\.c`/);
  if (hasNativeCli) {
    assert.deepEqual(refused, runNative(['translate', input, join(dir, 'native-out'), '--to', 'kohya']));
    assert.deepEqual(
      js,
      runNative(['translate', input, join(dir, 'native-out'), '--to', 'kohya', '--json', '--allow-partial']),
    );
  }
});

test('translate: a failure leaves nothing behind, not even a new OUT_DIR', (t) => {
  const dir = tempDir(t);
  // lora_bias cannot be written for PEFT < 0.14 without changing the adapter's meaning.
  const input = writePeftAdapter(join(dir, 'in'), ['model.layers.0.q_proj'], {
    peft_type: 'LORA',
    r: 2,
    lora_alpha: 4,
    target_modules: ['q_proj'],
    lora_bias: true,
  });
  const js = runJs(['translate', input, join(dir, 'out'), '--to', 'peft', '--old-peft']);
  assert.equal(js.status, 1);
  assert.match(js.stderr, /^error: UnsupportedAdapter: `lora_bias` = true cannot be written for PEFT < 0\.14/);
  assert.deepEqual(readdirSync(dir), ['in']);
  if (hasNativeCli) {
    const native = runNative(['translate', input, join(dir, 'native-out'), '--to', 'peft', '--old-peft']);
    assert.deepEqual(js, native);
    assert.deepEqual(readdirSync(dir), ['in']);
  }
  // An existing OUT_DIR is kept, and holds no temporary file.
  mkdirSync(join(dir, 'existing'));
  assert.equal(runJs(['translate', input, join(dir, 'existing'), '--to', 'peft', '--old-peft', '--json']).status, 1);
  assert.deepEqual(readdirSync(join(dir, 'existing')), []);
});

test('translate --force replaces existing files atomically, keeps other files, leaves no temporary file', (t) => {
  if (skipWithoutFixtures(t)) return;
  const dir = tempDir(t);
  const out = join(dir, 'out');
  mkdirSync(out);
  writeFileSync(join(out, 'adapters.safetensors'), 'old');
  writeFileSync(join(out, 'keep.txt'), 'unrelated');
  assert.equal(
    runJs(['translate', fixturePath(GPT2), out, '--to', 'mlx', '--json', '--allow-partial']).status,
    1,
    'not empty',
  );
  const r = runJs(['translate', fixturePath(GPT2), out, '--to', 'mlx', '--json', '--allow-partial', '--force']);
  assert.equal(r.status, 0, r.stderr);
  const summary = JSON.parse(r.stdout);
  assert.deepEqual(summary.files, ['adapters.safetensors', 'adapter_config.json']);
  assert.deepEqual(readdirSync(out).sort(), ['adapter_config.json', 'adapters.safetensors', 'keep.txt']);
  assert.ok(readFileSync(join(out, 'adapters.safetensors')).length > 1000);
});

test('adapterInfo: the gpt2 adapter has 36 modules and one extra tensor (score.weight)', async (t) => {
  if (skipWithoutFixtures(t)) return;
  const dir = fixturePath(GPT2);
  const info = await adapterInfo({
    weights: readFileSync(join(dir, 'adapter_model.safetensors')),
    config: readFileSync(join(dir, 'adapter_config.json'), 'utf8'),
  });
  assert.equal(info.ok, undefined);
  assert.equal(info.format, 'peft');
  assert.equal(info.peftType, 'LORA');
  assert.equal(info.taskType, 'SEQ_CLS');
  assert.equal(info.modules.length, 36);
  assert.deepEqual(
    info.extras.map((e) => e.key),
    ['score.weight'],
  );
  const { deltaNorm: norm, ...first } = info.modules[0];
  assert.deepEqual(first, {
    path: 'transformer.h.0.attn.c_attn',
    shape: 'linear',
    rank: 8,
    alpha: 32,
    scaling: 4,
    inFeatures: 768,
    outFeatures: 2304,
    dtype: 'F32',
    dora: false,
    loraBias: false,
    rankPattern: null,
    alphaPattern: null,
  });
  assert.ok(norm > 0 && Number.isFinite(norm), `deltaNorm ${norm}`);
  assert.deepEqual(info.rejected, []);
  // The same as the CLI's --json rendering (without `ok`).
  const cli = JSON.parse(runJs(['adapter-info', dir, '--json']).stdout);
  delete cli.ok;
  assert.deepEqual(info, cli);
  // Config as bytes or as an object gives the same answer.
  const configObject = JSON.parse(readFileSync(join(dir, 'adapter_config.json'), 'utf8'));
  const fromBytes = await adapterInfo({
    weights: readFileSync(join(dir, 'adapter_model.safetensors')),
    config: new Uint8Array(readFileSync(join(dir, 'adapter_config.json'))),
  });
  const fromObject = await adapterInfo({
    weights: new Uint8Array(readFileSync(join(dir, 'adapter_model.safetensors'))).buffer,
    config: configObject,
  });
  assert.deepEqual(fromBytes, info);
  assert.deepEqual(fromObject, info);
});

test('translateAdapter to peft reproduces the PEFT files byte for byte', async (t) => {
  if (skipWithoutFixtures(t)) return;
  for (const name of ['peft-gpt2-seqcls-cattn-cproj', 'peft-roberta-seqcls-query-value']) {
    const dir = fixturePath(name);
    const weights = new Uint8Array(readFileSync(join(dir, 'adapter_model.safetensors')));
    const config = readFileSync(join(dir, 'adapter_config.json'), 'utf8');
    const result = await translateAdapter({ weights, config }, { to: 'peft' });
    assert.equal(result.from, 'peft');
    assert.equal(result.to, 'peft');
    assert.deepEqual(
      result.files.map((f) => f.name),
      ['adapter_model.safetensors', 'adapter_config.json'],
    );
    assert.ok(result.files[0].bytes instanceof Uint8Array);
    assert.ok(Buffer.from(result.files[0].bytes).equals(Buffer.from(weights)), name);
    assert.equal(new TextDecoder().decode(result.files[1].bytes), config, name);
    assert.equal(result.rejected, 0);
    assert.equal(result.plan.length, result.mapped);
    for (const p of result.plan) assert.equal(p.to, p.from);

    // mlx-lm has no place for the classification head (score / classifier, modules_to_save): dropping it is
    // refused as the CLI refuses it, and allowPartial (--allow-partial) writes the rest.
    await assert.rejects(
      translateAdapter({ weights, config }, { to: 'mlx', dryRun: true }),
      (e) => e.code === 'UnresolvedTensor' && /translate would drop \d+ tensor\(s\)/.test(e.message),
    );
    const dry = await translateAdapter({ weights, config }, { to: 'mlx', dryRun: true, allowPartial: true });
    assert.deepEqual(dry.files, []);
    assert.ok(dry.plan.length > 0);
    assert.ok(dry.rejected > 0);
    const mlx = await translateAdapter({ weights, config }, { to: 'mlx', allowPartial: true });
    assert.deepEqual(mlx.plan, dry.plan);
    assert.deepEqual(
      mlx.files.map((f) => f.name),
      ['adapters.safetensors', 'adapter_config.json'],
    );
  }
});

test('translateAdapter output equals the npm CLI files; plan entries carry action or reason', async (t) => {
  if (skipWithoutFixtures(t)) return;
  const dir = tempDir(t);
  const src = fixturePath('mlx-lm-qwen2.5-0.5b');
  const input = {
    weights: readFileSync(join(src, 'adapters.safetensors')),
    config: readFileSync(join(src, 'adapter_config.json')),
    weightsName: 'adapters.safetensors',
  };
  for (const to of TARGETS) {
    // The CLI's --allow-partial is the API's allowPartial (without it, both refuse what they would drop).
    const result = await translateAdapter(input, { to, allowPartial: true });
    const out = join(dir, to);
    assert.equal(runJs(['translate', src, out, '--to', to, '--allow-partial']).status, 0);
    const files = readTree(out);
    assert.deepEqual(Object.keys(files).sort(), result.files.map((f) => f.name).sort(), to);
    for (const f of result.files) assert.ok(files[f.name].equals(Buffer.from(f.bytes)), `${to} ${f.name}`);
    for (const p of result.plan) {
      assert.equal(typeof p.from, 'string');
      if (p.to === null) assert.equal(typeof p.reason, 'string');
      else assert.equal(typeof p.action, 'string');
    }
    assert.ok(Array.isArray(result.notes));
  }
});

test('weights from a ReadableStream, an AsyncIterable or a Blob give the same result', async (t) => {
  if (skipWithoutFixtures(t)) return;
  const dir = fixturePath(GPT2);
  const weights = new Uint8Array(readFileSync(join(dir, 'adapter_model.safetensors')));
  const config = readFileSync(join(dir, 'adapter_config.json'), 'utf8');
  const expected = await adapterInfo({ weights, config });
  const parts = split(weights, randomCuts(rng(7), weights.length, 40));
  const { stream, stats } = countingStream(parts);
  assert.deepEqual(await adapterInfo({ weights: stream, config }), expected);
  assert.equal(stats.pulled, parts.length);
  assert.equal(stats.cancelled, false);
  const { iterable } = countingIterable(parts);
  const viaIterable = await translateAdapter({ weights: iterable, config }, { to: 'peft' });
  assert.ok(Buffer.from(viaIterable.files[0].bytes).equals(Buffer.from(weights)));
  assert.deepEqual(await adapterInfo({ weights: new Blob([weights]), config }), expected);
  // An aborted signal stops before reading anything.
  const controller = new AbortController();
  controller.abort();
  await assert.rejects(adapterInfo({ weights: countingStream(parts).stream, config }, { signal: controller.signal }), {
    name: 'AbortError',
  });
});

test('invalid adapters reject with SafetensorsError and the core code', async (t) => {
  const dir = tempDir(t);
  const peft = writePeftAdapter(join(dir, 'a'), [Q]);
  const weights = readFileSync(join(peft, 'adapter_model.safetensors'));
  const expectCode = async (promise, code) => {
    await assert.rejects(promise, (e) => {
      assert.ok(e instanceof SafetensorsError, String(e));
      assert.equal(e.code, code, e.message);
      return true;
    });
  };
  await expectCode(adapterInfo({ weights, config: '{"peft_type": "LORA", "r": ' }), 'InvalidConfig');
  await expectCode(
    translateAdapter({ weights, config: '{"peft_type": "LORA", "r": ' }, { to: 'mlx' }),
    'InvalidConfig',
  );
  await expectCode(adapterInfo({ weights, config: { ...LLAMA_CONFIG, peft_type: 'LOHA' } }), 'UnsupportedAdapter');
  await expectCode(
    translateAdapter({ weights, config: { ...LLAMA_CONFIG, peft_type: 'LOHA' } }, { to: 'peft' }),
    'UnsupportedAdapter',
  );
  await expectCode(adapterInfo({ weights: new Uint8Array([1, 2, 3]) }), 'HeaderTooSmall');
  await expectCode(translateAdapter({ weights }, { to: 'onnx' }), 'InvalidArgument');
  await expectCode(adapterInfo({ weights }, { from: 'lycoris' }), 'InvalidArgument');
  // Unresolved tensors: a report by default, an error with strict.
  const config = { ...LLAMA_CONFIG, target_modules: ['k_proj'] };
  const info = await adapterInfo({ weights, config });
  assert.equal(info.rejected.length, 2);
  await expectCode(adapterInfo({ weights, config }, { strict: true }), 'UnresolvedTensor');
  await expectCode(translateAdapter({ weights, config }, { to: 'mlx', strict: true }), 'UnresolvedTensor');
  // Argument errors are TypeErrors, before anything is read.
  await assert.rejects(adapterInfo({}), TypeError);
  await assert.rejects(adapterInfo({ weights, config: 42 }), TypeError);
  await assert.rejects(translateAdapter({ weights }), TypeError);
});

// LoRA on fused MoE experts (PEFT's target_parameters, nested ParamWrapper keys): the golden corpus's adapters.
test('MoE experts (target_parameters): both CLIs agree on adapter-info, translate and merge', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const dir = tempDir(t);
  for (const name of ['mixtral_experts_bf16', 'qwen3_moe_experts_bf16']) {
    const corpus = join(repoRoot, 'tests', 'golden', 'corpus', name);
    const adapter = join(corpus, 'adapter');
    for (const extra of [[], ['--json']]) {
      const args = ['adapter-info', adapter, ...extra];
      const js = runJs(args);
      assert.deepEqual(js, runNative(args), args.join(' '));
      assert.equal(js.status, 0, js.stderr);
    }
    const info = JSON.parse(runJs(['adapter-info', adapter, '--json']).stdout);
    const experts = info.modules.filter((m) => m.experts);
    assert.equal(experts.length, 4, name);
    for (const m of experts) {
      assert.equal(m.experts.experts, 3);
      assert.match(m.experts.parameter, /\.mlp\.experts\.(gate_up_proj|down_proj)$/);
      assert.equal(m.experts.parameter.endsWith('gate_up_proj'), m.path.endsWith('.base_layer'), m.path);
    }
    for (const to of ['peft', 'mlx', 'kohya']) {
      const a = join(dir, `js-${name}-${to}`);
      const b = join(dir, `native-${name}-${to}`);
      const js = runJs(['translate', adapter, a, '--to', to, '--json']);
      assert.deepEqual(js, runNative(['translate', adapter, b, '--to', to, '--json']), `${name} --to ${to}`);
      if (to === 'peft') {
        assert.equal(js.status, 0, js.stderr);
        assert.deepEqual(readTree(a), readTree(b));
        assert.deepEqual(
          readFileSync(join(a, 'adapter_model.safetensors')),
          readFileSync(join(adapter, 'adapter_model.safetensors')),
        );
      } else {
        // The experts' factors cannot be held there: refused per tensor, with the reason.
        assert.notEqual(js.status, 0, `${name} --to ${to}`);
        assert.match(js.stdout + js.stderr, /no LoRA layout for a fused experts parameter/);
      }
    }
    const a = join(dir, `js-${name}-merged`);
    const b = join(dir, `native-${name}-merged`);
    const js = runJs(['merge', '--base', join(corpus, 'base'), '--adapter', adapter, '--out', a, '-q']);
    assert.deepEqual(
      js,
      runNative(['merge', '--base', join(corpus, 'base'), '--adapter', adapter, '--out', b, '-q']),
      name,
    );
    assert.equal(js.status, 0, js.stderr);
    assert.deepEqual(readTree(a), readTree(b), name);
  }
});
