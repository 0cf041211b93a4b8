// The edge worker example (examples/edge-worker/worker.mjs) in real workerd, against the local fake Hub: each
// shard of a 3-shard base merged by its own concurrent request, plus the index and config.json, byte-identical to
// the native CLI's merge; a 503 and a truncated body survived with the same bytes; a base changing mid-merge ends
// the download short; and a 168 MB base merged with a small WASM heap, workerd's resident growth about that of a
// worker merely downloading the base (workerd's I/O buffers and V8's lazily freed ArrayBuffers, ~80-100 MiB here).
// The worker's Hub token serves only requests carrying its ACCESS_SECRET. workerd runs as tests/js/helpers/workerd.mjs
// sets it up (the modules wrangler would bundle).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hasNativeCli, pb, repoRoot, rng } from './helpers/common.mjs';
import { nativeMerge, writeAdapter, writeShardedBase, writeSingleBase } from './helpers/remote-model.mjs';
import { startHub } from '../hub/server.mjs';
import { hasWorkerd, processMemory, startWorkerd } from './helpers/workerd.mjs';

const skip = !hasWorkerd
  ? 'workerd is not installed (npm ci)'
  : !hasNativeCli
    ? 'build/native/peft-bridge not built'
    : false;

const dir = mkdtempSync(join(tmpdir(), 'pb-edge-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
const MiB = (n) => `${(n / 2 ** 20).toFixed(1)} MiB`;

const edgeWorker = join(repoRoot, 'examples', 'edge-worker', 'worker.mjs');
const startEdge = (t, endpoint, bindings = {}) =>
  startWorkerd(t, { worker: edgeWorker, dir, bindings: { HF_ENDPOINT: endpoint, ...bindings } });

const query = (params) => new URLSearchParams(params).toString();
const bytesOf = async (res) => new Uint8Array(await res.arrayBuffer());
const same = (a, b) => Buffer.from(a).equals(Buffer.from(b));

test(
  'workerd: every shard by a concurrent request, the index and config.json = the native merge; faults; a changing base',
  { skip },
  async (t) => {
    const t0 = Date.now();
    const shards = await writeShardedBase(join(dir, 'base'));
    await writeSingleBase(join(dir, 'single'));
    await writeAdapter(join(dir, 'lora'));
    const expected = nativeMerge(join(dir, 'base'), join(dir, 'lora'), join(dir, 'out'));
    const expectedF32 = nativeMerge(join(dir, 'base'), join(dir, 'lora'), join(dir, 'out-f32'), ['--dtype', 'f32']);
    const hub = await startHub({
      files: { 'me/base': join(dir, 'base'), 'me/single': join(dir, 'single'), 'me/lora': join(dir, 'lora') },
    });
    t.after(() => hub.close());
    const worker = await startEdge(t, hub.endpoint);
    const started = Date.now();

    // (a) Each output file by its own request, all at once; /index too.
    const common = { base: 'me/base', adapter: 'me/lora' };
    const names = [...shards, 'config.json', 'model.safetensors.index.json'];
    const answers = await Promise.all([
      ...names.map((shard) => fetch(`${worker.url}/merge?${query({ ...common, shard })}`)),
      fetch(`${worker.url}/index?${query(common)}`),
      ...shards.map((shard) => fetch(`${worker.url}/merge?${query({ ...common, shard, dtype: 'f32' })}`)),
    ]);
    const bodies = await Promise.all(answers.map(bytesOf));
    for (const [i, name] of names.entries()) {
      assert.equal(answers[i].status, 200, `${name}: ${Buffer.from(bodies[i]).toString()}`);
      assert.ok(same(bodies[i], expected[name]), name);
      assert.equal(answers[i].headers.get('content-length'), String(expected[name].length));
      assert.equal(answers[i].headers.get('content-disposition'), `attachment; filename="${name}"`);
    }
    assert.equal(answers[0].headers.get('content-type'), 'application/octet-stream');
    assert.ok(same(bodies[names.length], expected['model.safetensors.index.json']), '/index');
    for (const [i, shard] of shards.entries())
      assert.ok(same(bodies[names.length + 1 + i], expectedF32[shard]), `${shard} --dtype f32`);

    const plan = await (await fetch(`${worker.url}/plan?${query(common)}`)).json();
    assert.equal(plan.revision, hub.commit('me/base'));
    assert.equal(plan.modulesMatched, 12);
    assert.deepEqual(
      plan.outputs.map((o) => o.path),
      [...shards, 'model.safetensors.index.json', 'config.json'],
    );
    t.diagnostic(`(a) ${names.length + shards.length + 1} concurrent requests and /plan: ${Date.now() - started} ms`);

    // Plan-time failures are JSON errors with a status, before any byte of a file.
    const missing = await fetch(`${worker.url}/merge?${query({ base: 'me/none', adapter: 'me/lora' })}`);
    assert.equal(missing.status, 404);
    assert.equal((await missing.json()).error.code, 'IoError');
    const bad = await fetch(`${worker.url}/merge?${query({ ...common, shard: shards[0], dtype: 'f8' })}`);
    assert.equal(bad.status, 400);
    const elsewhere = await fetch(
      `${worker.url}/merge?${query({ base: 'http://example.com/model.safetensors', adapter: 'me/lora' })}`,
    );
    assert.equal(elsewhere.status, 400);

    // (b) A 503, then a body cut short: retried, resuming where it stopped, with the same bytes.
    const path = shards[1];
    hub.clearLog();
    hub.faults.push(
      { type: 'status', status: 503, path, skip: 1, times: 1 },
      { type: 'truncate', at: 100_000, path, skip: 2, times: 1 },
    );
    const retried = await fetch(`${worker.url}/merge?${query({ ...common, shard: path })}`);
    assert.ok(same(await bytesOf(retried), expected[path]), 'same bytes after a 503 and a truncation');
    assert.ok(hub.log('cdn', path).some((r) => r.status === 503));
    assert.ok(
      hub.log('cdn', path).some((r) => r.completed === false),
      'a body was cut',
    );
    hub.faults.length = 0;

    // (c) The base changes after the merge started (new bytes, new ETag): the response ends short of its length.
    const single = `${hub.endpoint}/me/single/resolve/main/model.safetensors`;
    hub.faults.push({ type: 'change', path: 'model.safetensors', after: 2 });
    const changing = await fetch(`${worker.url}/merge?${query({ base: single, adapter: 'me/lora' })}`);
    assert.equal(changing.status, 200, 'the plan came before the change');
    const length = Number(changing.headers.get('content-length'));
    let received = 0;
    await assert.rejects(async () => {
      for await (const chunk of changing.body) received += chunk.length;
    });
    assert.ok(received < length, `${received} of ${length} bytes`);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.match(worker.log(), /changed while being read/);
    t.diagnostic(`(b), (c) and the rest: ${Date.now() - t0} ms in all`);
  },
);

test(
  "workerd: the worker's files are the CLI's folder: /plan lists the base's tokenizer and other files, /merge serves them unchanged",
  { skip },
  async (t) => {
    const base = join(dir, 'with-tokenizer');
    const shards = await writeShardedBase(base, { shards: 2 });
    // The files a Hub model has beside its weights; the hidden one and the other format's weights are not copied.
    const extras = {
      'tokenizer.json': JSON.stringify({ version: '1.0', model: { type: 'BPE', vocab: { a: 0, b: 1 } } }),
      'tokenizer.model': Buffer.from([0x0a, 0x03, 0x3c, 0x73, 0x3e, 0xff, 0x00, 0x7f]),
      'generation_config.json': JSON.stringify({ bos_token_id: 1, eos_token_id: 2 }),
      '.gitattributes': '*.safetensors filter=lfs\n',
      'pytorch_model.bin': 'not read',
    };
    for (const [name, bytes] of Object.entries(extras)) writeFileSync(join(base, name), bytes);
    await writeAdapter(join(dir, 'lora-tok'));
    const expected = nativeMerge(base, join(dir, 'lora-tok'), join(dir, 'out-tok'));
    assert.deepEqual(
      Object.keys(expected),
      [
        ...shards,
        'config.json',
        'generation_config.json',
        'model.safetensors.index.json',
        'tokenizer.json',
        'tokenizer.model',
      ].sort(),
    );
    const hub = await startHub({ files: { 'me/tok': base, 'me/lora': join(dir, 'lora-tok') } });
    t.after(() => hub.close());
    const worker = await startEdge(t, hub.endpoint);
    const common = { base: 'me/tok', adapter: 'me/lora' };
    const plan = await (await fetch(`${worker.url}/plan?${query(common)}`)).json();
    assert.deepEqual(plan.outputs.map((o) => o.path).sort(), Object.keys(expected), "the CLI's set of files");
    assert.deepEqual(plan.copiedFiles, ['generation_config.json', 'tokenizer.json', 'tokenizer.model']);
    for (const { path, size } of plan.outputs) {
      const res = await fetch(`${worker.url}/merge?${query({ ...common, shard: path, revision: plan.revision })}`);
      const body = await bytesOf(res);
      assert.equal(res.status, 200, `${path}: ${Buffer.from(body).toString()}`);
      assert.equal(size, expected[path].length, path);
      assert.ok(same(body, expected[path]), `${path}: not the CLI's bytes`);
    }
  },
);

test(
  'workerd: a 168 MB base merges holding about what a plain download of it holds, and a small WASM heap',
  { skip },
  async (t) => {
    // 20 BF16 q_proj weights of 2048 x 2048 (8 MiB each), written in pieces; a rank-8 adapter on every one.
    const layers = 20;
    const dim = 2048;
    const size = 2 * dim * dim;
    const bigDir = join(dir, 'big');
    mkdirSync(bigDir);
    const header = {};
    for (let l = 0; l < layers; ++l)
      header[`model.layers.${l}.self_attn.q_proj.weight`] = {
        dtype: 'BF16',
        shape: [dim, dim],
        data_offsets: [l * size, (l + 1) * size],
      };
    let json = JSON.stringify(header);
    while (json.length % 8) json += ' ';
    const prefix = Buffer.alloc(8);
    prefix.writeBigUInt64LE(BigInt(json.length));
    const random = rng(11);
    const block = new Uint16Array(size / 2).map(
      () => (random() < 0.5 ? 0x8000 : 0) | ((120 + Math.floor(random() * 8)) << 7) | Math.floor(random() * 128),
    );
    const fd = openSync(join(bigDir, 'model.safetensors'), 'w');
    writeSync(fd, prefix);
    writeSync(fd, json);
    for (let l = 0; l < layers; ++l) {
      block[l] ^= 0x8000; // every layer a little different
      writeSync(fd, block);
    }
    closeSync(fd);
    const baseBytes = 8 + json.length + layers * size;

    const adapterDir = join(dir, 'big-lora');
    mkdirSync(adapterDir);
    const small = (n) => new Uint8Array(Float32Array.from({ length: n }, () => (random() * 2 - 1) * 0.05).buffer);
    const tensors = [];
    for (let l = 0; l < layers; ++l) {
      const key = `base_model.model.model.layers.${l}.self_attn.q_proj`;
      tensors.push({ name: `${key}.lora_A.weight`, dtype: 'F32', shape: [8, dim], data: small(8 * dim) });
      tensors.push({ name: `${key}.lora_B.weight`, dtype: 'F32', shape: [dim, 8], data: small(8 * dim) });
    }
    writeFileSync(
      join(adapterDir, 'adapter_model.safetensors'),
      new Uint8Array(await new Response(pb.writeSafetensors({ tensors })).arrayBuffer()),
    );
    writeFileSync(
      join(adapterDir, 'adapter_config.json'),
      JSON.stringify({ peft_type: 'LORA', r: 8, lora_alpha: 16, target_modules: ['q_proj'] }),
    );
    const expected = nativeMerge(join(bigDir, 'model.safetensors'), adapterDir, join(dir, 'big-out'))[
      'model.safetensors'
    ];
    const expectedHash = createHash('sha256').update(expected).digest('hex');
    const outBytes = expected.length;

    const hub = await startHub({ files: { 'me/big': bigDir, 'me/big-lora': adapterDir } });
    t.after(() => hub.close());
    const common = { base: 'me/big', adapter: 'me/big-lora' };

    /** A fresh workerd (VmHWM is a process's lifetime peak), warmed up by a plan, then `run(worker)` measured. */
    async function measured(run) {
      const worker = await startEdge(t, hub.endpoint);
      assert.equal((await fetch(`${worker.url}/plan?${query(common)}`)).status, 200);
      const ready = processMemory(worker.pid).rss;
      const started = Date.now();
      const result = await run(worker);
      return { ...result, ready, peak: processMemory(worker.pid).hwm, seconds: (Date.now() - started) / 1000 };
    }

    // The merge, its bytes hashed as they arrive.
    const merge = await measured(async (worker) => {
      const res = await fetch(`${worker.url}/merge?${query(common)}`);
      assert.equal(res.status, 200);
      const hash = createHash('sha256');
      let received = 0;
      for await (const chunk of res.body) {
        hash.update(chunk);
        received += chunk.length;
      }
      return { received, hash: hash.digest('hex'), heap: Number(await (await fetch(`${worker.url}/__heap`)).text()) };
    });
    // The floor any worker reading the base pays: the same bytes downloaded with one fetch and dropped. workerd's
    // I/O buffers and V8's lazily collected ArrayBuffers make up most of a worker's resident growth.
    const download = await measured(async (worker) => {
      const url = `${hub.endpoint}/me/big/resolve/main/model.safetensors`;
      return { received: Number(await (await fetch(`${worker.url}/__download?${query({ url })}`)).text()) };
    });
    // The throughput floor: the base passed through the worker to the client, as the merge passes its output.
    const proxy = await measured(async (worker) => {
      const url = `${hub.endpoint}/me/big/resolve/main/model.safetensors`;
      let received = 0;
      for await (const chunk of (await fetch(`${worker.url}/__proxy?${query({ url })}`)).body) received += chunk.length;
      return { received };
    });
    assert.equal(proxy.received, baseBytes);
    t.diagnostic(
      `merge throughput / the same file passed through the worker: ${(proxy.seconds / merge.seconds).toFixed(2)} (${proxy.seconds.toFixed(2)} s)`,
    );
    t.diagnostic(
      `base ${MiB(baseBytes)} merged through the worker in ${merge.seconds.toFixed(2)} s (${(baseBytes / merge.seconds / 1e6).toFixed(0)} MB/s): ` +
        `workerd RSS ${MiB(merge.ready)} ready, peak ${MiB(merge.peak)} (+${MiB(merge.peak - merge.ready)}); WASM heap ${MiB(merge.heap)}. ` +
        `Plain download of the base by the worker: ${MiB(download.ready)} ready, peak ${MiB(download.peak)} (+${MiB(download.peak - download.ready)}) ` +
        `in ${download.seconds.toFixed(2)} s`,
    );
    assert.equal(merge.received, outBytes);
    assert.equal(merge.hash, expectedHash, 'the merged bytes = the native merge');
    assert.equal(download.received, baseBytes);
    assert.ok(baseBytes > 160e6);
    assert.ok(merge.heap < 64 * 2 ** 20, `WASM heap ${MiB(merge.heap)}`);
    // The merge holds about what a plain download holds: its own state (WASM heap, adapter, a read-ahead piece and
    // the output in flight) is tens of MiB, whatever the base's size.
    assert.ok(
      merge.peak - merge.ready < download.peak - download.ready + 64 * 2 ** 20,
      'the merge holds what a download does, plus < 64 MiB',
    );
    assert.ok(
      merge.peak - merge.ready < baseBytes,
      `the merge added ${MiB(merge.peak - merge.ready)} for a ${MiB(baseBytes)} base`,
    );
  },
);

test(
  "workerd: the worker's Hub token serves only holders of its ACCESS_SECRET; a token without a secret is refused",
  { skip },
  async (t) => {
    const root = mkdtempSync(join(dir, 'private-'));
    await writeSingleBase(join(root, 'base'));
    await writeAdapter(join(root, 'lora'));
    const hubToken = 'hf_worker_token';
    const hub = await startHub({
      files: { 'me/private-base': join(root, 'base'), 'me/private-lora': join(root, 'lora') },
      tokens: { 'me/private-base': hubToken, 'me/private-lora': hubToken },
    });
    t.after(() => hub.close());
    const secret = 's3cret-for-the-worker';
    const worker = await startEdge(t, hub.endpoint, { HF_TOKEN: hubToken, ACCESS_SECRET: secret });
    const plan = (headers = {}) =>
      fetch(`${worker.url}/plan?${query({ base: 'me/private-base', adapter: 'me/private-lora' })}`, { headers });
    const authOf = () =>
      hub.requests.filter((r) => r.repo === 'me/private-base' || r.repo === 'me/private-lora').map((r) => r.auth);

    // Anyone who knows the URL: anonymous, so the Hub refuses the private repos.
    const anonymous = await plan();
    assert.equal(anonymous.status, 401, await anonymous.text());
    assert.ok(
      authOf().every((a) => !a),
      'no token sent for an anonymous request',
    );
    // A wrong secret is taken as the caller's own Hub token: forwarded, and refused by the Hub.
    hub.requests.length = 0;
    const wrong = await plan({ Authorization: 'Bearer not-the-secret' });
    assert.equal(wrong.status, 401, await wrong.text());
    assert.ok(
      authOf().every((a) => !a || a === 'Bearer not-the-secret'),
      'the worker token is not sent for a wrong secret',
    );
    // The secret: the worker's token is used.
    hub.requests.length = 0;
    const trusted = await plan({ Authorization: `Bearer ${secret}` });
    const body = await trusted.json();
    assert.equal(trusted.status, 200, JSON.stringify(body));
    assert.ok(
      body.modules?.length > 0 || body.matched > 0 || Array.isArray(body.outputs),
      JSON.stringify(body).slice(0, 200),
    );
    assert.ok(
      authOf().some((a) => a === `Bearer ${hubToken}`),
      'the worker token reached the Hub',
    );
    // The caller's own valid Hub token works without the secret.
    const own = await plan({ Authorization: `Bearer ${hubToken}` });
    assert.equal(own.status, 200, await own.text());

    // A worker with a token but no secret refuses everything rather than lend it.
    const unguarded = await startEdge(t, hub.endpoint, { HF_TOKEN: hubToken });
    const refused = await fetch(
      `${unguarded.url}/plan?${query({ base: 'me/private-base', adapter: 'me/private-lora' })}`,
    );
    assert.equal(refused.status, 500);
    const error = (await refused.json()).error;
    assert.equal(error.code, 'WorkerMisconfigured');
    assert.match(error.message, /ACCESS_SECRET/);
  },
);

test(
  'workerd: a trap inside the module during one request does not outlive it: the next requests answer 200, same bytes',
  { skip: hasWorkerd ? false : 'workerd is not installed (npm ci)' },
  async (t) => {
    const shards = await writeShardedBase(join(dir, 'trap-base'));
    await writeAdapter(join(dir, 'trap-lora'));
    const hub = await startHub({ files: { 'me/base': join(dir, 'trap-base'), 'me/lora': join(dir, 'trap-lora') } });
    t.after(() => hub.close());
    const worker = await startEdge(t, hub.endpoint);
    const common = { base: 'me/base', adapter: 'me/lora' };
    const plan = async () => {
      const res = await fetch(`${worker.url}/plan?${query(common)}`);
      return { status: res.status, body: await res.json() };
    };
    const shard = async () => {
      const res = await fetch(`${worker.url}/merge?${query({ ...common, shard: shards[1] })}`);
      return { status: res.status, bytes: await bytesOf(res) };
    };
    const planBefore = await plan();
    const shardBefore = await shard();
    assert.equal(planBefore.status, 200);
    assert.equal(shardBefore.status, 200);

    // A trap now, outside any request of the worker's: the isolate's instance is garbage.
    assert.match(await (await fetch(`${worker.url}/__trap`)).text(), /^RuntimeError: memory access out of bounds/);
    assert.deepEqual(await plan(), planBefore, 'the request after the trap');
    // A trap inside a request's own call (the merge's `new Merger(…)`): that request fails, the next ones do not.
    assert.equal(await (await fetch(`${worker.url}/__trap?in=Merger`)).text(), 'armed');
    const trapped = await plan();
    assert.equal(trapped.status, 500);
    assert.match(trapped.body.error.message, /memory access out of bounds/);
    assert.deepEqual(await plan(), planBefore, 'the request after the trapping one');
    const after = await shard();
    assert.equal(after.status, 200);
    assert.ok(same(after.bytes, shardBefore.bytes), 'the merged shard, byte for byte');
  },
);
