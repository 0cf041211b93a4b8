// transformers' checkpoint key mapping (data/naming/transformers/key-mapping.json, adapter/key_mapping.h): a ViT
// checkpoint holds `vit.encoder.layer.N.attention.attention.query.weight` where transformers 5 loads
// `vit.layers.N.attention.q_proj`, the name a PEFT adapter uses. `merge` used to fail with ModulesNotFound; it maps
// the checkpoint's names as transformers does and writes them back unchanged (as transformers' save_pretrained of
// PEFT's merge does), the same in both CLIs and the JS API, from the one rule in the core.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, collect, hasNativeCli, nativeCli, webDir } from './helpers/common.mjs';

const pb = await import(join(webDir, 'src', 'node.js'));

const run = (command, args) => {
  const r = spawnSync(command, args, { encoding: 'buffer', timeout: 120000 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout.toString('latin1'), stderr: r.stderr.toString('latin1') };
};
const clis = [['npm', (args) => run(process.execPath, [cliPath, ...args])]];
if (hasNativeCli) clis.push(['native', (args) => run(nativeCli, args)]);

function readTensors(bytes) {
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8'));
  const out = {};
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const b = bytes.subarray(8 + n + t.data_offsets[0], 8 + n + t.data_offsets[1]);
    out[name] = {
      dtype: t.dtype,
      shape: t.shape,
      values: new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length)),
    };
  }
  return out;
}

function safetensors(tensors) {
  const header = {};
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    header[name] = { dtype: 'F32', shape: t.shape, data_offsets: [offset, offset + t.values.byteLength] };
    offset += t.values.byteLength;
  }
  let json = JSON.stringify(header);
  while ((8 + json.length) % 8) json += ' ';
  const out = Buffer.alloc(8 + json.length + offset);
  out.writeBigUInt64LE(BigInt(json.length), 0);
  out.write(json, 8, 'utf8');
  let at = 8 + json.length;
  for (const t of Object.values(tensors)) {
    Buffer.from(t.values.buffer).copy(out, at);
    at += t.values.byteLength;
  }
  return out;
}

function f32(shape, seed) {
  const values = new Float32Array(shape.reduce((a, b) => a * b, 1));
  let x = seed;
  for (let i = 0; i < values.length; ++i) {
    x = (x * 1103515245 + 12345) % 2147483648;
    values[i] = (x / 2147483648 - 0.5) * 0.2;
  }
  return { shape, values };
}

const H = 8;
const LAYER = 'vit.encoder.layer.0.';
// A ViTForImageClassification checkpoint as transformers 5.24's save_pretrained writes it (the checkpoint's names).
const BASE = {
  [`${LAYER}attention.attention.query.weight`]: f32([H, H], 1),
  [`${LAYER}attention.attention.value.weight`]: f32([H, H], 2),
  [`${LAYER}output.dense.weight`]: f32([H, 2 * H], 3),
  'classifier.weight': f32([3, H], 4),
};
// PEFT's adapter names the loaded modules.
const P = 'base_model.model.vit.layers.0.';
const ADAPTER = {
  [`${P}attention.q_proj.lora_A.weight`]: f32([2, H], 5),
  [`${P}attention.q_proj.lora_B.weight`]: f32([H, 2], 6),
  [`${P}mlp.fc2.lora_A.weight`]: f32([2, 2 * H], 7),
  [`${P}mlp.fc2.lora_B.weight`]: f32([H, 2], 8),
};
const CONFIG = { architectures: ['ViTForImageClassification'], model_type: 'vit', hidden_size: H };
const ADAPTER_CONFIG = {
  peft_type: 'LORA',
  r: 2,
  lora_alpha: 4,
  target_modules: ['q_proj', 'fc2'],
  base_model_name_or_path: 'tiny-vit',
};

function folders(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-keymap-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const base = join(dir, 'base');
  const adapter = join(dir, 'adapter');
  mkdirSync(base);
  mkdirSync(adapter);
  writeFileSync(join(base, 'model.safetensors'), safetensors(BASE));
  writeFileSync(join(base, 'config.json'), JSON.stringify(CONFIG));
  writeFileSync(join(adapter, 'adapter_model.safetensors'), safetensors(ADAPTER));
  writeFileSync(join(adapter, 'adapter_config.json'), JSON.stringify(ADAPTER_CONFIG));
  return { dir, base, adapter };
}

/** W + (alpha / r) B A in float64, for the stored [out, in] weight. */
function expectMerged(w, a, b) {
  const [out, inn] = w.shape;
  const r = a.shape[0];
  const want = new Float64Array(out * inn);
  for (let i = 0; i < out; ++i)
    for (let j = 0; j < inn; ++j) {
      let d = 0;
      for (let k = 0; k < r; ++k) d += b.values[i * r + k] * a.values[k * inn + j];
      want[i * inn + j] = w.values[i * inn + j] + 2 * d;
    }
  return want;
}

function checkMerged(bytes) {
  const got = readTensors(bytes);
  // The checkpoint's names, unchanged: no loaded name leaks into the output.
  assert.deepEqual(Object.keys(got).sort(), Object.keys(BASE).sort());
  for (const [name, a, b] of [
    [
      `${LAYER}attention.attention.query.weight`,
      `${P}attention.q_proj.lora_A.weight`,
      `${P}attention.q_proj.lora_B.weight`,
    ],
    [`${LAYER}output.dense.weight`, `${P}mlp.fc2.lora_A.weight`, `${P}mlp.fc2.lora_B.weight`],
  ]) {
    const want = expectMerged(BASE[name], ADAPTER[a], ADAPTER[b]);
    got[name].values.forEach((v, i) => assert.ok(Math.abs(v - want[i]) <= 1e-6, `${name}[${i}]: ${v} vs ${want[i]}`));
  }
  for (const name of [`${LAYER}attention.attention.value.weight`, 'classifier.weight'])
    assert.deepEqual(got[name].values, BASE[name].values, `${name} passes through`);
}

test('a ViT checkpoint named as saved merges a PEFT adapter named as loaded, in both CLIs and the JS API, keeping its names', async (t) => {
  const { dir, base, adapter } = folders(t);
  const outputs = [];
  for (const [name, cli] of clis) {
    const out = join(dir, `out-${name}`);
    const r = cli(['merge', '--base', base, '--adapter', adapter, '-o', out]);
    assert.equal(r.status, 0, `${name}: ${r.stderr}`);
    assert.match(r.stdout, /merge 2 module\(s\) into 2 tensor\(s\)/, name);
    outputs.push(readFileSync(join(out, 'model.safetensors')));
    checkMerged(outputs.at(-1));
  }
  for (const o of outputs.slice(1)) assert.ok(o.equals(outputs[0]), 'both CLIs write the same bytes');

  const files = [];
  for await (const f of pb.mergeShards({
    base: {
      config: new Uint8Array(readFileSync(join(base, 'config.json'))),
      open: () => new Uint8Array(readFileSync(join(base, 'model.safetensors'))),
    },
    adapter: {
      weights: new Uint8Array(readFileSync(join(adapter, 'adapter_model.safetensors'))),
      config: new Uint8Array(readFileSync(join(adapter, 'adapter_config.json'))),
    },
  }))
    files.push({ path: f.path, bytes: Buffer.from(await collect(f.stream)) });
  const model = files.find((f) => f.path === 'model.safetensors');
  assert.ok(model, `mergeShards wrote ${files.map((f) => f.path)}`);
  assert.ok(model.bytes.equals(outputs[0]), "mergeShards writes the CLIs' bytes");
});

test('without config.json (no model_type, so no mapping) the modules are still not found, naming them', (t) => {
  const { dir, base, adapter } = folders(t);
  rmSync(join(base, 'config.json'));
  for (const [name, cli] of clis) {
    const r = cli(['merge', '--base', base, '--adapter', adapter, '-o', join(dir, `none-${name}`)]);
    assert.equal(r.status, 1, name);
    assert.match(r.stderr, /ModulesNotFound/, name);
    assert.match(r.stderr, /vit\.layers\.0\.attention\.q_proj/, name);
  }
});
