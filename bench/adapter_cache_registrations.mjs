// What a registration costs the adapter cache (docs/adapter-cache.md, Accounting): N registrations of one 64-module
// adapter (32 layers × q_proj, v_proj; rank 8, hidden 512, F32: a 2 MiB weights file, so each registration reads its
// first 64 KiB whole) served by the local Hub stand-in, and the growth of the WASM heap and of V8's heap (after a
// full GC) per registration; then what unregistering gives back. Run: node --expose-gc bench/adapter_cache_registrations.mjs [N]
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startHub } from '../tests/hub/server.mjs';

const pb = await import('../web/src/index.js');
const { getModule } = await import('../web/src/init.js');
const N = Number(process.argv[2] ?? 200);
const dir = mkdtempSync(join(tmpdir(), 'pb-cache-regs-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

const tensors = [];
for (let l = 0; l < 32; ++l)
  for (const [p, out] of [
    ['q_proj', 512],
    ['v_proj', 512],
  ]) {
    const key = `base_model.model.model.layers.${l}.self_attn.${p}`;
    tensors.push({
      name: `${key}.lora_A.weight`,
      dtype: 'F32',
      shape: [8, 512],
      data: new Uint8Array(8 * 512 * 4).fill(1),
    });
    tensors.push({
      name: `${key}.lora_B.weight`,
      dtype: 'F32',
      shape: [out, 8],
      data: new Uint8Array(out * 8 * 4).fill(1),
    });
  }
const path = join(dir, 'lora');
mkdirSync(path);
const parts = [];
for await (const c of pb.writeSafetensors({ tensors })) parts.push(c);
writeFileSync(join(path, 'adapter_model.safetensors'), Buffer.concat(parts));
writeFileSync(
  join(path, 'adapter_config.json'),
  JSON.stringify({ peft_type: 'LORA', r: 8, lora_alpha: 16, target_modules: ['q_proj', 'v_proj'] }),
);
const hub = await startHub({ files: { 'me/lora': path } });
const MiB = (n) => `${(n / 2 ** 20).toFixed(1)} MiB`;
const KiB = (n) => `${(n / 1024).toFixed(1)} KiB`;
const jsHeap = () => {
  globalThis.gc?.();
  return process.memoryUsage().heapUsed;
};
try {
  const module = await getModule();
  const cache = pb.createAdapterCache({ endpoint: hub.endpoint, budgetBytes: 64 << 20, maxRegistrations: N + 1 });
  await cache.register('warm', { repo: 'me/lora' }); // the module's first allocations are not a registration's
  const wasm0 = module.heapSize();
  const js0 = jsHeap();
  const t0 = performance.now();
  for (let i = 0; i < N; ++i) await cache.register(`a${i}`, { repo: 'me/lora' });
  const took = performance.now() - t0;
  const wasm1 = module.heapSize();
  const js1 = jsHeap();
  console.log(`${N} registrations of a 64-module adapter in ${took.toFixed(0)} ms`);
  console.log(`WASM heap: ${MiB(wasm0)} -> ${MiB(wasm1)}: ${KiB((wasm1 - wasm0) / N)} per registration`);
  console.log(`V8 heap (after GC): ${MiB(js0)} -> ${MiB(js1)}: ${KiB((js1 - js0) / N)} per registration`);
  for (let i = 0; i < N; ++i) await cache.unregister(`a${i}`);
  console.log(
    `after unregistering them: WASM heap ${MiB(module.heapSize())} (it never shrinks; freed memory is reused), V8 heap ${MiB(jsHeap())}`,
  );
  await cache.close();
} finally {
  await hub.close();
}
