// examples/adapter-router in real workerd against the local Hub stand-in: the registry in a SQLite Durable Object,
// registration validated against the base (merge --dry-run's error), every adapter and a weighted composition served
// as the PEFT files `combine --method cat` writes (byte for byte) and as the GGUF LoRA `translate --to gguf` writes,
// through the adapter cache; the ACCESS_SECRET guard; and a load test (N concurrent requests over M adapters larger
// in sum than the cache's budget) reporting workerd's memory, the cache's hit rate and the latencies.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
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
  const config = {
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    hidden_size: 512,
    num_attention_heads: 8,
    num_key_value_heads: 4,
  };
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
const post = (url, body, headers = auth) =>
  fetch(`${url}/adapters`, {
    method: 'POST',
    headers: { ...headers, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
const get = (url, path, init = {}) => fetch(`${url}${path}`, { headers: auth, ...init });
const bytesOf = async (res) => new Uint8Array(await res.arrayBuffer());
const same = (a, b) => Buffer.from(a).equals(Buffer.from(b));

test(
  'router: registry in a Durable Object, validation, PEFT / composition / GGUF files equal to combine and translate, the secret',
  { skip },
  async (t) => {
    await writeBase(join(dir, 'base'));
    await writeAdapter(join(dir, 'sql'));
    await writeAdapter(join(dir, 'chat'), { rank: 16 });
    await writeAdapter(join(dir, 'narrow'), { hidden: 256 }); // another model's adapter
    const hub = await startHub({
      files: {
        'me/base': join(dir, 'base'),
        'me/sql': join(dir, 'sql'),
        'me/chat': join(dir, 'chat'),
        'me/narrow': join(dir, 'narrow'),
      },
    });
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
    const want = await planRemote({ ...o, base: { repo: 'me/base' }, adapter: { repo: 'me/narrow' } }).then(
      () => null,
      (e) => e,
    );
    assert.equal(bad.status, 422);
    assert.equal(badBody.error.code, want.code);
    assert.equal(badBody.error.message, want.message);
    assert.equal((await post(url, { id: '../x', repo: 'me/sql', base: 'me/base' })).status, 400);

    const list = await (await get(url, '/adapters')).json();
    assert.deepEqual(
      list.adapters.map((a) => [a.id, a.repo, a.scale]),
      [
        ['chat', 'me/chat', 0.5],
        ['sql', 'me/sql', 1],
      ],
    );

    // One adapter as PEFT files: combine --method cat of it alone at its scale.
    const one = await combineAdapters([{ repo: 'me/chat' }], { ...o, method: 'cat', weights: [0.5], dtype: 'f32' });
    const file = (r, name) => r.files.find((f) => f.name === name).bytes;
    const weights = await get(url, '/adapters/chat/peft/adapter_model.safetensors');
    assert.equal(weights.status, 200);
    assert.equal(weights.headers.get('content-length'), String(file(one, 'adapter_model.safetensors').length));
    assert.ok(same(await bytesOf(weights), file(one, 'adapter_model.safetensors')), 'one adapter: weights');
    assert.equal(
      await (await get(url, '/adapters/chat/peft/adapter_config.json')).text(),
      new TextDecoder().decode(file(one, 'adapter_config.json')),
    );

    // A per-request composition with scales (bf16): combine --method cat --weights 0.7,-0.3 --dtype bf16.
    const two = await combineAdapters([{ repo: 'me/sql' }, { repo: 'me/chat' }], {
      ...o,
      method: 'cat',
      weights: [0.7, -0.3],
      dtype: 'bf16',
    });
    const composed = await get(url, '/compose/peft/adapter_model.safetensors?adapters=sql:0.7,chat:-0.3&dtype=bf16');
    assert.equal(composed.status, 200);
    assert.ok(same(await bytesOf(composed), file(two, 'adapter_model.safetensors')), 'composition: weights');
    const config = await (
      await get(url, '/compose/peft/adapter_config.json?adapters=sql:0.7,chat:-0.3&dtype=bf16')
    ).text();
    assert.equal(config, new TextDecoder().decode(file(two, 'adapter_config.json')));
    assert.equal((await get(url, '/compose/peft/adapter_model.safetensors?adapters=nope:1')).status, 400);

    // GGUF LoRA for llama-server: translate --to gguf with the base's config.
    const gguf = await get(url, '/adapters/sql/gguf');
    assert.equal(gguf.status, 200);
    const translated = await translateAdapter(
      { repo: 'me/sql' },
      { ...o, to: 'gguf', baseConfig: readFileSync(join(dir, 'base', 'config.json'), 'utf8') },
    );
    assert.ok(same(await bytesOf(gguf), translated.files.find((f) => f.name.endsWith('.gguf')).bytes), 'gguf');

    // The registry outlives the isolate's cache; unregistering removes it.
    assert.equal((await fetch(`${url}/adapters/sql`, { method: 'DELETE', headers: auth })).status, 200);
    assert.equal((await get(url, '/adapters/sql')).status, 404);
    assert.equal((await get(url, '/adapters/sql/peft/adapter_model.safetensors')).status, 404);

    // A router without a secret: read-only, and registering is refused.
    const open = await startWorkerd(t, {
      worker: router,
      dir,
      bindings: { HF_ENDPOINT: hub.endpoint },
      durableObjects: { REGISTRY: 'AdapterRegistry' },
    });
    assert.equal((await post(open.url, { id: 'sql', repo: 'me/sql', base: 'me/base' }, {})).status, 403);
  },
);

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
  // SLOT_WAIT_MS: here every request queues for a slot as long as it takes (the latencies below).
  const worker = await startRouter(t, hub, {
    CACHE_BUDGET_MB: String(budgetMiB),
    MAX_ACTIVE: process.env.PB_MAX_ACTIVE ?? '4',
    SLOT_WAIT_MS: '600000',
  });
  t.after(() => process.env.PB_DEBUG && console.error(worker.log().slice(-3000)));
  for (let i = 0; i < M; ++i)
    assert.equal((await post(worker.url, { id: `a${i}`, repo: `me/load-${i}`, base: 'me/base' })).status, 201);
  const ready = processMemory(worker.pid);

  // Each request: one adapter or a composition of two or three, picked by a fixed sequence; all at once.
  const requests = Array.from({ length: N }, (_, k) => {
    const n = 1 + (k % 3);
    const ids = Array.from({ length: n }, (_, j) => `a${(k * 5 + j * 3) % M}:${(0.5 + j * 0.25).toFixed(2)}`);
    return n === 1
      ? `/adapters/a${(k * 5) % M}/peft/adapter_model.safetensors`
      : `/compose/peft/adapter_model.safetensors?adapters=${ids.join(',')}`;
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

test(
  'router: HF_TOKEN goes to HF_ENDPOINT only; a registration names another server only if ALLOWED_ENDPOINTS lists it',
  { skip },
  async (t) => {
    await writeBase(join(dir, 'base'));
    await writeAdapter(join(dir, 'sql'));
    const files = { 'me/base': join(dir, 'base'), 'me/sql': join(dir, 'sql') };
    const hub = await startHub({ files });
    const other = await startHub({ files }); // another origin (another port), serving the same repos
    t.after(() => Promise.all([hub.close(), other.close()]));
    const HF_TOKEN = 'hf_router_token';
    const sentToken = (h) => h.requests.filter((r) => r.auth === `Bearer ${HF_TOKEN}`).length;

    const strict = await startRouter(t, hub, { HF_TOKEN });
    for (const body of [
      { id: 'b1', repo: 'me/sql', base: { repo: 'me/base', endpoint: other.endpoint } },
      { id: 'b2', repo: 'me/sql', endpoint: other.endpoint, base: 'me/base' },
      { id: 'b3', repo: 'me/sql', endpoint: 'file:///etc', base: 'me/base' },
    ]) {
      const res = await post(strict.url, body);
      const answer = await res.json();
      assert.equal(res.status, 400, JSON.stringify(answer));
      assert.equal(answer.error.code, 'InvalidArgument');
      assert.match(
        answer.error.message,
        /^`endpoint` `[^`]+` is not allowed: this worker reads from its Hub \(http:\/\/127\.0\.0\.1:\d+\) only \(ALLOWED_ENDPOINTS lists other servers\)$/,
      );
    }
    assert.equal(other.requests.length, 0, 'nothing was sent to the other server');

    // Allowed: read there, without the worker's token (which still goes to HF_ENDPOINT, for the adapter).
    const open = await startRouter(t, hub, {
      HF_TOKEN,
      ALLOWED_ENDPOINTS: `https://example.invalid, ${other.endpoint}`,
    });
    const res = await post(open.url, {
      id: 'sql',
      repo: 'me/sql',
      base: { repo: 'me/base', endpoint: other.endpoint },
    });
    const entry = await res.json();
    assert.equal(res.status, 201, JSON.stringify(entry));
    assert.equal(entry.base.endpoint, other.endpoint);
    assert.ok(other.requests.length > 0, 'the base was read from the other server');
    assert.equal(sentToken(other), 0, 'HF_TOKEN never went to the other server');
    assert.ok(sentToken(hub) > 0, 'HF_TOKEN went to HF_ENDPOINT');
    assert.deepEqual((await (await get(open.url, '/adapters/sql')).json()).base, {
      repo: 'me/base',
      revision: other.commit('me/base'),
      endpoint: other.endpoint,
    });
    const weights = await get(open.url, '/adapters/sql/peft/adapter_model.safetensors');
    assert.equal(weights.status, 200);
    await weights.arrayBuffer();
    assert.equal(sentToken(other), 0);
    // The adapter itself on the other server: read there without the token too.
    const moved = await post(open.url, { id: 'sql2', repo: 'me/sql', endpoint: other.endpoint, base: 'me/base' });
    assert.equal(moved.status, 201, await moved.text());
    assert.equal(
      (await (await get(open.url, '/adapters/sql2/peft/adapter_model.safetensors')).arrayBuffer()).byteLength > 0,
      true,
    );
    assert.equal(sentToken(other), 0);
  },
);

test('router: a malformed percent-encoding in the path is 400', { skip }, async (t) => {
  const hub = await startHub({ files: {} });
  t.after(() => hub.close());
  const worker = await startRouter(t, hub);
  for (const path of [
    '/adapters/%E0%A4%A',
    '/adapters/%zz/peft/adapter_config.json',
    '/compose/%/adapter_config.json',
  ]) {
    const res = await get(worker.url, path);
    const body = await res.json();
    assert.equal(res.status, 400, `${path}: ${JSON.stringify(body)}`);
    assert.equal(body.error.code, 'InvalidArgument');
    assert.match(body.error.message, /has a malformed percent-encoding$/);
  }
});

test(
  'router bounds: terms (400), rank and response size (413), registrations (507); the WASM heap stays small',
  { skip },
  async (t) => {
    await writeBase(join(dir, 'base'));
    const files = { 'me/base': join(dir, 'base') };
    for (const [name, rank] of [
      ['r8', 8],
      ['r32', 32],
      ['r64', 64],
    ]) {
      await writeAdapter(join(dir, name), { rank });
      files[`me/${name}`] = join(dir, name);
    }
    const hub = await startHub({ files });
    t.after(() => hub.close());
    const worker = await startRouter(t, hub, {
      MAX_TERMS: '4',
      MAX_RANK: '96',
      MAX_RESPONSE_MB: '3',
      MAX_ADAPTERS: '2',
    });
    assert.equal((await post(worker.url, { id: 'small', repo: 'me/r8', base: 'me/base' })).status, 201);
    assert.equal((await post(worker.url, { id: 'big', repo: 'me/r64', base: 'me/base' })).status, 201);
    const third = await post(worker.url, { id: 'third', repo: 'me/r32', base: 'me/base' });
    const refused = await third.json();
    assert.equal(third.status, 507, JSON.stringify(refused));
    assert.deepEqual(refused.error, {
      code: 'LimitExceeded',
      message: 'the registry holds 2 adapters, its maximum (MAX_ADAPTERS): unregister one first',
    });

    // 1,000 terms over 2 adapters: refused before anything is read or composed.
    const many = Array.from({ length: 1000 }, (_, i) => (i % 2 ? 'small:0.5' : 'big:0.5')).join(',');
    const started = performance.now();
    const res = await get(worker.url, `/compose/peft/adapter_model.safetensors?adapters=${many}`);
    const body = await res.json();
    assert.equal(res.status, 400, JSON.stringify(body).slice(0, 300));
    assert.deepEqual(body.error, {
      code: 'InvalidArgument',
      message: 'a composition of 1000 adapters: at most 4 may be composed at once (maxTerms)',
    });
    assert.ok(performance.now() - started < 5000);

    // Within the terms, over the rank: 64 + 64 > 96.
    const rank = await get(worker.url, '/compose/peft/adapter_config.json?adapters=big:1,big:1');
    assert.equal(rank.status, 413);
    assert.deepEqual((await rank.json()).error, {
      code: 'LimitExceeded',
      message: 'the composed adapter would have rank 128, more than the limit of 96 (maxRank)',
    });
    // Within the rank, over the size: rank 80 on 12 modules of f32 is 3.4 MiB > 3 MiB; in bf16 it fits.
    const size = await get(worker.url, '/compose/peft/adapter_model.safetensors?adapters=big:1,small:1,small:1');
    const sizeBody = await size.json();
    assert.equal(size.status, 413, JSON.stringify(sizeBody));
    assert.equal(sizeBody.error.code, 'LimitExceeded');
    assert.match(
      sizeBody.error.message,
      /^the composed adapter would be \d+ bytes, more than the limit of 3145728 bytes \(maxComposeBytes\)$/,
    );
    const fits = await get(
      worker.url,
      '/compose/peft/adapter_model.safetensors?adapters=big:1,small:1,small:1&dtype=bf16',
    );
    assert.equal(fits.status, 200);
    assert.equal((await fits.arrayBuffer()).byteLength, Number(fits.headers.get('content-length')));
    const heap = Number(await (await fetch(`${worker.url}/__heap`)).text());
    t.diagnostic(`WASM heap after the refused compositions: ${MiB(heap)}`);
    assert.ok(heap <= 32 * 2 ** 20, `WASM heap ${MiB(heap)}`);
  },
);

/** A GET whose answer is never read: the socket is paused once the request is sent (a client that went quiet). */
function neverRead(url, path) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${SECRET}\r\n\r\n`);
      socket.once('data', () => {
        socket.pause(); // the head (and a first chunk) arrived: read nothing more
        resolve(socket);
      });
    });
    socket.once('error', reject);
  });
}

test(
  'router slots: clients that never read the body do not hold the slots past STALL_MS; a full router answers 503 after SLOT_WAIT_MS',
  { skip, timeout: 120000 },
  async (t) => {
    await writeBase(join(dir, 'base'));
    const files = { 'me/base': join(dir, 'base') };
    for (let i = 0; i < 4; ++i) {
      // 5.5 MB of f32 factors each: a composition of 4 is 22 MB, more than the sockets' buffers hold
      await writeAdapter(join(dir, `slow-${i}`), { rank: 128 });
      files[`me/slow-${i}`] = join(dir, `slow-${i}`);
    }
    const hub = await startHub({ files });
    t.after(() => hub.close());
    const path = '/compose/peft/adapter_model.safetensors?adapters=s0,s1,s2,s3';
    const sockets = [];
    t.after(() => sockets.forEach((s) => s.destroy()));
    for (const [stall, wait] of [
      [60000, 1000],
      [1500, 20000],
    ]) {
      const worker = await startRouter(t, hub, {
        MAX_ACTIVE: '4',
        STALL_MS: String(stall),
        SLOT_WAIT_MS: String(wait),
        CACHE_BUDGET_MB: '32',
      });
      for (let i = 0; i < 4; ++i)
        assert.equal((await post(worker.url, { id: `s${i}`, repo: `me/slow-${i}`, base: 'me/base' })).status, 201);
      for (let i = 0; i < 4; ++i) sockets.push(await neverRead(worker.url, path));
      const started = performance.now();
      const res = await get(worker.url, path, { signal: AbortSignal.timeout(30000) });
      const took = performance.now() - started;
      if (stall === 60000) {
        // Every slot held by a quiet client: the next request waits SLOT_WAIT_MS, then 503 with Retry-After.
        const body = await res.json();
        assert.equal(res.status, 503, JSON.stringify(body));
        assert.deepEqual(body.error, {
          code: 'Busy',
          message: 'every one of the 4 slots (MAX_ACTIVE) stayed busy for 1000 ms (SLOT_WAIT_MS): retry later',
        });
        assert.equal(res.headers.get('retry-after'), '1');
        assert.ok(took >= 900 && took < 10000, `${took.toFixed(0)} ms`);
      } else {
        // The quiet clients lose their slots after STALL_MS: the request is served.
        assert.equal(res.status, 200);
        const bytes = await res.arrayBuffer();
        assert.equal(bytes.byteLength, Number(res.headers.get('content-length')));
        t.diagnostic(`served after ${took.toFixed(0)} ms with 4 quiet clients (STALL_MS ${stall})`);
        assert.ok(took < 20000, `${took.toFixed(0)} ms`);
      }
      sockets.splice(0).forEach((s) => s.destroy());
    }
  },
);

test(
  'router: a trap inside the module during one request does not outlive it: later requests answer 200, same bytes',
  { skip },
  async (t) => {
    await writeBase(join(dir, 'trap-base'));
    await writeAdapter(join(dir, 'trap-sql'));
    await writeAdapter(join(dir, 'trap-chat'), { rank: 16 });
    const hub = await startHub({
      files: { 'me/base': join(dir, 'trap-base'), 'me/sql': join(dir, 'trap-sql'), 'me/chat': join(dir, 'trap-chat') },
    });
    t.after(() => hub.close());
    const { url } = await startRouter(t, hub);
    assert.equal((await post(url, { id: 'sql', repo: 'me/sql', base: 'me/base' })).status, 201);
    assert.equal((await post(url, { id: 'chat', repo: 'me/chat', base: 'me/base', scale: 0.5 })).status, 201);
    const composed = async () => {
      const res = await get(url, '/compose/peft/adapter_model.safetensors?adapters=sql:0.7,chat:-0.3&dtype=bf16');
      return { status: res.status, bytes: await bytesOf(res) };
    };
    const before = await composed();
    assert.equal(before.status, 200);
    const one = await bytesOf(await get(url, '/adapters/chat/peft/adapter_model.safetensors'));

    // A trap in the isolate's instance, which holds the cache's registrations: the next request gets a new cache.
    assert.match(await (await fetch(`${url}/__trap`)).text(), /^RuntimeError: memory access out of bounds/);
    const after = await composed();
    assert.equal(after.status, 200, Buffer.from(after.bytes).toString().slice(0, 500));
    assert.ok(same(after.bytes, before.bytes), 'the composition after the trap, byte for byte');
    // A trap inside a request's own composition (its `new ComposeLayout()`): that request fails, the next ones do not.
    assert.equal(await (await fetch(`${url}/__trap?in=ComposeLayout`)).text(), 'armed');
    const trapped = await get(url, '/compose/peft/adapter_config.json?adapters=sql:0.7,chat:-0.3&dtype=bf16');
    assert.equal(trapped.status, 500);
    assert.match((await trapped.json()).error.message, /memory access out of bounds/);
    const again = await composed();
    assert.equal(again.status, 200, Buffer.from(again.bytes).toString().slice(0, 500));
    assert.ok(same(again.bytes, before.bytes), 'the composition after the trapping request, byte for byte');
    assert.ok(same(await bytesOf(await get(url, '/adapters/chat/peft/adapter_model.safetensors')), one), 'one adapter');
    const list = await (await get(url, '/adapters')).json();
    assert.deepEqual(
      list.adapters.map((a) => a.id),
      ['chat', 'sql'],
    );
  },
);
