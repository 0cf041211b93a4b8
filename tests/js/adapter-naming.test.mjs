// How adapters are named for people and for other tools, in both CLIs: kohya keys by component (lora_unet_ for
// a diffusion UNet, lora_te_ / lora_te1_ / lora_te2_ for text encoders, as sd-scripts writes them and diffusers'
// kohya converter, A1111 and ComfyUI read them; src/adapter/kohya_names.h), and adapter-info's modules in natural
// layer order (layers.2 before layers.10).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, hasNativeCli, nativeCli, writePeftAdapterDir } from './helpers/common.mjs';

const runJs = (args) => {
  const r = spawnSync(process.execPath, [cliPath, ...args], { encoding: 'buffer', timeout: 30000 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout.toString('latin1'), stderr: r.stderr.toString('latin1') };
};
const runNative = (args) => {
  const r = spawnSync(nativeCli, args, { encoding: 'buffer' });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout.toString('latin1'), stderr: r.stderr.toString('latin1') };
};

function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-naming-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const writePeftAdapter = writePeftAdapterDir;

/** The tensor names of a safetensors file, in header order. */
function tensorNames(path) {
  const bytes = readFileSync(path);
  const len = Number(bytes.readBigUInt64LE(0));
  return Object.keys(JSON.parse(bytes.subarray(8, 8 + len).toString('utf8'))).filter((k) => k !== '__metadata__');
}

/** Every file under `dir` (name -> bytes). */
const readTree = (dir) =>
  Object.fromEntries(
    readdirSync(dir)
      .sort()
      .map((n) => [n, readFileSync(join(dir, n))]),
  );

/** translate IN --to kohya with both CLIs: the same output bytes and files; returns the written keys, sorted. */
function kohyaKeys(t, dir, input) {
  mkdirSync(dir, { recursive: true });
  const js = runJs(['translate', input, join(dir, 'js'), '--to', 'kohya']);
  assert.equal(js.status, 0, js.stderr);
  if (hasNativeCli) {
    assert.deepEqual(runNative(['translate', input, join(dir, 'native'), '--to', 'kohya']), js);
    assert.deepEqual(readTree(join(dir, 'native')), readTree(join(dir, 'js')), 'the same files');
  } else t.diagnostic('build/native/peft-bridge not built: the npm CLI only');
  return tensorNames(join(dir, 'js', 'adapter_model.safetensors')).sort();
}

const roles = (base) => [`${base}.alpha`, `${base}.lora_down.weight`, `${base}.lora_up.weight`];

test('kohya: a diffusers UNet adapter gets lora_unet_ keys, and reads back to the same modules', (t) => {
  const dir = tempDir(t);
  const modules = [
    'down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q',
    'mid_block.attentions.0.proj_in',
    'up_blocks.1.attentions.2.transformer_blocks.0.ff.net.2',
  ];
  const input = writePeftAdapter(join(dir, 'in'), modules, ['to_q', 'proj_in', 'ff.net.2']);
  assert.deepEqual(
    kohyaKeys(t, dir, input),
    [
      ...roles('lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q'),
      ...roles('lora_unet_mid_block_attentions_0_proj_in'),
      ...roles('lora_unet_up_blocks_1_attentions_2_transformer_blocks_0_ff_net_2'),
    ].sort(),
  );
  // The dotted paths come back from the file's metadata.
  const read = runJs(['adapter-info', join(dir, 'js'), '--json']);
  const info = JSON.parse(read.stdout);
  assert.equal(info.format, 'kohya');
  assert.deepEqual(info.modules.map((m) => m.path).sort(), [...modules].sort());
  if (hasNativeCli) assert.deepEqual(runNative(['adapter-info', join(dir, 'js'), '--json']), read);
});

test("kohya: text encoders get lora_te_ (one) or lora_te1_ / lora_te2_ (SDXL's two); a pipeline file's unet. prefix goes", (t) => {
  const dir = tempDir(t);
  const clip = writePeftAdapter(
    join(dir, 'clip'),
    ['text_model.encoder.layers.0.self_attn.q_proj', 'text_model.encoder.layers.1.mlp.fc1'],
    ['q_proj', 'fc1'],
  );
  assert.deepEqual(
    kohyaKeys(t, join(dir, 'clip-out'), clip),
    [
      ...roles('lora_te_text_model_encoder_layers_0_self_attn_q_proj'),
      ...roles('lora_te_text_model_encoder_layers_1_mlp_fc1'),
    ].sort(),
  );

  const sdxlModules = [
    'unet.down_blocks.1.attentions.0.transformer_blocks.0.attn2.to_k',
    'text_encoder.text_model.encoder.layers.0.self_attn.q_proj',
    'text_encoder_2.text_model.encoder.layers.0.self_attn.q_proj',
  ];
  const sdxl = writePeftAdapter(join(dir, 'sdxl'), sdxlModules, ['to_k', 'q_proj']);
  assert.deepEqual(
    kohyaKeys(t, join(dir, 'sdxl-out'), sdxl),
    [
      ...roles('lora_unet_down_blocks_1_attentions_0_transformer_blocks_0_attn2_to_k'),
      ...roles('lora_te1_text_model_encoder_layers_0_self_attn_q_proj'),
      ...roles('lora_te2_text_model_encoder_layers_0_self_attn_q_proj'),
    ].sort(),
  );
  const info = JSON.parse(runJs(['adapter-info', join(dir, 'sdxl-out', 'js'), '--json']).stdout);
  assert.deepEqual(info.modules.map((m) => m.path).sort(), [...sdxlModules].sort());

  // A language model's modules keep lora_te_, as before.
  const llm = writePeftAdapter(join(dir, 'llm'), ['model.layers.0.self_attn.q_proj'], ['q_proj']);
  assert.deepEqual(kohyaKeys(t, join(dir, 'llm-out'), llm), roles('lora_te_model_layers_0_self_attn_q_proj'));
});

test('adapter-info lists modules in natural layer order: layers.2 before layers.10', (t) => {
  const dir = tempDir(t);
  const input = writePeftAdapter(
    join(dir, 'in'),
    [
      'model.layers.10.self_attn.q_proj',
      'model.layers.2.self_attn.v_proj',
      'model.layers.2.self_attn.q_proj',
      'model.layers.1.self_attn.q_proj',
    ],
    ['q_proj', 'v_proj'],
  );
  const expected = [
    'model.layers.1.self_attn.q_proj',
    'model.layers.2.self_attn.q_proj',
    'model.layers.2.self_attn.v_proj',
    'model.layers.10.self_attn.q_proj',
  ];
  const text = runJs(['adapter-info', input]);
  assert.equal(text.status, 0, text.stderr);
  const listed = text.stdout
    .split('\n')
    .filter((l) => l.startsWith('  model.'))
    .map((l) => l.trim().split(/\s+/)[0]);
  assert.deepEqual(listed, expected);
  const json = runJs(['adapter-info', input, '--json']);
  assert.deepEqual(
    JSON.parse(json.stdout).modules.map((m) => m.path),
    expected,
  );
  if (hasNativeCli) {
    assert.deepEqual(runNative(['adapter-info', input]), text);
    assert.deepEqual(runNative(['adapter-info', input, '--json']), json);
  }
});
