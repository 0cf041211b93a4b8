// createAdapterCache (web/src/edge/adapter-cache.js, docs/adapter-cache.md) against the local fake Hub
// (tests/hub/server.mjs): registration reads headers and configs only and fails as `merge --dry-run`; one Range
// request per module; concurrent requests share one fetch; the budget is never exceeded; LRU eviction order; dtype
// conversion = the core's convert; compose = Σ scale·s·B·A (float64 reference) and = combine's cat bytes; applyTo
// one adapter = merge's bytes; a revision change and unregister drop what they should.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { collect, hasNativeCli, nativeCli, pb, rejectsWith, rng } from './helpers/common.mjs';
import { writeAdapter, writeShardedBase, writeSingleBase } from './helpers/remote-model.mjs';
import { startHub } from '../hub/server.mjs';

const { createAdapterCache, readTensor, convert, combineAdapters, createMergeStream, planRemote, writeSafetensors } =
  pb;

const HIDDEN = 512;
const dir = mkdtempSync(join(tmpdir(), 'pb-cache-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
await writeShardedBase(join(dir, 'base'));
await writeSingleBase(join(dir, 'single'));
await writeAdapter(join(dir, 'sql')); // F32, r 8, alpha 16, q_proj and v_proj of 6 layers
await writeAdapter(join(dir, 'narrow'), { hidden: 256 }); // the adapter of another model: shapes differ

// A BF16 rsLoRA adapter, r 4 (q_proj of layers 0-5: 16 by rank_pattern), alpha 8, with q_proj and up_proj.
async function writeChat(path) {
  mkdirSync(path, { recursive: true });
  const random = rng(11);
  const bf16 = (n) => {
    const f = Float32Array.from({ length: n }, () => (random() * 2 - 1) * 0.05);
    const u = new Uint16Array(n);
    const bits = new Uint32Array(f.buffer);
    for (let i = 0; i < n; ++i) u[i] = bits[i] >>> 16; // truncation: any bf16 values do
    return new Uint8Array(u.buffer);
  };
  const tensors = [];
  for (let l = 0; l < 6; ++l) {
    for (const [proj, out, kind] of [
      ['q_proj', HIDDEN, 'self_attn'],
      ['up_proj', HIDDEN * 4, 'mlp'],
    ]) {
      const r = l === 0 && proj === 'q_proj' ? 16 : 4;
      const key = `base_model.model.model.layers.${l}.${kind}.${proj}`;
      tensors.push({ name: `${key}.lora_A.weight`, dtype: 'BF16', shape: [r, HIDDEN], data: bf16(r * HIDDEN) });
      tensors.push({ name: `${key}.lora_B.weight`, dtype: 'BF16', shape: [out, r], data: bf16(out * r) });
    }
  }
  writeFileSync(join(path, 'adapter_model.safetensors'), await collect(writeSafetensors({ tensors })));
  writeFileSync(
    join(path, 'adapter_config.json'),
    JSON.stringify({
      peft_type: 'LORA',
      r: 4,
      lora_alpha: 8,
      use_rslora: true,
      target_modules: ['q_proj', 'up_proj'],
      rank_pattern: { 'model.layers.0.self_attn.q_proj': 16 },
    }),
  );
}
await writeChat(join(dir, 'chat'));

const files = (name) => join(dir, name);
const Q0 = 'model.layers.0.self_attn.q_proj';
const exactly = (text) => new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);

async function withHub(fn) {
  const hub = await startHub({
    files: {
      'me/base': files('base'),
      'me/single': files('single'),
      'me/sql': files('sql'),
      'me/chat': files('chat'),
      'me/narrow': files('narrow'),
    },
  });
  try {
    return await fn(hub, { endpoint: hub.endpoint, retryDelay: 10 });
  } finally {
    await hub.close();
  }
}

const f32 = (bytes) => new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
const bf16ToF32 = (bytes) => {
  const u = new Uint16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
  const out = new Float32Array(u.length);
  new Uint32Array(out.buffer).set(Array.from(u, (x) => x << 16));
  return out;
};

test('register reads headers and configs only; one Range request per module; hits read nothing', async () => {
  await withHub(async (hub, o) => {
    const cache = createAdapterCache({ ...o, budgetBytes: 64 << 20 });
    hub.clearLog();
    const info = await cache.register('sql', { repo: 'me/sql', base: { repo: 'me/base' } });
    assert.equal(info.modules, 12);
    assert.equal(info.plan.modulesMatched, 12);
    assert.equal(info.revision, hub.commit('me/sql'));
    const size = readFileSync(join(files('sql'), 'adapter_model.safetensors')).length;
    // The weights: only the first range (64 KiB) of a ~250 KiB file; no tensor bytes beyond it.
    const reads = hub.log('cdn').filter((r) => r.range && r.method === 'GET');
    for (const r of reads) assert.ok(Number(r.range.match(/bytes=(\d+)-(\d+)/)[2]) < 65536, r.range);
    assert.ok(size > 65536 * 3);
    hub.clearLog();
    const m = await cache.module('sql', 'model.layers.5.self_attn.v_proj');
    const after = hub.log('cdn').filter((r) => r.method === 'GET');
    assert.equal(after.length, 1, 'one Range request for the module');
    const [, a, b] = after[0].range.match(/bytes=(\d+)-(\d+)/).map(Number);
    assert.equal(b - a + 1, (8 * HIDDEN + (HIDDEN / 2) * 8) * 4, 'the span is A and B, coalesced');
    assert.deepEqual(m.shapes, { A: [8, HIDDEN], B: [HIDDEN / 2, 8] });
    assert.equal(m.scaling, 2);
    assert.equal(m.rank, 8);
    // The factors are the file's bytes.
    const weights = readFileSync(join(files('sql'), 'adapter_model.safetensors'));
    const key = 'base_model.model.model.layers.5.self_attn.v_proj';
    assert.deepEqual(m.A, await readTensor(new Uint8Array(weights), `${key}.lora_A.weight`));
    assert.deepEqual(m.B, await readTensor(new Uint8Array(weights), `${key}.lora_B.weight`));
    // The same module by its weight's name or PEFT key: a hit.
    hub.clearLog();
    assert.equal(await cache.module('sql', 'model.layers.5.self_attn.v_proj.weight'), m);
    assert.equal(await cache.module('sql', `${key}.lora_A.weight`), m);
    assert.equal(hub.log('cdn').length + hub.log('resolve').length, 0);
    const s = cache.stats();
    assert.deepEqual(
      [s.registered, s.entries, s.hits, s.misses, s.spanReads, s.bytesFetched, s.residentBytes],
      [1, 1, 2, 1, 1, b - a + 1, b - a + 1],
    );
    await rejectsWith(
      cache.module('sql', 'model.layers.0.mlp.up_proj'),
      'InvalidArgument',
      /hf:\/\/me\/sql has no LoRA module `model.layers.0.mlp.up_proj`/,
    );
    await rejectsWith(cache.module('nope', Q0), 'InvalidArgument', /no adapter is registered as `nope`/);
    await cache.close();
  });
});

test("registration against a mismatched base fails with merge --dry-run's error", async () => {
  await withHub(async (hub, o) => {
    const cache = createAdapterCache({ ...o, budgetBytes: 1 << 20, base: { repo: 'me/base' } });
    let expected;
    try {
      await planRemote({ ...o, base: { repo: 'me/base' }, adapter: { repo: 'me/narrow' } });
      assert.fail('planRemote should fail');
    } catch (e) {
      expected = e;
    }
    await assert.rejects(cache.register('narrow', { repo: 'me/narrow' }), (e) => {
      assert.equal(e.code, expected.code);
      assert.equal(e.message, expected.message);
      assert.deepEqual(e.problems ?? null, expected.problems ?? null);
      return true;
    });
    assert.equal(expected.code, 'ShapeMismatch');
    if (hasNativeCli) {
      const r = spawnSync(
        nativeCli,
        ['merge', '--base', files('base'), '--adapter', files('narrow'), '-o', join(dir, 'never'), '--dry-run'],
        { encoding: 'utf8' },
      );
      assert.equal(r.status, 1);
      assert.ok(r.stderr.includes(expected.message.split('\n')[0]), `${r.stderr}\nvs\n${expected.message}`);
    }
    assert.equal(cache.stats().registered, 0);
    // Without a declared base it registers (nothing to check against).
    await cache.register('narrow', { repo: 'me/narrow', base: null });
    assert.equal(cache.stats().registered, 1);
    await cache.close();
  });
});

test('concurrent requests for one module share one fetch', async () => {
  await withHub(async (hub, o) => {
    const cache = createAdapterCache({ ...o, budgetBytes: 8 << 20 });
    await cache.register('sql', { repo: 'me/sql' });
    hub.clearLog();
    // A module past the first 64 KiB (those came with the header's first read).
    const got = await Promise.all(
      Array.from({ length: 6 }, () => cache.module('sql', 'model.layers.4.self_attn.q_proj', { dtype: 'bf16' })),
    );
    for (const m of got) assert.equal(m, got[0]);
    assert.equal(hub.log('cdn').filter((r) => r.method === 'GET').length, 1);
    const s = cache.stats();
    assert.deepEqual([s.misses, s.shared, s.spanReads, s.entries], [1, 5, 1, 1]);
    await cache.close();
  });
});

test('the budget is never exceeded, in flight included, with many modules and adapters', async () => {
  await withHub(async (hub, o) => {
    // q_proj of sql in f32: (8·512 + 512·8)·4 = 32 KiB, fetched as 32 KiB; chat's up_proj (r 4, bf16 → f32) 40 KiB + 20 KiB.
    const budget = 200 * 1024;
    const cache = createAdapterCache({ ...o, budgetBytes: budget });
    await cache.register('sql', { repo: 'me/sql' });
    await cache.register('chat', { repo: 'me/chat' });
    const names = [];
    for (let l = 0; l < 6; ++l)
      names.push(
        ['sql', `model.layers.${l}.self_attn.q_proj`],
        ['sql', `model.layers.${l}.self_attn.v_proj`],
        ['chat', `model.layers.${l}.mlp.up_proj`],
        ['chat', `model.layers.${l}.self_attn.q_proj`],
      );
    let max = 0;
    const watch = () => {
      const s = cache.stats();
      max = Math.max(max, s.residentBytes + s.inFlightBytes);
    };
    for (let round = 0; round < 3; ++round) {
      await Promise.all(
        names.map(async ([id, name], i) => {
          const m = await cache.module(id, name, { dtype: ['f32', 'bf16', 'f16'][(i + round) % 3] });
          watch();
          return m;
        }),
      );
    }
    const s = cache.stats();
    assert.ok(s.peakResidentBytes <= budget, `${s.peakResidentBytes} > ${budget}`);
    assert.ok(max <= budget);
    assert.ok(s.residentBytes <= budget);
    assert.ok(s.evictions > 0);
    assert.equal(s.inFlightBytes, 0);
    assert.ok(s.peakResidentBytes > budget / 2, 'the budget is used');
    // A module larger than the budget fails precisely, before any request.
    const small = createAdapterCache({ ...o, budgetBytes: 40000 });
    await small.register('sql', { repo: 'me/sql' });
    hub.clearLog();
    await rejectsWith(
      small.module('sql', Q0),
      'InvalidArgument',
      /hf:\/\/me\/sql: module `model.layers.0.self_attn.q_proj` needs 65536 bytes \(32768 of f32 factors, 32768 fetched\), more than the cache's budget of 40000 bytes/,
    );
    assert.equal(hub.log('cdn').length, 0);
    await small.close();
    await cache.close();
  });
});

test('least recently used entries are evicted first', async () => {
  await withHub(async (hub, o) => {
    const c = 32 * 1024; // one q_proj of sql in f32, and its span
    const cache = createAdapterCache({ ...o, budgetBytes: 3 * c });
    await cache.register('sql', { repo: 'me/sql' });
    const q = (l) => `model.layers.${l}.self_attn.q_proj`;
    await cache.module('sql', q(0)); // resident: 0
    await cache.module('sql', q(1)); // resident: 0 1 (a third needs c + its span: one goes)
    await cache.module('sql', q(0)); // hit; order: 1 0
    await cache.module('sql', q(2)); // evicts 1: resident 0 2
    let s = cache.stats();
    assert.deepEqual([s.hits, s.misses, s.evictions, s.entries], [1, 3, 1, 2]);
    await cache.module('sql', q(0)); // hit
    await cache.module('sql', q(1)); // miss: evicts 2 (0 was used after it)
    await cache.module('sql', q(0)); // hit
    s = cache.stats();
    assert.deepEqual([s.hits, s.misses, s.evictions], [3, 4, 2]);
    assert.equal(s.peakResidentBytes, 3 * c);
    await cache.close();
  });
});

test("dtype negotiation: the bytes of the core's convert", async () => {
  await withHub(async (hub, o) => {
    const cache = createAdapterCache({ ...o, budgetBytes: 8 << 20, dtype: 'bf16' });
    await cache.register('sql', { repo: 'me/sql' });
    await cache.register('chat', { repo: 'me/chat' });
    for (const [id, folder, dtype] of [
      ['sql', 'sql', 'bf16'],
      ['sql', 'sql', 'f16'],
      ['chat', 'chat', 'f32'],
      ['chat', 'chat', 'f16'],
    ]) {
      const weights = new Uint8Array(readFileSync(join(files(folder), 'adapter_model.safetensors')));
      const converted = await collect(convert(weights, { dtype }));
      const m = await cache.module(id, Q0, dtype === 'bf16' ? {} : { dtype });
      assert.equal(m.dtype, dtype);
      assert.deepEqual(m.A, await readTensor(converted, `base_model.model.${Q0}.lora_A.weight`), `${id} ${dtype}`);
      assert.deepEqual(m.B, await readTensor(converted, `base_model.model.${Q0}.lora_B.weight`), `${id} ${dtype}`);
    }
    // One fetch per (module, dtype): the dtypes are separate entries.
    assert.equal(cache.stats().entries, 4);
    await cache.close();
  });
});

test("compose: exactly Σ scale·s·B·A (float64 reference), and combine --method cat's bytes", async () => {
  await withHub(async (hub, o) => {
    const cache = createAdapterCache({ ...o, budgetBytes: 8 << 20 });
    await cache.register('sql', { repo: 'me/sql' });
    await cache.register('chat', { repo: 'me/chat' });
    const list = [
      { id: 'sql', scale: 0.7 },
      { id: 'chat', scale: -0.3 },
    ];
    const d = await cache.compose(list, Q0, { dtype: 'f32' });
    assert.equal(d.rank, 8 + 16);
    assert.deepEqual(d.shapes, { A: [24, HIDDEN], B: [HIDDEN, 24] });
    assert.deepEqual(
      d.terms.map((t) => [t.id, t.scale, t.rank]),
      [
        ['sql', 0.7, 8],
        ['chat', -0.3, 16],
      ],
    );
    assert.equal(d.terms[1].scaling, 8 / Math.sqrt(16)); // rsLoRA, with rank_pattern's r
    // float64 reference from the files' values.
    const sqlW = new Uint8Array(readFileSync(join(files('sql'), 'adapter_model.safetensors')));
    const chatW = new Uint8Array(readFileSync(join(files('chat'), 'adapter_model.safetensors')));
    const key = `base_model.model.${Q0}`;
    const parts = [
      {
        A: f32(await readTensor(sqlW, `${key}.lora_A.weight`)),
        B: f32(await readTensor(sqlW, `${key}.lora_B.weight`)),
        r: 8,
        c: 0.7 * 2,
      },
      {
        A: bf16ToF32(await readTensor(chatW, `${key}.lora_A.weight`)),
        B: bf16ToF32(await readTensor(chatW, `${key}.lora_B.weight`)),
        r: 16,
        c: -0.3 * 2,
      },
    ];
    const A = f32(d.A);
    const B = f32(d.B);
    let num = 0;
    let den = 0;
    for (let i = 0; i < HIDDEN; i += 7) {
      for (let j = 0; j < HIDDEN; j += 5) {
        let ref = 0;
        for (const p of parts) {
          let s = 0;
          for (let k = 0; k < p.r; ++k) s += p.B[i * p.r + k] * p.A[k * HIDDEN + j];
          ref += p.c * s;
        }
        let got = 0;
        for (let k = 0; k < 24; ++k) got += B[i * 24 + k] * A[k * HIDDEN + j];
        num += (got - ref) ** 2;
        den += ref ** 2;
      }
    }
    const rel = Math.sqrt(num / den);
    assert.ok(rel < 1e-7, `relative error ${rel}`);
    // combine --method cat (the default) writes the same factors for a module both adapters have.
    const combined = await combineAdapters([{ repo: 'me/sql' }, { repo: 'me/chat' }], {
      ...o,
      weights: [0.7, -0.3],
      dtype: 'f32',
    });
    const out = combined.files.find((f) => f.name === 'adapter_model.safetensors').bytes;
    assert.deepEqual(d.A, await readTensor(out, `${key}.lora_A.weight`));
    assert.deepEqual(d.B, await readTensor(out, `${key}.lora_B.weight`));
    // bf16 output: combine --dtype bf16's bytes too.
    const d16 = await cache.compose(list, Q0, { dtype: 'bf16' });
    const combined16 = await combineAdapters([{ repo: 'me/sql' }, { repo: 'me/chat' }], {
      ...o,
      weights: [0.7, -0.3],
      dtype: 'bf16',
    });
    const out16 = combined16.files.find((f) => f.name === 'adapter_model.safetensors').bytes;
    assert.deepEqual(d16.A, await readTensor(out16, `${key}.lora_A.weight`));
    assert.deepEqual(d16.B, await readTensor(out16, `${key}.lora_B.weight`));
    // A module only one adapter has: that adapter alone; none has it: null.
    const up = await cache.compose(list, 'model.layers.2.mlp.up_proj');
    assert.deepEqual(
      up.terms.map((t) => t.id),
      ['chat'],
    );
    assert.equal(await cache.compose(list, 'model.layers.2.mlp.down_proj'), null);
    await cache.close();
  });
});

test('composeAdapter: the files combine --method cat writes (config and weights, byte for byte), streamed through the cache', async () => {
  await withHub(async (hub, o) => {
    const cache = createAdapterCache({ ...o, budgetBytes: 8 << 20 });
    await cache.register('sql', { repo: 'me/sql' });
    await cache.register('chat', { repo: 'me/chat' });
    const list = [
      { id: 'sql', scale: 0.7 },
      { id: 'chat', scale: -0.3 },
    ];
    for (const dtype of ['f32', 'bf16']) {
      const composed = await cache.composeAdapter(list, { dtype });
      const weights = new Uint8Array(await new Response(composed.stream()).arrayBuffer());
      const combined = await combineAdapters([{ repo: 'me/sql' }, { repo: 'me/chat' }], {
        ...o,
        weights: [0.7, -0.3],
        dtype,
      });
      const want = (name) => combined.files.find((f) => f.name === name).bytes;
      assert.equal(composed.weightsName, 'adapter_model.safetensors');
      assert.equal(weights.length, composed.size, dtype);
      assert.ok(Buffer.from(weights).equals(Buffer.from(want('adapter_model.safetensors'))), `${dtype} weights`);
      assert.equal(composed.config, new TextDecoder().decode(want('adapter_config.json')), `${dtype} config`);
      assert.equal(JSON.parse(composed.config).lora_alpha, composed.rank);
    }
    // Every module went through the cache: a second composition is all hits.
    const before = cache.stats();
    await new Response((await cache.composeAdapter(list)).stream()).arrayBuffer();
    assert.equal(cache.stats().spanReads, before.spanReads);
    await cache.close();
  });
});

test("applyTo: one adapter at scale 1 gives the merge's bytes; several apply Σ", async () => {
  await withHub(async (hub, o) => {
    const cache = createAdapterCache({ ...o, budgetBytes: 8 << 20 });
    await cache.register('sql', { repo: 'me/sql', base: { repo: 'me/single' } });
    const base = new Uint8Array(readFileSync(join(files('single'), 'model.safetensors')));
    const merged = await collect(
      new Blob([base])
        .stream()
        .pipeThrough(
          createMergeStream({
            adapter: {
              weights: new Uint8Array(readFileSync(join(files('sql'), 'adapter_model.safetensors'))),
              config: readFileSync(join(files('sql'), 'adapter_config.json'), 'utf8'),
            },
          }),
        ),
    );
    for (const name of [Q0, 'model.layers.4.self_attn.v_proj']) {
      const weight = await readTensor(base, `${name}.weight`);
      const shape = name.endsWith('v_proj') ? [HIDDEN / 2, HIDDEN] : [HIDDEN, HIDDEN];
      const d = await cache.compose([{ id: 'sql', scale: 1 }], name);
      const bytes = d.applyTo(weight, { dtype: 'BF16', shape });
      assert.deepEqual(bytes, await readTensor(merged, `${name}.weight`), name);
      // As f32: the weight widened plus the delta, rounded once to f32.
      assert.equal(d.applyTo(weight, { dtype: 'bf16', shape, outDtype: 'f32' }).length, shape[0] * shape[1] * 4);
    }
    await rejectsWith(
      Promise.resolve().then(async () =>
        (await cache.compose([{ id: 'sql' }], Q0)).applyTo(new Uint8Array(8), { dtype: 'BF16', shape: [2, 2] }),
      ),
      'ShapeMismatch',
    );
    await cache.close();
  });
});

test('a revision change replaces the cached modules; unregister drops them', async () => {
  await withHub(async (hub, o) => {
    const cache = createAdapterCache({ ...o, budgetBytes: 8 << 20 });
    const first = await cache.register('sql', { repo: 'me/sql' });
    const before = await cache.module('sql', Q0);
    // Unchanged: refresh keeps the entries.
    let r = await cache.refresh('sql');
    assert.equal(r.changed, false);
    assert.equal(await cache.module('sql', Q0), before);
    // The adapter is retrained: new weights on main (a new commit and ETag).
    await writeAdapter(join(dir, 'sql2'), { rank: 8 });
    const bytes = readFileSync(join(dir, 'sql2', 'adapter_model.safetensors'));
    bytes[bytes.length - 1] ^= 1; // q/v of the last layer; make the file differ
    const m0 = readTensor(new Uint8Array(bytes), `base_model.model.${Q0}.lora_A.weight`);
    hub.setFile('me/sql', 'adapter_model.safetensors', bytes);
    // Before a refresh the registration still reads the version it registered (the CDN URL its first read landed
    // on, the ETag pinned): the old bytes, cached under the old version.
    const old = await cache.module('sql', 'model.layers.5.self_attn.v_proj');
    assert.deepEqual(
      old.B,
      await readTensor(
        new Uint8Array(readFileSync(join(files('sql'), 'adapter_model.safetensors'))),
        'base_model.model.model.layers.5.self_attn.v_proj.lora_B.weight',
      ),
    );
    assert.equal(cache.stats().entries, 2);
    r = await cache.refresh('sql');
    assert.equal(r.changed, true);
    assert.notEqual(r.etag, first.etag);
    assert.equal(r.revision, hub.commit('me/sql'));
    const s = cache.stats();
    assert.deepEqual([s.entries, s.residentBytes, s.invalidated], [0, 0, 2]);
    const after = await cache.module('sql', Q0);
    assert.notEqual(after, before);
    assert.deepEqual(after.A, await m0);
    // Registering the id again at a given revision replaces it as well.
    await cache.register('sql', { repo: 'me/sql', revision: hub.commit('me/sql') });
    assert.equal(await cache.module('sql', Q0), after, 'same ETag: entries kept');
    assert.equal(await cache.unregister('sql'), true);
    assert.equal(await cache.unregister('sql'), false);
    assert.deepEqual([cache.stats().entries, cache.stats().residentBytes, cache.stats().registered], [0, 0, 0]);
    await rejectsWith(cache.module('sql', Q0), 'InvalidArgument', /no adapter is registered/);
    await cache.close();
  });
});

test('an aborted caller leaves the shared fetch to the others; unregister during a fetch lets it complete uncached', async () => {
  await withHub(async (hub, o) => {
    const cache = createAdapterCache({ ...o, budgetBytes: 8 << 20 });
    await cache.register('sql', { repo: 'me/sql' });
    const name = 'model.layers.5.self_attn.q_proj';
    hub.faults.push({ type: 'slow', delay: 20, chunk: 4096, times: 1 });
    const controller = new AbortController();
    const first = cache.module('sql', name, { signal: controller.signal });
    const second = cache.module('sql', name);
    controller.abort(new Error('gone'));
    await assert.rejects(first, /gone/);
    const m = await second;
    assert.equal(m.rank, 8);
    assert.equal(await cache.module('sql', name), m, 'cached');
    assert.deepEqual([cache.stats().misses, cache.stats().shared, cache.stats().hits], [1, 1, 1]);
    // Unregistered while its fetch runs: the caller still gets the factors; nothing is cached; nothing leaks.
    hub.faults.push({ type: 'slow', delay: 20, chunk: 4096, times: 1 });
    const late = cache.module('sql', 'model.layers.5.self_attn.v_proj');
    await new Promise((resolve) => setTimeout(resolve, 30));
    assert.equal(await cache.unregister('sql'), true);
    assert.equal((await late).rank, 8);
    const s = cache.stats();
    assert.deepEqual([s.entries, s.residentBytes, s.inFlightBytes, s.registered], [0, 0, 0, 0]);
    await cache.close();
  });
});

test('another format the core reads: an mlx-lm adapter is served in PEFT orientation, the same bytes', async () => {
  const weights = new Uint8Array(readFileSync(join(files('sql'), 'adapter_model.safetensors')));
  const config = readFileSync(join(files('sql'), 'adapter_config.json'), 'utf8');
  const mlx = await pb.translateAdapter({ weights, config }, { to: 'mlx' });
  const hub = await startHub({
    files: { 'me/mlx': Object.fromEntries(mlx.files.map((f) => [f.name, f.bytes])), 'me/sql': files('sql') },
  });
  try {
    const cache = createAdapterCache({ endpoint: hub.endpoint, budgetBytes: 8 << 20 });
    assert.equal((await cache.register('mlx', { repo: 'me/mlx' })).format, 'mlx');
    await cache.register('sql', { repo: 'me/sql' });
    for (const name of [Q0, 'model.layers.5.self_attn.v_proj']) {
      const [a, b] = await Promise.all([cache.module('mlx', name), cache.module('sql', name)]);
      assert.deepEqual([a.shapes, a.scaling], [b.shapes, b.scaling]);
      assert.deepEqual(a.A, b.A, name); // mlx-lm stores A transposed: the core rearranges it
      assert.deepEqual(a.B, b.B, name);
    }
    await cache.close();
  } finally {
    await hub.close();
  }
});

test("bounds: terms (InvalidArgument), rank and size (LimitExceeded) are the core's rule for compose and composeAdapter; registrations are bounded", async () => {
  await withHub(async (hub, o) => {
    const cache = createAdapterCache({
      ...o,
      budgetBytes: 64 << 20,
      maxRank: 24,
      maxComposeBytes: 200_000,
      maxRegistrations: 2,
    });
    assert.deepEqual(await cache.bounds(), {
      maxTerms: 16,
      maxRank: 24,
      maxComposeBytes: 200_000,
      maxRegistrations: 2,
    });
    await cache.register('sql', { repo: 'me/sql' });
    await cache.register('chat', { repo: 'me/chat' });
    const many = Array.from({ length: 1000 }, (_, i) => ({ id: i % 2 ? 'sql' : 'chat', scale: 0.5 }));
    hub.clearLog();
    const terms = exactly('a composition of 1000 adapters: at most 16 may be composed at once (maxTerms)');
    await rejectsWith(cache.composeAdapter(many), 'InvalidArgument', terms);
    await rejectsWith(cache.compose(many, Q0), 'InvalidArgument', terms);
    await rejectsWith(
      cache.checkTerms(17),
      'InvalidArgument',
      exactly('a composition of 17 adapters: at most 16 may be composed at once (maxTerms)'),
    );
    assert.equal(hub.requests.length, 0, 'refused before anything is read');
    // sql is rank 8 everywhere: 4 of them make rank 32 > 24.
    const four = Array.from({ length: 4 }, () => ({ id: 'sql', scale: 1 }));
    await rejectsWith(
      cache.composeAdapter(four),
      'LimitExceeded',
      exactly('the composed adapter would have rank 32, more than the limit of 24 (maxRank)'),
    );
    await rejectsWith(
      cache.compose(four, Q0),
      'LimitExceeded',
      exactly('the composed module would have rank 32, more than the limit of 24 (maxRank)'),
    );
    // Three: rank 24, 12 modules of f32 factors (A 24×512, B 512|256×24): 1.03 MB > 200,000 bytes; one module fits.
    const three = four.slice(1);
    await rejectsWith(
      cache.composeAdapter(three),
      'LimitExceeded',
      /^the composed adapter would be \d+ bytes, more than the limit of 200000 bytes \(maxComposeBytes\)$/,
    );
    const d = await cache.compose(three, Q0, { dtype: 'bf16' });
    assert.equal(d.rank, 24);
    // A third registration: refused (registrations live outside the budget).
    await rejectsWith(
      cache.register('third', { repo: 'me/sql' }),
      'LimitExceeded',
      exactly(
        'cannot register `third`: the cache holds 2 adapters, its maximum (maxRegistrations); unregister one first',
      ),
    );
    await cache.close();
  });
});

test("the cache's token goes to the cache's endpoint only; another endpoint is read with its own token or none", async () => {
  await withHub(async (hub, o) => {
    const other = await startHub({ files: { 'me/sql': files('sql'), 'me/base': files('base') } });
    try {
      const cache = createAdapterCache({ ...o, token: 'hf_cache_token', budgetBytes: 64 << 20 });
      const withToken = (h, token) => h.requests.filter((r) => r.auth === `Bearer ${token}`).length;
      await cache.register('home', { repo: 'me/sql', base: { repo: 'me/base' } });
      assert.ok(withToken(hub, 'hf_cache_token') > 0);
      await cache.register('away', {
        repo: 'me/sql',
        endpoint: other.endpoint,
        base: { repo: 'me/base', endpoint: hub.endpoint },
      });
      await cache.register('away-base', { repo: 'me/sql', base: { repo: 'me/base', endpoint: other.endpoint } });
      await cache.module('away', Q0);
      assert.ok(other.requests.length > 0);
      assert.equal(withToken(other, 'hf_cache_token'), 0, "the cache's token never went to the other server");
      await cache.register('own', { repo: 'me/sql', endpoint: other.endpoint, token: 'hf_other_token' });
      assert.ok(withToken(other, 'hf_other_token') > 0, "a registration's own token goes to its own endpoint");
      assert.equal(withToken(other, 'hf_cache_token'), 0);
      await cache.close();
    } finally {
      await other.close();
    }
  });
});
