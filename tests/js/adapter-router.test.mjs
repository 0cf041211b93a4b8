// examples/adapter-router in real workerd against the local Hub stand-in: the registry in a SQLite Durable Object,
// registration validated against the base (merge --dry-run's error), every adapter and a weighted composition served
// as the PEFT files `combine --method cat` writes (byte for byte) and as the GGUF LoRA `translate --to gguf` writes,
// through the adapter cache; the ACCESS_SECRET guard; and a load test (N concurrent requests over M adapters larger
// in sum than the cache's budget) reporting workerd's memory, the cache's hit rate and the latencies.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pb, repoRoot } from './helpers/common.mjs';
import { writeAdapter, writeSingleBase } from './helpers/remote-model.mjs';
import { hasWorkerd, processMemory, startWorkerd } from './helpers/workerd.mjs';
import { startHub } from '../hub/server.mjs';

const { combineAdapters, planRemote, translateAdapter } = pb;
const skip = hasWorkerd ? false : 'workerd is not installed (npm ci)';
const dir = mkdtempSync(join(tmpdir(), 'pb-router-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
const router = join(repoRoot, 'examples', 'adapter-router', 'worker.mjs');
const SECRET = 'router-secret';
const MiB = (n) => `${(n / 2 ** 20).toFixed(1)} MiB`;

async function writeBase(path) {
  await writeSingleBase(path);
  // LLaMA-shaped: the GGUF writer needs the architecture and llama.cpp's q/k row order the head counts.
  const config = { architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: 512, num_attention_heads: 8, num_key_value_heads: 4 };
  writeFileSync(join(path, 'config.json'), JSON.stringify(config));
}

async function startRouter(t, hub, bindings = {}) {
  return startWorkerd(t, {
    worker: router,
    dir,
    bindings: { HF_ENDPOINT: hub.endpoint, ACCESS_SECRET: SECRET, ...bindings },
    durableObjects: { REGISTRY: 'AdapterRegistry' },
  });
}

const auth = { Authorization: `Bearer ${SECRET}` };
const post = (url, body, headers = auth) => fetch(`${url}/adapters`, { method: 'POST', headers: { ...headers, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
const get = (url, path) => fetch(`${url}${path}`, { headers: auth });
const bytesOf = async (res) => new Uint8Array(await res.arrayBuffer());
const same = (a, b) => Buffer.from(a).equals(Buffer.from(b));

test('router: registry in a Durable Object, validation, PEFT / composition / GGUF files equal to combine and translate, the secret', { skip }, async (t) => {
  await writeBase(join(dir, 'base'));
  await writeAdapter(join(dir, 'sql'));
  await writeAdapter(join(dir, 'chat'), { rank: 16 });
  await writeAdapter(join(dir, 'narrow'), { hidden: 256 }); // another model's adapter
  const hub = await startHub({ files: { 'me/base': join(dir, 'base'), 'me/sql': join(dir, 'sql'), 'me/chat': join(dir, 'chat'), 'me/narrow': join(dir, 'narrow') } });
  t.after(() => hub.close());
  const worker = await startRouter(t, hub);
  const { url } = worker;
  t.after(() => process.env.PB_DEBUG && console.error(worker.log().slice(-4000)));
  const o = { endpoint: hub.endpoint };

  // Without the secret: nothing.
  assert.equal((await fetch(`${url}/adapters`)).status, 401);
  assert.equal((await post(url, { id: 'sql', repo: 'me/sql', base: 'me/base' }, {})).status, 401);

  // Registration: validated against the base, commits pinned; a bad one fails with merge --dry-run's error.
  const reg = await post(url, { id: 'sql', repo: 'me/sql', base: 'me/base', scale: 1 });
  const entry = await reg.json();
  assert.equal(reg.status, 201, JSON.stringify(entry));
  assert.equal(entry.revision, hub.commit('me/sql'));
  assert.equal(entry.base.revision, hub.commit('me/base'));
  assert.equal(entry.modules, 12);
  assert.equal((await post(url, { id: 'chat', repo: 'me/chat', base: 'me/base', scale: 0.5 })).status, 201);
  const bad = await post(url, { id: 'narrow', repo: 'me/narrow', base: 'me/base' });
  const badBody = await bad.json();
  const want = await planRemote({ ...o, base: { repo: 'me/base' }, adapter: { repo: 'me/narrow' } }).then(() => null, (e) => e);
  assert.equal(bad.status, 422);
  assert.equal(badBody.error.code, want.code);
  assert.equal(badBody.error.message, want.message);
  assert.equal((await post(url, { id: '../x', repo: 'me/sql', base: 'me/base' })).status, 400);

  const list = await (await get(url, '/adapters')).json();
  assert.deepEqual(list.adapters.map((a) => [a.id, a.repo, a.scale]), [['chat', 'me/chat', 0.5], ['sql', 'me/sql', 1]]);

  // One adapter as PEFT files: combine --method cat of it alone at its scale.
  const one = await combineAdapters([{ repo: 'me/chat' }], { ...o, method: 'cat', weights: [0.5], dtype: 'f32' });
  const file = (r, name) => r.files.find((f) => f.name === name).bytes;
  const weights = await get(url, '/adapters/chat/peft/adapter_model.safetensors');
  assert.equal(weights.status, 200);
  assert.equal(weights.headers.get('content-length'), String(file(one, 'adapter_model.safetensors').length));
  assert.ok(same(await bytesOf(weights), file(one, 'adapter_model.safetensors')), 'one adapter: weights');
  assert.equal(await (await get(url, '/adapters/chat/peft/adapter_config.json')).text(), new TextDecoder().decode(file(one, 'adapter_config.json')));

  // A per-request composition with scales (bf16): combine --method cat --weights 0.7,-0.3 --dtype bf16.
  const two = await combineAdapters([{ repo: 'me/sql' }, { repo: 'me/chat' }], { ...o, method: 'cat', weights: [0.7, -0.3], dtype: 'bf16' });
  const composed = await get(url, '/compose/peft/adapter_model.safetensors?adapters=sql:0.7,chat:-0.3&dtype=bf16');
  assert.equal(composed.status, 200);
  assert.ok(same(await bytesOf(composed), file(two, 'adapter_model.safetensors')), 'composition: weights');
  const config = await (await get(url, '/compose/peft/adapter_config.json?adapters=sql:0.7,chat:-0.3&dtype=bf16')).text();
  assert.equal(config, new TextDecoder().decode(file(two, 'adapter_config.json')));
  assert.equal((await get(url, '/compose/peft/adapter_model.safetensors?adapters=nope:1')).status, 400);

  // GGUF LoRA for llama-server: translate --to gguf with the base's config.
  const gguf = await get(url, '/adapters/sql/gguf');
  assert.equal(gguf.status, 200);
  const translated = await translateAdapter({ repo: 'me/sql' }, { ...o, to: 'gguf', baseConfig: readFileSync(join(dir, 'base', 'config.json'), 'utf8') });
  assert.ok(same(await bytesOf(gguf), translated.files.find((f) => f.name.endsWith('.gguf')).bytes), 'gguf');

  // The registry outlives the isolate's cache; unregistering removes it.
  assert.equal((await fetch(`${url}/adapters/sql`, { method: 'DELETE', headers: auth })).status, 200);
  assert.equal((await get(url, '/adapters/sql')).status, 404);
  assert.equal((await get(url, '/adapters/sql/peft/adapter_model.safetensors')).status, 404);

  // A router without a secret: read-only, and registering is refused.
  const open = await startWorkerd(t, { worker: router, dir, bindings: { HF_ENDPOINT: hub.endpoint }, durableObjects: { REGISTRY: 'AdapterRegistry' } });
  assert.equal((await post(open.url, { id: 'sql', repo: 'me/sql', base: 'me/base' }, {})).status, 403);
});


test('router load: N concurrent requests over M adapters larger in sum than the budget', { skip }, async (t) => {
  const M = 8;
  const N = 64;
  const budgetMiB = 4;
  const files = { 'me/base': join(dir, 'base') };
  await writeBase(join(dir, 'base'));
  for (let i = 0; i < M; ++i) {
    await writeAdapter(join(dir, `load-${i}`), { rank: 32 }); // 12 modules, 1.5 MiB of f32 factors
    files[`me/load-${i}`] = join(dir, `load-${i}`);
  }
  const hub = await startHub({ files });
  t.after(() => hub.close());
  const worker = await startRouter(t, hub, { CACHE_BUDGET_MB: String(budgetMiB), MAX_ACTIVE: process.env.PB_MAX_ACTIVE ?? '4' });
  t.after(() => process.env.PB_DEBUG && console.error(worker.log().slice(-3000)));
  for (let i = 0; i < M; ++i) assert.equal((await post(worker.url, { id: `a${i}`, repo: `me/load-${i}`, base: 'me/base' })).status, 201);
  const ready = processMemory(worker.pid);

  // Each request: one adapter or a composition of two or three, picked by a fixed sequence; all at once.
  const requests = Array.from({ length: N }, (_, k) => {
    const n = 1 + (k % 3);
    const ids = Array.from({ length: n }, (_, j) => `a${(k * 5 + j * 3) % M}:${(0.5 + j * 0.25).toFixed(2)}`);
    return n === 1 ? `/adapters/a${(k * 5) % M}/peft/adapter_model.safetensors` : `/compose/peft/adapter_model.safetensors?adapters=${ids.join(',')}`;
  });
  const started = performance.now();
  const stagger = Number(process.env.PB_ROUTER_STAGGER_MS ?? 0);
  const latencies = await Promise.all(
    requests.map(async (path, k) => {
      if (stagger) await new Promise((resolve) => setTimeout(resolve, k * stagger));
      const t0 = performance.now();
      const res = await get(worker.url, path);
      const body = await bytesOf(res);
      assert.equal(res.status, 200, `${path}: ${new TextDecoder().decode(body.subarray(0, 300))}`);
      assert.equal(body.length, Number(res.headers.get('content-length')));
      return performance.now() - t0;
    }),
  );
  const wall = performance.now() - started;
  const { cache } = await (await get(worker.url, '/adapters')).json();
  const peak = processMemory(worker.pid);
  const heap = Number(await (await fetch(`${worker.url}/__heap`)).text());
  latencies.sort((a, b) => a - b);
  const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))].toFixed(0);
  const hitRate = cache.hits / (cache.hits + cache.misses);
  t.diagnostic(
    `${N} concurrent requests over ${M} adapters (12 MiB of f32 factors, budget ${budgetMiB} MiB): ${wall.toFixed(0)} ms wall; ` +
      `latency p50 ${pct(50)} ms, p95 ${pct(95)} ms, max ${pct(100)} ms; cache hits ${cache.hits}, misses ${cache.misses} ` +
      `(hit rate ${(100 * hitRate).toFixed(1)}%), shared fetches ${cache.shared}, evictions ${cache.evictions}, ` +
      `peak resident + in flight ${MiB(cache.peakResidentBytes)}, ${MiB(cache.bytesFetched)} fetched; ` +
      `workerd RSS ${MiB(ready.rss)} ready, peak ${MiB(peak.hwm)} (+${MiB(peak.hwm - ready.rss)}); WASM heap ${MiB(heap)}`,
  );
  assert.ok(cache.peakResidentBytes <= budgetMiB * 2 ** 20, `peak ${cache.peakResidentBytes}`);
  assert.ok(cache.evictions > 0, 'the adapters do not fit: some were evicted');
  // Cloudflare's 128 MB is the isolate's (JS heap, WASM memory, buffers), not workerd's process, which holds
  // ~100 MiB of its own here before any request (the runtime, the compiled module): the growth is the isolate's.
  // Most of it is V8's lazily collected ArrayBuffers (fetched spans, factor copies, output chunks), as in
  // edge-worker.test.mjs, where a plain download through the worker grows about as much.
  assert.ok(peak.hwm - ready.rss < 128 * 2 ** 20, `workerd grew by ${MiB(peak.hwm - ready.rss)}`);
  assert.ok(heap <= 32 * 2 ** 20, `WASM heap ${MiB(heap)}`);
});
