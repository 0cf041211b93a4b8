// Generated Llama-shaped bases (sharded or one file) and PEFT adapters on disk, the native CLI's merge of them, and
// the fake Hub serving them: what the remote-merge and edge-worker tests share.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { collect, nativeCli, pb, rng } from './common.mjs';

const count = (shape) => shape.reduce((a, b) => a * b, 1);

/** Random finite BF16 values (magnitudes about 2^-7..2, both signs). */
function bf16(random, n) {
  const u = new Uint16Array(n);
  for (let i = 0; i < n; ++i)
    u[i] = (random() < 0.5 ? 0x8000 : 0) | ((120 + Math.floor(random() * 8)) << 7) | Math.floor(random() * 128);
  return new Uint8Array(u.buffer);
}

async function safetensors(tensors, seed) {
  const random = rng(seed);
  return collect(
    pb.writeSafetensors({ tensors: tensors.map((t) => ({ ...t, data: t.data ?? bf16(random, count(t.shape)) })) }),
  );
}

export const LLAMA_CONFIG = (hidden) =>
  JSON.stringify({
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    hidden_size: hidden,
    num_attention_heads: 8,
    torch_dtype: 'bfloat16',
  });

/** Layer `l`'s BF16 tensors. */
const layer = (l, hidden) => [
  { name: `model.layers.${l}.self_attn.q_proj.weight`, dtype: 'BF16', shape: [hidden, hidden] },
  { name: `model.layers.${l}.self_attn.v_proj.weight`, dtype: 'BF16', shape: [hidden / 2, hidden] },
  { name: `model.layers.${l}.mlp.up_proj.weight`, dtype: 'BF16', shape: [hidden * 4, hidden] },
  { name: `model.layers.${l}.input_layernorm.weight`, dtype: 'BF16', shape: [hidden] },
];

/**
 * A sharded base in `dir`: `shards` files of `layers / shards` layers each (the embedding in the first, norm and
 * lm_head in the last), model.safetensors.index.json and config.json. Returns the shard names.
 */
export async function writeShardedBase(dir, { shards = 3, layers = 6, hidden = 512, vocab = 1000 } = {}) {
  mkdirSync(dir, { recursive: true });
  const names = Array.from(
    { length: shards },
    (_, i) => `model-${String(i + 1).padStart(5, '0')}-of-${String(shards).padStart(5, '0')}.safetensors`,
  );
  const weightMap = {};
  let total = 0;
  for (let s = 0; s < shards; ++s) {
    const tensors = [];
    if (s === 0) tensors.push({ name: 'model.embed_tokens.weight', dtype: 'BF16', shape: [vocab, hidden] });
    for (let l = (s * layers) / shards; l < ((s + 1) * layers) / shards; ++l) tensors.push(...layer(l, hidden));
    if (s === shards - 1) {
      tensors.push({ name: 'model.norm.weight', dtype: 'BF16', shape: [hidden] });
      tensors.push({ name: 'lm_head.weight', dtype: 'BF16', shape: [vocab, hidden] });
    }
    writeFileSync(join(dir, names[s]), await safetensors(tensors, 100 + s));
    for (const t of tensors) {
      weightMap[t.name] = names[s];
      total += 2 * count(t.shape);
    }
  }
  writeFileSync(
    join(dir, 'model.safetensors.index.json'),
    JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 2),
  );
  writeFileSync(join(dir, 'config.json'), LLAMA_CONFIG(hidden));
  return names;
}

/** A one-file base `dir/model.safetensors` (no config). */
export async function writeSingleBase(dir, { layers = 6, hidden = 512 } = {}) {
  mkdirSync(dir, { recursive: true });
  const tensors = Array.from({ length: layers }, (_, l) => layer(l, hidden)).flat();
  writeFileSync(join(dir, 'model.safetensors'), await safetensors(tensors, 7));
}

/** A PEFT LoRA adapter directory on q_proj and v_proj of `layers` layers: rank 8, F32, B non-zero. */
export async function writeAdapter(dir, { layers = 6, hidden = 512, rank = 8 } = {}) {
  mkdirSync(dir, { recursive: true });
  const random = rng(5);
  const small = (n) => new Uint8Array(Float32Array.from({ length: n }, () => (random() * 2 - 1) * 0.05).buffer);
  const tensors = [];
  for (let l = 0; l < layers; ++l) {
    for (const [proj, out] of [
      ['q_proj', hidden],
      ['v_proj', hidden / 2],
    ]) {
      const key = `base_model.model.model.layers.${l}.self_attn.${proj}`;
      tensors.push({ name: `${key}.lora_A.weight`, dtype: 'F32', shape: [rank, hidden], data: small(rank * hidden) });
      tensors.push({ name: `${key}.lora_B.weight`, dtype: 'F32', shape: [out, rank], data: small(out * rank) });
    }
  }
  writeFileSync(join(dir, 'adapter_model.safetensors'), await safetensors(tensors, 9));
  writeFileSync(
    join(dir, 'adapter_config.json'),
    JSON.stringify({
      peft_type: 'LORA',
      r: rank,
      lora_alpha: 2 * rank,
      target_modules: ['q_proj', 'v_proj'],
      base_model_name_or_path: 'me/base',
    }),
  );
}

/** The native CLI's `merge` of `base` (a directory or file) with `adapter`: {name: bytes} of what it wrote. */
export function nativeMerge(base, adapter, out, args = []) {
  const r = spawnSync(nativeCli, ['merge', '--base', base, '--adapter', adapter, '--out', out, ...args], {
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`native merge failed: ${r.stderr}`);
  return Object.fromEntries(
    readdirSync(out)
      .sort()
      .map((name) => [name, new Uint8Array(readFileSync(join(out, name)))]),
  );
}
