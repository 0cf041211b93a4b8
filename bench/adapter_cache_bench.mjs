// The adapter cache (docs/adapter-cache.md) on LLaMA-7B shapes, against the local Hub stand-in: registration
// (requests, bytes), a module's first fetch (one Range, conversion) and a hit, a two-adapter composition, applyTo on
// a 4096 × 4096 BF16 weight, and the budget under 64 concurrent requests. Run: node bench/adapter_cache_bench.mjs
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startHub } from '../tests/hub/server.mjs';

const pb = await import('../web/src/index.js');
const H = 4096;
const LAYERS = 8;
const dir = mkdtempSync(join(tmpdir(), 'pb-cache-bench-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

let seed = 1;
const random = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
const bf16 = (n) => {
  const u = new Uint16Array(n);
  for (let i = 0; i < n; ++i)
    u[i] = (random() < 0.5 ? 0x8000 : 0) | ((116 + Math.floor(random() * 6)) << 7) | Math.floor(random() * 128);
  return new Uint8Array(u.buffer);
};
async function adapter(name, r) {
  const tensors = [];
  for (let l = 0; l < LAYERS; ++l)
    for (const p of ['q_proj', 'k_proj', 'v_proj', 'o_proj']) {
      const key = `base_model.model.model.layers.${l}.self_attn.${p}`;
      tensors.push({ name: `${key}.lora_A.weight`, dtype: 'BF16', shape: [r, H], data: bf16(r * H) });
      tensors.push({ name: `${key}.lora_B.weight`, dtype: 'BF16', shape: [H, r], data: bf16(H * r) });
    }
  const path = join(dir, name);
  mkdirSync(path);
  const parts = [];
  for await (const c of pb.writeSafetensors({ tensors })) parts.push(c);
  writeFileSync(join(path, 'adapter_model.safetensors'), Buffer.concat(parts));
  writeFileSync(
    join(path, 'adapter_config.json'),
    JSON.stringify({
      peft_type: 'LORA',
      r,
      lora_alpha: 2 * r,
      target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'],
    }),
  );
  return path;
}
const hub = await startHub({ files: { 'me/sql': await adapter('sql', 16), 'me/chat': await adapter('chat', 64) } });
const ms = (t0) => `${(performance.now() - t0).toFixed(1)} ms`;
const Q = 'model.layers.3.self_attn.q_proj';
try {
  const cache = pb.createAdapterCache({ endpoint: hub.endpoint, budgetBytes: 64 << 20, dtype: 'bf16' });
  await pb.init();
  hub.clearLog();
  let t0 = performance.now();
  await cache.register('sql', { repo: 'me/sql' });
  await cache.register('chat', { repo: 'me/chat' });
  const bytesIn = hub.requests.filter((r) => r.method === 'GET').length;
  console.log(
    `register 2 adapters (32 modules each): ${ms(t0)}, ${bytesIn} GET requests (listing, config, first 64 KiB, each)`,
  );
  t0 = performance.now();
  const m = await cache.module('chat', Q, { dtype: 'f32' });
  console.log(`first module (r 64, bf16 -> f32, ${m.A.length + m.B.length} bytes): ${ms(t0)}`);
  t0 = performance.now();
  for (let i = 0; i < 1000; ++i) await cache.module('chat', Q, { dtype: 'f32' });
  console.log(`hit: ${(((performance.now() - t0) / 1000) * 1000).toFixed(1)} µs`);
  t0 = performance.now();
  const d = await cache.compose(
    [
      { id: 'sql', scale: 0.7 },
      { id: 'chat', scale: 0.3 },
    ],
    Q,
    { dtype: 'bf16' },
  );
  console.log(`compose r 16 + r 64 -> bf16 (one fetch missing): ${ms(t0)}`);
  t0 = performance.now();
  await cache.compose(
    [
      { id: 'sql', scale: 0.7 },
      { id: 'chat', scale: 0.3 },
    ],
    Q,
    { dtype: 'bf16' },
  );
  console.log(`compose again (factors cached): ${ms(t0)}`);
  const weight = bf16(H * H);
  t0 = performance.now();
  d.applyTo(weight, { dtype: 'BF16', shape: [H, H] });
  console.log(`applyTo 4096 x 4096 BF16, rank 80: ${ms(t0)}`);
  const small = pb.createAdapterCache({ endpoint: hub.endpoint, budgetBytes: 4 << 20, dtype: 'bf16' });
  await small.register('sql', { repo: 'me/sql' });
  await small.register('chat', { repo: 'me/chat' });
  t0 = performance.now();
  const all = [];
  for (let l = 0; l < LAYERS; ++l)
    for (const p of ['q_proj', 'k_proj', 'v_proj', 'o_proj'])
      for (const id of ['sql', 'chat']) all.push(small.module(id, `model.layers.${l}.self_attn.${p}`));
  await Promise.all(all);
  const s = small.stats();
  console.log(
    `64 concurrent modules, budget 4 MiB: ${ms(t0)}; peak ${s.peakResidentBytes} B, evictions ${s.evictions}, ${s.bytesFetched} B fetched in ${s.spanReads} reads`,
  );
  await small.close();
  await cache.close();
} finally {
  await hub.close();
}
