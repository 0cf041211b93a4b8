// Remote merge (web/src/remote/remote.js) against the local fake Hub (tests/hub/server.mjs): mergeRemote, one shard
// at a time (mergeRemoteShard, mergeRemoteIndex), planRemote, each byte-identical to the native CLI's merge of the
// same files; retries that leave the output unchanged; a file changing mid-merge; abort; saveStreams.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { collect, hasNativeCli, pb, skipWithoutNativeCli, webDir } from './helpers/common.mjs';
import { nativeMerge, writeAdapter, writeShardedBase, writeSingleBase } from './helpers/remote-model.mjs';
import { startHub } from '../hub/server.mjs';

const { mergeRemote, mergeRemoteShard, mergeRemoteIndex, planRemote, saveStreams, SafetensorsError } = pb;
const { openMergeHandles } = await import(join(webDir, 'src', 'ops', 'merge.js'));

const same = (a, b) => Buffer.from(a).equals(Buffer.from(b));

// One fixture for the file: a 3-shard base (~5 MiB a shard, so data takes several 4 MiB reads), a one-file base,
// an adapter, the native merges, and the Hub serving them.
const dir = mkdtempSync(join(tmpdir(), 'pb-remote-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
const shards = await writeShardedBase(join(dir, 'base'));
await writeSingleBase(join(dir, 'single'));
await writeAdapter(join(dir, 'lora'));
const expected = hasNativeCli ? nativeMerge(join(dir, 'base'), join(dir, 'lora'), join(dir, 'out')) : null;
const expectedSingle = hasNativeCli
  ? nativeMerge(join(dir, 'single', 'model.safetensors'), join(dir, 'lora'), join(dir, 'out1'))
  : null;

async function withHub(fn) {
  const hub = await startHub({
    files: { 'me/base': join(dir, 'base'), 'me/single': join(dir, 'single'), 'me/lora': join(dir, 'lora') },
  });
  try {
    return await fn(hub, {
      base: { repo: 'me/base' },
      adapter: { repo: 'me/lora' },
      endpoint: hub.endpoint,
      retryDelay: 10,
    });
  } finally {
    await hub.close();
  }
}

test('mergeRemote: a sharded Hub repo and a Hub adapter give the native merge, byte for byte', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  await withHub(async (hub, options) => {
    const files = {};
    let last = null;
    for await (const { path, size, stream } of mergeRemote({ ...options, onProgress: (p) => (last = p) })) {
      files[path] = await collect(stream);
      assert.equal(files[path].length, size, path);
    }
    assert.deepEqual(Object.keys(files).sort(), Object.keys(expected));
    for (const name of Object.keys(expected)) assert.ok(same(files[name], expected[name]), name);
    assert.equal(last.bytesIn, last.totalIn);
    // Every shard is read at the commit the index came from.
    const commit = hub.commit('me/base');
    for (const r of hub.log('resolve').filter((r) => r.repo === 'me/base' && r.path !== 'model.safetensors.index.json'))
      assert.equal(r.revision, commit, r.path);
    assert.equal(openMergeHandles(), 0);
  });
});

test('mergeRemoteShard and mergeRemoteIndex: each output file on its own, concurrently, = the native merge', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  await withHub(async (hub, options) => {
    hub.clearLog();
    const files = await Promise.all(
      [...shards, 'config.json', 'model.safetensors.index.json'].map(async (shard) => {
        const file = await mergeRemoteShard({ ...options, shard });
        return [file.path, await collect(file.stream), file.size];
      }),
    );
    for (const [path, bytes, size] of files) {
      assert.ok(same(bytes, expected[path]), path);
      assert.equal(size, bytes.length);
    }
    assert.ok(
      same(new TextEncoder().encode(await mergeRemoteIndex(options)), expected['model.safetensors.index.json']),
    );
    // A worker merging shard 1 reads the other shards' headers (one request each), not their data.
    hub.clearLog();
    await collect((await mergeRemoteShard({ ...options, shard: shards[0] })).stream);
    const perShard = (name) => hub.log('cdn', name).length;
    assert.equal(perShard(shards[1]), 1);
    assert.equal(perShard(shards[2]), 1);
    assert.ok(perShard(shards[0]) >= 3, 'header, then the data in 4 MiB requests');
    await assert.rejects(
      mergeRemoteShard(options),
      (e) => e.code === 'InvalidArgument' && /say which shard/.test(e.message),
    );
    await assert.rejects(
      mergeRemoteShard({ ...options, shard: 'nope.safetensors' }),
      (e) => e.code === 'InvalidArgument',
    );
    assert.equal(openMergeHandles(), 0);
  });
});

test('planRemote: modules, files and the commit every worker should read', async (t) => {
  await withHub(async (hub, options) => {
    const plan = await planRemote(options);
    assert.equal(plan.revision, hub.commit('me/base'));
    assert.equal(plan.adapterRevision, hub.commit('me/lora'));
    assert.equal(plan.modulesMatched, 12);
    assert.deepEqual(plan.unmatchedKeys, []);
    assert.deepEqual(
      plan.outputs.map((o) => o.path),
      [...shards, 'model.safetensors.index.json', 'config.json'],
    );
    if (expected) for (const o of plan.outputs) assert.equal(o.size, expected[o.path].length, o.path);
    assert.equal(
      hub.log('cdn').filter((r) => r.path.startsWith('model-')).length,
      3,
      'one request per shard: headers only',
    );
  });
});

test('a URL base and adapter URLs or bytes; the adapter from local bytes', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  await withHub(async (hub) => {
    const url = (repo, path) => `${hub.endpoint}/${repo}/resolve/main/${path}`;
    const local = {
      weights: readFileSync(join(dir, 'lora', 'adapter_model.safetensors')),
      config: readFileSync(join(dir, 'lora', 'adapter_config.json'), 'utf8'),
    };
    for (const adapter of [
      { weights: url('me/lora', 'adapter_model.safetensors'), config: url('me/lora', 'adapter_config.json') },
      local,
    ]) {
      const file = await mergeRemoteShard({ base: url('me/single', 'model.safetensors'), adapter });
      assert.equal(file.path, 'model.safetensors');
      assert.ok(same(await collect(file.stream), expectedSingle['model.safetensors']));
    }
    assert.equal(await mergeRemoteIndex({ base: url('me/single', 'model.safetensors'), adapter: local }), null);
  });
});

test('faults: a 503 and a truncated body are retried, resuming, with the same output; a changed file fails cleanly', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  await withHub(async (hub, options) => {
    const path = shards[1];
    hub.faults.push(
      { type: 'status', status: 503, path, skip: 1, times: 1 },
      { type: 'truncate', at: 100_000, path, skip: 2, times: 1 },
    );
    const file = await mergeRemoteShard({ ...options, shard: path });
    assert.ok(same(await collect(file.stream), expected[path]));
    assert.ok(hub.log('cdn', path).some((r) => r.status === 503));
    assert.ok(
      hub.log('cdn', path).some((r) => r.completed === false),
      'a body was cut: ' + JSON.stringify(hub.log('cdn', path)),
    );

    // The file changes after the merge started: the stream errors (the pinned ETag, or a 404 for the commit read).
    hub.faults.length = 0;
    const url = `${hub.endpoint}/me/single/resolve/main/model.safetensors`;
    hub.faults.push({ type: 'change', path: 'model.safetensors', after: 2 });
    const changing = await mergeRemoteShard({
      base: url,
      adapter: options.adapter,
      endpoint: hub.endpoint,
      retryDelay: 10,
    });
    await assert.rejects(
      collect(changing.stream),
      (e) => e instanceof SafetensorsError && /changed while being read/.test(e.message),
    );
    assert.equal(openMergeHandles(), 0);
  });
});

test('the data pass keeps several ranges of a shard in flight: well under one round trip a piece, one resolve, the native bytes', async (t) => {
  await withHub(async (hub, options) => {
    const D = 100;
    const pieceSize = 256 << 10;
    hub.latency = D;
    const file = await mergeRemoteShard({ ...options, shard: shards[0], pieceSize, readers: 4 });
    hub.clearLog();
    const t0 = performance.now();
    const bytes = await collect(file.stream);
    const elapsed = performance.now() - t0;
    const data = hub.log('cdn', shards[0]);
    assert.ok(data.length >= 16, `${data.length} data requests`);
    assert.ok(data.every((r) => r.status === 206 && r.completed));
    // One at a time, N pieces take N round trips at least; four at a time about a quarter of that.
    assert.ok(elapsed < data.length * D * 0.5, `${elapsed} ms for ${data.length} pieces of ${D} ms each`);
    assert.ok(hub.maxInFlight >= 3, `${hub.maxInFlight} requests at once`);
    // Every piece went straight to the CDN URL the shard's header read landed at: its one resolve was before.
    assert.equal(hub.log('resolve', shards[0]).length, 0);
    assert.ok(
      data.every(
        (r) =>
          Number(
            /^bytes=(\d+)-(\d+)$/
              .exec(r.range)
              .slice(1)
              .reduce((a, b) => b - a + 1),
          ) <= pieceSize,
      ),
    );
    if (!skipWithoutNativeCli(t)) assert.ok(same(bytes, expected[shards[0]]));
    assert.equal(openMergeHandles(), 0);
  });
});

test('mergeRemote with several ranges in flight and small pieces = the native merge; a change under concurrent reads fails cleanly', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  await withHub(async (hub, options) => {
    hub.latency = 5;
    const files = {};
    for await (const { path, stream } of mergeRemote({ ...options, pieceSize: 100_000, readers: 3 }))
      files[path] = await collect(stream);
    for (const name of Object.keys(expected)) assert.ok(same(files[name], expected[name]), name);
    // One resolve per base shard (its header read); the data went to the CDN URLs.
    for (const name of shards) assert.equal(hub.log('resolve', name).length, 1, name);

    const url = `${hub.endpoint}/me/single/resolve/main/model.safetensors`;
    hub.faults.push({ type: 'change', path: 'model.safetensors', after: 6 });
    const changing = await mergeRemoteShard({
      base: url,
      adapter: options.adapter,
      endpoint: hub.endpoint,
      retryDelay: 10,
      pieceSize: 100_000,
      readers: 4,
    });
    await assert.rejects(
      collect(changing.stream),
      (e) => e instanceof SafetensorsError && /changed while being read/.test(e.message),
    );
    assert.equal(openMergeHandles(), 0);
    for (let i = 0; i < 50 && hub.inFlight > 0; ++i) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(hub.inFlight, 0, 'no read left running');
  });
});

test('abort cancels every range in flight', async () => {
  await withHub(async (hub, options) => {
    hub.latency = 200;
    const controller = new AbortController();
    // Counted where requests start: the Hub logs a request when it arrives, which on a loaded machine can be after the
    // abort for one the client started before it.
    let started = 0;
    const fetch = (url, init) => (++started, globalThis.fetch(url, init));
    const file = await mergeRemoteShard({
      ...options,
      fetch,
      shard: shards[0],
      signal: controller.signal,
      pieceSize: 256 << 10,
      readers: 4,
    });
    const reader = file.stream.getReader();
    await reader.read();
    hub.clearLog();
    const next = reader.read();
    for (let i = 0; i < 50 && hub.inFlight < 3; ++i) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.ok(hub.inFlight >= 3, `${hub.inFlight} requests in flight`);
    const reason = new Error('stop');
    controller.abort(reason);
    await assert.rejects(next, (e) => e === reason);
    const made = started;
    // The requests in flight are dropped (well before their 200 ms), and none is made after.
    for (let i = 0; i < 50 && hub.inFlight > 0; ++i) await new Promise((resolve) => setTimeout(resolve, 5));
    assert.equal(hub.inFlight, 0);
    assert.ok(
      hub.requests.every((r) => r.completed === false),
      JSON.stringify(hub.requests),
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(started, made, 'no request started after the abort');
    assert.ok(hub.requests.length <= made);
    assert.equal(openMergeHandles(), 0);
  });
});

test('abort mid-stream errors with the reason and frees everything; a missing repo is a 404 IoError', async (t) => {
  await withHub(async (hub, options) => {
    const controller = new AbortController();
    const file = await mergeRemoteShard({ ...options, shard: shards[0], signal: controller.signal });
    const reader = file.stream.getReader();
    await reader.read();
    const reason = new Error('stop');
    controller.abort(reason);
    await assert.rejects(reader.read(), (e) => e === reason);
    assert.equal(openMergeHandles(), 0);
    await assert.rejects(
      planRemote({ ...options, base: { repo: 'me/none' } }),
      (e) => e.code === 'IoError' && e.status === 404,
    );
  });
});

test('saveStreams writes each file through createWritable and removes what it wrote when a later file fails', async () => {
  // An in-memory stand-in for FileSystemDirectoryHandle.
  const stored = new Map();
  const directoryHandle = {
    async getFileHandle(name, { create }) {
      assert.ok(create);
      return {
        async createWritable() {
          const parts = [];
          return new WritableStream({
            write: (c) => parts.push(c),
            close: () => stored.set(name, Buffer.concat(parts)),
          });
        },
      };
    },
    async removeEntry(name) {
      stored.delete(name);
    },
  };
  const file = (path, text) => ({ path, size: text.length, stream: new Blob([text]).stream() });
  assert.deepEqual(await saveStreams([file('a.safetensors', 'aaa'), file('b.json', 'bb')], { directoryHandle }), [
    { path: 'a.safetensors', size: 3 },
    { path: 'b.json', size: 2 },
  ]);
  assert.equal(stored.get('a.safetensors').toString(), 'aaa');
  stored.clear();
  async function* failing() {
    yield file('a.safetensors', 'aaa');
    yield { path: 'b.safetensors', stream: new ReadableStream({ pull: (c) => c.error(new Error('boom')) }) };
  }
  await assert.rejects(saveStreams(failing(), { directoryHandle }), /boom/);
  assert.deepEqual([...stored.keys()], []);
  await assert.rejects(saveStreams([], {}), TypeError);
});

test('remote JSON (the base index, configs) is held to the JSON cap, without downloading it', async () => {
  await withHub(async (hub, options) => {
    hub.clearLog();
    await assert.rejects(planRemote({ ...options, maxJsonBytes: 64 }), (e) => {
      assert.equal(e.code, 'IoError');
      // The base's index and the adapter's config are read at once: either may be the first to fail.
      assert.match(
        e.message,
        /\/me\/(base\/resolve\/main\/model\.safetensors\.index|lora\/resolve\/main\/adapter_config)\.json` is \d+ bytes, more than the cap of 64 for a JSON file read whole \(PB_HTTP_MAX_JSON_BYTES\)$/,
      );
      return true;
    });
    assert.ok(
      hub.requests.length <= 2 && hub.requests.every((r) => r.range === 'bytes=0-64'),
      JSON.stringify(hub.requests),
    );
  });
});

test("the JS API reads huggingface_hub's hf://owner/repo@revision/path as hf://owner/repo/path@revision; datasets/ is refused", async () => {
  await withHub(async (hub, o) => {
    const theirs = await pb.inspect('hf://me/single@main/model.safetensors', { endpoint: o.endpoint });
    const ours = await pb.inspect('hf://me/single/model.safetensors@main', { endpoint: o.endpoint });
    assert.deepEqual(theirs, ours);
    assert.ok(theirs.tensors.length > 0);
    hub.clearLog();
    await assert.rejects(
      pb.inspect('hf://datasets/me/single@main/model.safetensors', { endpoint: o.endpoint }),
      (e) =>
        e instanceof SafetensorsError &&
        e.code === 'InvalidArgument' &&
        e.message ===
          '`hf://datasets/me/single@main/model.safetensors` names a Hub dataset, not a model repo: peft-bridge reads model repos (hf://owner/repo[@revision][/path])',
    );
    assert.equal(hub.requests.length, 0);
  });
});
