// Sizes a file declares but does not back: ranks of zero-size factors, ranks far above a module's features, 0-D
// llama.cpp factors, head counts whose products wrap, combine weights that overflow. Each is refused with a precise
// error or computed within the file's own size, in both CLIs and the JS API; none crashes, traps or writes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, hasNativeCli, makeFile, nativeCli, skipWithoutNativeCli, webDir } from './helpers/common.mjs';

const pb = await import(join(webDir, 'src', 'node.js'));
const enc = (s) => new TextEncoder().encode(s);

const run = (command, args) => {
  const r = spawnSync(command, args, { encoding: 'buffer', timeout: 120000 });
  if (r.error) throw r.error;
  return {
    status: r.status,
    signal: r.signal,
    stdout: r.stdout.toString('latin1'),
    stderr: r.stderr.toString('latin1'),
  };
};
const clis = [['npm', (args) => run(process.execPath, [cliPath, ...args])]];
if (hasNativeCli) clis.push(['native', (args) => run(nativeCli, args)]);

function work(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-hostile-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Runs `args(out)` in both CLIs; both must agree on status, stdout and stderr; returns them. */
function both(t, args) {
  skipWithoutNativeCli(t);
  const dir = work(t);
  const results = clis.map(([name, cli]) => [name, cli(args(join(dir, name)))]);
  for (const [name, r] of results.slice(1)) assert.deepEqual(r, results[0][1], `${name} prints what npm prints`);
  return { ...results[0][1], outputs: clis.map(([name]) => join(dir, name)) };
}

/** An adapter folder of F32 tensors { name: [shape, values] } with `config`. */
function adapterDir(dir, tensors, config) {
  mkdirSync(dir, { recursive: true });
  const header = {};
  let offset = 0;
  const parts = [];
  for (const [name, [shape, values]] of Object.entries(tensors)) {
    const data = new Uint8Array(Float32Array.from(values).buffer);
    header[name] = { dtype: 'F32', shape, data_offsets: [offset, offset + data.length] };
    offset += data.length;
    parts.push(data);
  }
  const data = new Uint8Array(offset);
  let at = 0;
  for (const p of parts) data.set(p, (at += p.length) - p.length);
  writeFileSync(join(dir, 'adapter_model.safetensors'), makeFile(JSON.stringify(header), data));
  if (config) writeFileSync(join(dir, 'adapter_config.json'), JSON.stringify(config));
  return dir;
}

const Q = 'base_model.model.model.layers.0.self_attn.q_proj';
const lora = (r, extra = {}) => ({ peft_type: 'LORA', r, lora_alpha: r, target_modules: ['q_proj'], ...extra });
const values = (n, f) => Array.from({ length: n }, (_, i) => f(i));

test('a rank backed by zero-size factors is refused, whatever r says (2^16, 2^62)', (t) => {
  for (const r of [65536, 2 ** 62]) {
    const dir = adapterDir(
      join(work(t), `r${r}`),
      { [`${Q}.lora_A.weight`]: [[r, 0], []], [`${Q}.lora_B.weight`]: [[0, r], []] },
      lora(1),
    );
    const res = both(t, () => ['adapter-info', dir]);
    assert.equal(res.status, 1, res.stderr);
    assert.match(
      res.stderr,
      /^error: ShapeMismatch: module `model\.layers\.0\.self_attn\.q_proj`: lora_A \[\d+, 0\] has a zero-size dimension/,
    );
  }
});

test("r = 40,000 on a 4 x 4 module: ‖ΔW‖ from ΔW itself, in the factors' memory, equal to the dense value", async (t) => {
  const r = 40000;
  const a = values(r * 4, (i) => ((i * 7919) % 13) / 13 - 0.5);
  const b = values(4 * r, (i) => ((i * 104729) % 11) / 11 - 0.5);
  const dir = adapterDir(
    join(work(t), 'wide'),
    { [`${Q}.lora_A.weight`]: [[r, 4], a], [`${Q}.lora_B.weight`]: [[4, r], b] },
    lora(r),
  );
  // ΔW = B·A (4 x 4), scaling alpha / r = 1, from the float32 values in float64.
  const fa = Float32Array.from(a),
    fb = Float32Array.from(b);
  let sum = 0;
  for (let o = 0; o < 4; ++o)
    for (let c = 0; c < 4; ++c) {
      let d = 0;
      for (let k = 0; k < r; ++k) d += fb[o * r + k] * fa[k * 4 + c];
      sum += d * d;
    }
  const expected = Math.sqrt(sum);
  const started = Date.now();
  const info = await pb.adapterInfo(dir);
  assert.ok(
    Math.abs(info.modules[0].deltaNorm - expected) <= 1e-9 * expected,
    `${info.modules[0].deltaNorm} vs ${expected}`,
  );
  assert.ok(Date.now() - started < 20000, 'bounded work');
  const res = both(t, () => ['adapter-info', dir, '--json']);
  assert.equal(res.status, 0, res.stderr);
  assert.equal(JSON.parse(res.stdout).modules[0].deltaNorm, info.modules[0].deltaNorm);
});

test('0-D and empty llama.cpp factors are rejected tensors, named, not a crash', (t) => {
  const gguf = (shapeA, shapeB) => {
    const n = (s) => s.reduce((x, y) => x * y, 1);
    return adapterDir(
      join(work(t), `g${shapeA.join('x')}-${shapeB.join('x')}`),
      {
        'blk.0.attn_v.weight.lora_a': [shapeA, values(n(shapeA), () => 0.5)],
        'blk.0.attn_v.weight.lora_b': [shapeB, values(n(shapeB), () => 0.5)],
      },
      null,
    );
  };
  for (const [sa, sb] of [
    [[], []],
    [[], [4, 2]],
    [
      [0, 2],
      [4, 2],
    ],
  ]) {
    const dir = gguf(sa, sb);
    const res = both(t, () => ['adapter-info', dir, '--arch', 'llama', '--json']);
    assert.equal(res.signal, null);
    const report = JSON.parse(res.stdout);
    assert.ok(res.status === 0 || res.status === 1, res.stderr);
    const rejected = report.rejected ?? report.error;
    assert.ok(rejected, res.stdout);
    assert.match(JSON.stringify(report), /a llama\.cpp LoRA factor is 2-D and non-empty; this one is \[/);
  }
});

test('head counts whose products wrap (2^63, 2^62 + 1) are refused by the row order, not a trap or a huge table', async (t) => {
  const dir = work(t);
  const adapter = adapterDir(
    join(dir, 'a'),
    {
      [`${Q}.lora_A.weight`]: [[2, 8], values(16, (i) => i / 16)],
      [`${Q}.lora_B.weight`]: [[8, 2], values(16, (i) => -i / 16)],
    },
    lora(2),
  );
  for (const heads of ['9223372036854775808', '4611686018427387905']) {
    const config = join(dir, `config-${heads}.json`);
    writeFileSync(
      config,
      `{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_attention_heads": ${heads}, "num_key_value_heads": ${heads}}`,
    );
    const res = both(t, (out) => ['translate', adapter, `${out}.gguf`, '--to', 'gguf', '--base-config', config]);
    assert.equal(res.status, 1, res.stderr);
    assert.match(res.stderr, /cannot reorder 8 rows as llama_rope: \d+ heads of an even size do not divide them/);
    await assert.rejects(
      pb.translateAdapter(adapter, { to: 'gguf', baseConfig: readFileSync(config, 'utf8') }),
      /cannot reorder 8 rows as llama_rope/,
    );
  }
});

test('combine weights whose result overflows the dtype are refused; nothing is written', async (t) => {
  const dir = work(t);
  const adapter = adapterDir(
    join(dir, 'a'),
    {
      [`${Q}.lora_A.weight`]: [[2, 4], values(8, (i) => 1 + i)],
      [`${Q}.lora_B.weight`]: [[4, 2], values(8, (i) => 2 + i)],
    },
    lora(2),
  );
  for (const method of ['cat', 'svd']) {
    const res = both(t, (out) => [
      'combine',
      adapter,
      adapter,
      '--weights',
      '1e308,1e308',
      '--method',
      method,
      '-o',
      out,
    ]);
    assert.equal(res.status, 1, res.stdout + res.stderr);
    assert.match(
      res.stderr,
      /^error: InvalidArgument: model\.layers\.0\.self_attn\.q_proj: (the weighted (factors|deltas): )?the result has (infinite|NaN) values in F(32|64)/,
    );
    assert.doesNotMatch(res.stdout + res.stderr, /-nan|relative error/);
    for (const out of res.outputs) assert.equal(existsSync(out), false, `${out} was written`);
    await assert.rejects(
      pb.combineAdapters([adapter, adapter], { weights: [1e308, 1e308], method }),
      (e) => e.code === 'InvalidArgument',
    );
  }
});

// Text a file controls (module names, rejected tensor names, unknown config keys, base_model_name_or_path) reaches
// the terminal with its control characters escaped, in every command of both CLIs: ESC ] 52 writes the clipboard,
// ESC ] 0 the window title, ESC [ 2J clears the screen, and U+009B is a one-character CSI on some terminals.
test('escape sequences in an adapter are printed escaped by adapter-info, translate, merge and combine', (t) => {
  const dir = work(t);
  const evil = 'x\x1b]52;c;cHduZWQ=\x07y\x1b]0;title\x07\x1b[2J\u009b31m';
  const module = `base_model.model.model.layers.0.self_attn.q_proj`;
  const adapter = adapterDir(
    join(dir, 'a'),
    {
      [`${module}.lora_A.weight`]: [[2, 4], values(8, (i) => i / 8)],
      [`${module}.lora_B.weight`]: [[4, 2], values(8, (i) => i / 8)],
      [`base_model.model.${evil}.lora_A.weight`]: [[2, 4], values(8, () => 1)],
      [`base_model.model.${evil}.lora_B.weight`]: [[4, 2], values(8, () => 1)],
      [`junk.${evil}`]: [[1], [0]],
    },
    {
      peft_type: 'LORA',
      r: 2,
      lora_alpha: 2,
      target_modules: ['q_proj', evil],
      base_model_name_or_path: evil,
      [evil]: 1,
    },
  );
  const base = join(dir, 'base');
  mkdirSync(base);
  writeFileSync(
    join(base, 'model.safetensors'),
    makeFile(
      JSON.stringify({
        'model.layers.0.self_attn.q_proj.weight': { dtype: 'F32', shape: [4, 4], data_offsets: [0, 64] },
      }),
      new Uint8Array(64),
    ),
  );
  writeFileSync(join(base, 'config.json'), '{"model_type": "llama"}');
  const runs = {
    'adapter-info': () => ['adapter-info', adapter],
    translate: (out) => ['translate', adapter, out, '--to', 'kohya', '--allow-partial'],
    merge: (out) => ['merge', '--base', base, '--adapter', adapter, '-o', out, '--allow-partial'],
    combine: (out) => ['combine', adapter, adapter, '-o', out],
  };
  for (const [command, args] of Object.entries(runs)) {
    const res = both(t, args);
    const printed = res.stdout + res.stderr;
    assert.ok(printed.includes('\\x1B]52;c;cHduZWQ=\\x07y'), `${command} shows the name escaped:\n${printed}`);
    assert.doesNotMatch(
      printed,
      /[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]/,
      `${command} printed a raw control character`,
    );
  }
});
