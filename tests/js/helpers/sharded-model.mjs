// A three-shard LLaMA-shaped BF16 base (two layers per shard, embed and head at the ends, 64-wide) and an r=4
// q/v PEFT adapter, as Blobs: the inputs of the mergeInWorkers tests (Node worker threads and Chromium).
import { collect, pb, rng } from './common.mjs';

const { writeSafetensors } = pb;

const HIDDEN = 64;
const KV = 32;
export const NAMES = [
  'model-00001-of-00003.safetensors',
  'model-00002-of-00003.safetensors',
  'model-00003-of-00003.safetensors',
];

function bf16(random, n) {
  const u = new Uint16Array(n);
  for (let i = 0; i < n; ++i)
    u[i] = (random() < 0.5 ? 0x8000 : 0) | ((120 + Math.floor(random() * 8)) << 7) | Math.floor(random() * 128);
  return new Uint8Array(u.buffer);
}

function f32(random, n) {
  const f = new Float32Array(n);
  for (let i = 0; i < n; ++i) f[i] = (random() * 2 - 1) * 0.2;
  return new Uint8Array(f.buffer);
}

const layer = (random, l) => [
  { name: `model.layers.${l}.input_layernorm.weight`, dtype: 'BF16', shape: [HIDDEN], data: bf16(random, HIDDEN) },
  {
    name: `model.layers.${l}.self_attn.q_proj.weight`,
    dtype: 'BF16',
    shape: [HIDDEN, HIDDEN],
    data: bf16(random, HIDDEN * HIDDEN),
  },
  {
    name: `model.layers.${l}.self_attn.k_proj.weight`,
    dtype: 'BF16',
    shape: [KV, HIDDEN],
    data: bf16(random, KV * HIDDEN),
  },
  {
    name: `model.layers.${l}.self_attn.v_proj.weight`,
    dtype: 'BF16',
    shape: [KV, HIDDEN],
    data: bf16(random, KV * HIDDEN),
  },
];

/** A three-shard base (two layers per shard, embed and head at the ends) and an r=4 q/v adapter, as Blobs. */
export async function makeShardedModel({ nanInShard = -1 } = {}) {
  const random = rng(31);
  const shards = [
    [
      { name: 'model.embed_tokens.weight', dtype: 'BF16', shape: [512, HIDDEN], data: bf16(random, 512 * HIDDEN) },
      ...layer(random, 0),
      ...layer(random, 1),
    ],
    [...layer(random, 2), ...layer(random, 3)],
    [
      ...layer(random, 4),
      ...layer(random, 5),
      { name: 'lm_head.weight', dtype: 'BF16', shape: [512, HIDDEN], data: bf16(random, 512 * HIDDEN) },
    ],
  ];
  if (nanInShard >= 0) shards[nanInShard].find((t) => t.name.endsWith('q_proj.weight')).data.set([0xc0, 0x7f], 6); // BF16 NaN
  const weightMap = {};
  const files = {};
  for (const [i, tensors] of shards.entries()) {
    files[NAMES[i]] = new Blob([await collect(writeSafetensors({ tensors, metadata: { format: 'pt' } }))]);
    for (const t of tensors) weightMap[t.name] = NAMES[i];
  }
  const index = JSON.stringify({ metadata: {}, weight_map: weightMap });
  const config = JSON.stringify({
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    hidden_size: HIDDEN,
    num_attention_heads: 4,
    num_key_value_heads: 2,
  });
  const adapterTensors = [];
  for (let l = 0; l < 6; ++l) {
    for (const [m, out] of [
      ['q_proj', HIDDEN],
      ['v_proj', KV],
    ]) {
      const key = `base_model.model.model.layers.${l}.self_attn.${m}`;
      adapterTensors.push({
        name: `${key}.lora_A.weight`,
        dtype: 'F32',
        shape: [4, HIDDEN],
        data: f32(random, 4 * HIDDEN),
      });
      adapterTensors.push({ name: `${key}.lora_B.weight`, dtype: 'F32', shape: [out, 4], data: f32(random, 4 * out) });
    }
  }
  const adapter = {
    weights: new Blob([await collect(writeSafetensors({ tensors: adapterTensors }))]),
    config: JSON.stringify({ peft_type: 'LORA', r: 4, lora_alpha: 8, target_modules: ['q_proj', 'v_proj'] }),
  };
  return { base: { index, config, open: (name) => files[name] }, adapter, files };
}
