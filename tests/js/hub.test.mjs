// The Hub client (web/src/remote/hub.js) and both CLIs' `inspect hf://… / https://…` against the local fake Hub
// (tests/hub/server.mjs): request counts, Range / 200 / 416 handling, retries and resumption, ETag pinning, tokens,
// sharded repos and single-tensor reads. Nothing here talks to the real Hub.
// The CLIs run with the asynchronous execFile: the server lives in this process and must keep answering.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cliPath, hasNativeCli, makeFile, nativeCli, pb, rejectsWith } from './helpers/common.mjs';
import { startHub } from '../hub/server.mjs';

const { inspect, inspectRepo, readTensor, hubUrl, openRemote, readSafetensors } = pb;

/** A safetensors file with `count` F32 tensors of `elements` each, names padded to `nameLength`. */
function model(count, elements, { nameLength = 8, prefix = 't' } = {}) {
  const header = {};
  for (let i = 0; i < count; ++i) {
    const name = `${prefix}${String(i).padStart(nameLength, '0')}`;
    header[name] = { dtype: 'F32', shape: [elements], data_offsets: [i * elements * 4, (i + 1) * elements * 4] };
  }
  const data = new Uint8Array(count * elements * 4);
  for (let i = 0; i < data.length; ++i) data[i] = (i * 7 + 3) & 0xff;
  return makeFile(JSON.stringify(header), data);
}

const SMALL = model(4, 1000); // header ≈ 300 bytes, file ≈ 16 KB
const TAIL = model(3, 20000); // tensor t00000002 starts past 64 KiB
const BIG = model(1500, 2, { nameLength: 60 }); // header ≈ 150 KB: more than the first range
const headerEnd = (bytes) => 8 + Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));

const FILES = {
  'me/small': { 'model.safetensors': SMALL, 'tail.safetensors': TAIL, 'dir/with space#?.safetensors': SMALL },
  'me/big': { 'model.safetensors': BIG },
  'me/private': { 'model.safetensors': SMALL },
};

async function withHub(fn, options = {}) {
  const hub = await startHub({ files: FILES, tokens: { 'me/private': 'hf_secret' }, ...options });
  try {
    return await fn(hub);
  } finally {
    await hub.close();
  }
}

/** The requests a read made: each ends in one answer that is not a redirect (a CDN answer, or a small file served
 * at /resolve). The first read of a file goes through /resolve; later ones start at the CDN URL it redirected to. */
const resolves = (hub) => hub.requests.filter((r) => r.kind === 'cdn' || (r.kind === 'resolve' && r.status !== 302));

test('hubUrl builds {endpoint}/{repo}/resolve/{revision}/{path} with encoded segments', () => {
  assert.equal(
    hubUrl({ repo: 'o/r', path: 'model.safetensors', endpoint: 'http://h' }),
    'http://h/o/r/resolve/main/model.safetensors',
  );
  assert.equal(
    hubUrl({ repo: 'o/r', path: 'a b/c#?é.safetensors', revision: 'refs/pr/1', endpoint: 'http://h/' }),
    'http://h/o/r/resolve/refs%2Fpr%2F1/a%20b/c%23%3F%C3%A9.safetensors',
  );
  const saved = process.env.HF_ENDPOINT;
  try {
    delete process.env.HF_ENDPOINT;
    assert.equal(hubUrl({ repo: 'o/r', path: 'x' }), 'https://huggingface.co/o/r/resolve/main/x');
    process.env.HF_ENDPOINT = 'http://mirror.test';
    assert.equal(hubUrl({ repo: 'o/r', path: 'x', revision: 'v1' }), 'http://mirror.test/o/r/resolve/v1/x');
  } finally {
    if (saved === undefined) delete process.env.HF_ENDPOINT;
    else process.env.HF_ENDPOINT = saved;
  }
  for (const bad of [
    { repo: 'o/r', path: '../x' },
    { repo: 'o/r', path: 'a//b' },
    { repo: '', path: 'x' },
    { repo: 'o/..', path: 'x' },
  ])
    assert.throws(
      () => hubUrl({ ...bad, endpoint: 'http://h' }),
      (e) => e.code === 'InvalidArgument',
    );
});

test('inspect reads an ordinary header with one Range request, from every address form', async () => {
  const local = await inspect(SMALL);
  await withHub(async (hub) => {
    const url = `${hub.endpoint}/me/small/resolve/main/model.safetensors`;
    const forms = [
      { repo: 'me/small', path: 'model.safetensors', endpoint: hub.endpoint },
      url,
      new URL(url),
      'hf://me/small/model.safetensors',
      'hf://me/small/model.safetensors@main',
      `hf://me/small/model.safetensors@${hub.commit('me/small')}`,
    ];
    for (const source of forms) {
      hub.clearLog();
      assert.deepEqual(await inspect(source, { endpoint: hub.endpoint }), local, String(source));
      assert.equal(resolves(hub).length, 1, String(source));
      assert.equal(resolves(hub)[0].range, 'bytes=0-65535');
      assert.equal(hub.log('cdn')[0].status, 206);
    }
    // Encoded path segments reach the right file.
    assert.deepEqual(
      await inspect({ repo: 'me/small', path: 'dir/with space#?.safetensors', endpoint: hub.endpoint }),
      local,
    );
  });
});

test('a header longer than the first range takes exactly two requests', async () => {
  const local = await inspect(BIG);
  assert.ok(local.headerSize > 65536);
  await withHub(async (hub) => {
    assert.deepEqual(await inspect('hf://me/big/model.safetensors', { endpoint: hub.endpoint }), local);
    const log = resolves(hub);
    assert.equal(log.length, 2);
    assert.deepEqual(
      log.map((r) => r.range),
      ['bytes=0-65535', `bytes=65536-${headerEnd(BIG) - 1}`],
    );
  });
});

test('a server that ignores Range is read as one stream, cancelled after the header', async () => {
  const huge = model(2, 1 << 20); // 8 MB: the server would need a while to send it all
  await withHub(async (hub) => {
    hub.setFile('me/huge', 'model.safetensors', huge);
    for (const [repo, bytes] of [
      ['me/small', SMALL],
      ['me/big', BIG],
      ['me/huge', huge],
    ]) {
      hub.faults.length = 0;
      hub.faults.push({ type: 'ignoreRange' }, { type: 'slow', delay: 2, chunk: 16384 });
      hub.clearLog();
      assert.deepEqual(
        await inspect(`hf://${repo}/model.safetensors`, { endpoint: hub.endpoint }),
        await inspect(bytes),
        repo,
      );
      assert.equal(resolves(hub).length, 1, repo);
      assert.equal(hub.log('cdn')[0].status, 200);
    }
    // The server sees the client leave (its 'close') a moment after the cancel.
    for (let i = 0; i < 100 && hub.log('cdn')[0].completed === null; ++i)
      await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(hub.log('cdn')[0].completed, false, 'the 8 MB body was cancelled, not read to its end');
  });
});

test('an empty file (416 to the first range) is HeaderTooSmall, as locally', async () => {
  await withHub(async (hub) => {
    hub.setFile('me/empty', 'model.safetensors', new Uint8Array(0));
    await rejectsWith(inspect('hf://me/empty/model.safetensors', { endpoint: hub.endpoint }), 'HeaderTooSmall');
    assert.equal(hub.log('cdn')[0].status, 416);
  });
});

test('invalid remote files fail with the same errors as local ones', async () => {
  const cases = [
    makeFile('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', new Uint8Array(4)),
    makeFile('{"a":1}'),
    SMALL.slice(0, 100),
  ];
  await withHub(async (hub) => {
    for (const [i, bytes] of cases.entries()) {
      hub.setFile('me/bad', `${i}.safetensors`, bytes);
      let expected;
      await inspect(bytes).catch((e) => (expected = e));
      assert.ok(expected);
      await assert.rejects(inspect(`hf://me/bad/${i}.safetensors`, { endpoint: hub.endpoint }), (e) => {
        assert.equal(e.code, expected.code);
        assert.equal(e.message, expected.message);
        return true;
      });
    }
  });
});

test('503 answers are retried (Retry-After honoured), then the read succeeds', async () => {
  const local = await inspect(SMALL);
  await withHub(async (hub) => {
    hub.faults.push(
      { type: 'status', status: 503, retryAfter: 1, times: 1 },
      { type: 'status', status: 502, skip: 1, times: 1 },
    );
    const started = Date.now();
    assert.deepEqual(
      await inspect('hf://me/small/model.safetensors', { endpoint: hub.endpoint, retryDelay: 10 }),
      local,
    );
    assert.ok(Date.now() - started >= 900, 'waited for Retry-After: 1');
    assert.deepEqual(
      hub.log('cdn').map((r) => r.status),
      [503, 502, 206],
    );

    hub.clearLog();
    hub.faults.push({ type: 'status', status: 503 });
    await rejectsWith(
      inspect('hf://me/small/model.safetensors', { endpoint: hub.endpoint, retries: 2, retryDelay: 1 }),
      'IoError',
      /^cannot open `hf:\/\/me\/small\/model\.safetensors`: HTTP 503: Injected failure$/,
    );
    assert.equal(resolves(hub).length, 3);

    // A long Retry-After is not waited for.
    hub.clearLog();
    hub.faults.length = 0;
    hub.faults.push({ type: 'status', status: 503, retryAfter: 3600 });
    await rejectsWith(inspect('hf://me/small/model.safetensors', { endpoint: hub.endpoint }), 'IoError', /HTTP 503/);
    assert.equal(resolves(hub).length, 1);
  });
});

test('a truncated body is resumed at the byte reached', async () => {
  await withHub(async (hub) => {
    hub.faults.push({ type: 'truncate', at: 1000, times: 1 });
    assert.deepEqual(
      await inspect('hf://me/big/model.safetensors', { endpoint: hub.endpoint, retryDelay: 1 }),
      await inspect(BIG),
    );
    assert.deepEqual(
      resolves(hub).map((r) => r.range),
      ['bytes=0-65535', 'bytes=1000-65535', `bytes=65536-${headerEnd(BIG) - 1}`],
    );

    // Same for a tensor read, and for a server that ignores Range on the retry (the stream is skipped to the byte).
    hub.clearLog();
    hub.faults.push(
      { type: 'truncate', at: 5000, path: 'tail.safetensors', skip: 1, times: 1 },
      { type: 'ignoreRange', skip: 2, times: 1 },
    );
    const header = await inspect(TAIL);
    const t = header.tensors[2];
    const start = 8 + header.headerSize + t.dataOffsets[0];
    assert.deepEqual(
      await readTensor('hf://me/small/tail.safetensors', t.name, { endpoint: hub.endpoint, retryDelay: 1 }),
      TAIL.slice(start, start + t.byteLength),
    );
    assert.deepEqual(
      hub.log('cdn').map((r) => r.status),
      [206, 206, 200],
    );
  });
});

test('a wrong Content-Range is an error, not retried', async () => {
  await withHub(async (hub) => {
    hub.faults.push({ type: 'wrongContentRange' });
    await rejectsWith(
      inspect('hf://me/small/model.safetensors', { endpoint: hub.endpoint }),
      'IoError',
      /^cannot read `hf:\/\/me\/small\/model\.safetensors`: wrong Content-Range `bytes 1-\d+\/\d+` in answer to bytes=0-65535$/,
    );
    assert.equal(resolves(hub).length, 1);
  });
});

test('a file that changes between two requests fails with IoError naming the change', async () => {
  await withHub(async (hub) => {
    hub.faults.push({ type: 'change', after: 1, path: 'me/big/model.safetensors' });
    await rejectsWith(
      inspect('hf://me/big/model.safetensors', { endpoint: hub.endpoint }),
      'IoError',
      /^`hf:\/\/me\/big\/model\.safetensors` changed while being read \(ETag "[0-9a-f]{64}" became "[0-9a-f]{64}"\)$/,
    );
    // A tensor read after the header is held to the header's ETag too.
    hub.faults.push({ type: 'change', after: 1, path: 'me/small/tail.safetensors' });
    await rejectsWith(
      readTensor('hf://me/small/tail.safetensors', 't00000002', { endpoint: hub.endpoint }),
      'IoError',
      /changed while being read/,
    );
  });
});

test('private repos: 401 without a token, read with one', async () => {
  const local = await inspect(SMALL);
  await withHub(async (hub) => {
    const address = { repo: 'me/private', path: 'model.safetensors', endpoint: hub.endpoint };
    await rejectsWith(
      inspect(address),
      'IoError',
      new RegExp(
        `^cannot open \`${hubUrl(address).replace(/[.?]/g, '\\$&')}\`: HTTP 401: Repository not found \\(no token was sent\\)$`,
      ),
    );
    await rejectsWith(inspect({ ...address, token: 'wrong' }), 'IoError', /HTTP 401: Repository not found$/);
    hub.clearLog();
    assert.deepEqual(await inspect({ ...address, token: 'hf_secret' }), local);
    assert.deepEqual(
      await inspect('hf://me/private/model.safetensors', { endpoint: hub.endpoint, token: 'hf_secret' }),
      local,
    );
    assert.ok(resolves(hub).every((r) => r.auth === 'Bearer hf_secret'));
  });
});

test('404 names the file and the Hub reason', async () => {
  await withHub(async (hub) => {
    await rejectsWith(
      inspect('hf://me/small/nope.safetensors', { endpoint: hub.endpoint }),
      'IoError',
      /^cannot open `hf:\/\/me\/small\/nope\.safetensors`: HTTP 404: Entry not found$/,
    );
    await rejectsWith(
      inspect('hf://me/none/model.safetensors', { endpoint: hub.endpoint }),
      'IoError',
      /HTTP 404: Repository not found$/,
    );
    await rejectsWith(
      inspect('hf://me/small/model.safetensors@v9', { endpoint: hub.endpoint }),
      'IoError',
      /HTTP 404: Invalid rev id: v9$/,
    );
  });
});

test('an AbortSignal stops a slow read, and an aborted one sends nothing', async () => {
  await withHub(async (hub) => {
    hub.setFile('me/huge', 'model.safetensors', model(2, 1 << 20));
    hub.faults.push({ type: 'ignoreRange' }, { type: 'slow', delay: 200, chunk: 4 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const started = Date.now();
    await assert.rejects(
      inspect('hf://me/huge/model.safetensors', { endpoint: hub.endpoint, signal: controller.signal }),
      (e) => e.name === 'AbortError',
    );
    assert.ok(Date.now() - started < 2000);

    hub.clearLog();
    await assert.rejects(
      inspect('hf://me/small/model.safetensors', { endpoint: hub.endpoint, signal: AbortSignal.abort() }),
      (e) => e.name === 'AbortError',
    );
    assert.equal(hub.requests.length, 0);
    // Aborting during a backoff wait ends it at once.
    hub.faults.length = 0;
    hub.faults.push({ type: 'status', status: 503, retryAfter: 5 });
    const c2 = new AbortController();
    setTimeout(() => c2.abort(), 100);
    const t2 = Date.now();
    await assert.rejects(
      inspect('hf://me/small/model.safetensors', { endpoint: hub.endpoint, signal: c2.signal }),
      (e) => e.name === 'AbortError',
    );
    assert.ok(Date.now() - t2 < 2000);
  });
});

test('inspectRepo inspects every shard of a sharded repo, at the index commit', async () => {
  const shards = [model(3, 10, { prefix: 'a' }), model(2, 10, { prefix: 'b' }), model(1, 10, { prefix: 'c' })];
  const names = [
    'model-00001-of-00003.safetensors',
    'model-00002-of-00003.safetensors',
    'model-00003-of-00003.safetensors',
  ];
  const weightMap = {};
  for (const [i, bytes] of shards.entries())
    for (const t of (await inspect(bytes)).tensors) weightMap[t.name] = names[i];
  const files = {
    'model.safetensors.index.json': JSON.stringify({ metadata: { total_size: 1 }, weight_map: weightMap }),
  };
  names.forEach((n, i) => (files[n] = shards[i]));
  await withHub(async (hub) => {
    hub.addRepo('me/sharded', files);
    const info = await inspectRepo({ repo: 'me/sharded', endpoint: hub.endpoint, concurrency: 2 });
    assert.equal(info.commit, hub.commit('me/sharded'));
    assert.equal(info.revision, info.commit);
    assert.deepEqual(info.index.weight_map, weightMap);
    assert.deepEqual(
      info.shards.map((s) => s.path),
      names,
    );
    for (const [i, s] of info.shards.entries()) assert.deepEqual(s.header, await inspect(shards[i]));
    const log = hub.log('resolve'); // each file's first read goes through /resolve, at the revision asked for
    assert.equal(log.length, 4, 'the index, then one request per shard');
    assert.ok(log.slice(1).every((r) => r.revision === info.commit));

    // No index: the single model.safetensors.
    const single = await inspectRepo({ repo: 'me/small', endpoint: hub.endpoint });
    assert.equal(single.index, null);
    assert.deepEqual(single.shards, [{ path: 'model.safetensors', header: await inspect(SMALL) }]);

    // Shard names that leave the repo directory are refused before any shard is read.
    for (const evil of ['../evil.safetensors', 'sub/x.safetensors', 'x.bin', '.hidden.safetensors']) {
      hub.setFile('me/evil', 'model.safetensors.index.json', JSON.stringify({ weight_map: { a: evil } }));
      hub.clearLog();
      await rejectsWith(
        inspectRepo({ repo: 'me/evil', endpoint: hub.endpoint }),
        'InvalidConfig',
        /^model\.safetensors\.index\.json: shard name `.*` is not a plain \.safetensors file name \(no paths, no traversal\)$/,
      );
      assert.equal(resolves(hub).length, 1, evil);
    }

    // A broken shard: the error names it.
    hub.setFile('me/sharded', names[1], makeFile('{"b00000000":1}'));
    await rejectsWith(
      inspectRepo({ repo: 'me/sharded', endpoint: hub.endpoint }),
      'InvalidHeaderDeserialization',
      /^model-00002-of-00003\.safetensors: /,
    );
    // A tensor the index puts in a shard that does not hold it.
    hub.setFile('me/sharded', names[1], shards[1]);
    hub.setFile(
      'me/sharded',
      'model.safetensors.index.json',
      JSON.stringify({ weight_map: { ...weightMap, ghost: names[0] } }),
    );
    // The core's check and message, as both merges give them (src/merge/model_index.cc).
    await rejectsWith(
      inspectRepo({ repo: 'me/sharded', endpoint: hub.endpoint }),
      'InvalidConfig',
      /^1 tensor\(s\) of model\.safetensors\.index\.json are not in the shard it names:\n  ghost \(in model-00001-of-00003\.safetensors\)$/,
    );
    // An empty weight_map and a 100,000-deep index are refused before any shard is read.
    for (const [text, message] of [
      ['{"weight_map": {}}', /weight_map is empty/],
      [`{"weight_map": ${'['.repeat(100000)}}`, /nesting deeper than 128 levels at byte 142/],
    ]) {
      hub.setFile('me/evil', 'model.safetensors.index.json', text);
      hub.clearLog();
      await rejectsWith(inspectRepo({ repo: 'me/evil', endpoint: hub.endpoint }), 'InvalidConfig', message);
      assert.ok(
        resolves(hub).length > 0 && resolves(hub).every((r) => r.path === 'model.safetensors.index.json'),
        'no shard was read',
      );
    }
  });
});

test('readTensor fetches one tensor with one Range request after the header', async () => {
  const header = await inspect(TAIL);
  await withHub(async (hub) => {
    for (const t of header.tensors) {
      hub.clearLog();
      const start = 8 + header.headerSize + t.dataOffsets[0];
      const bytes = await readTensor({ repo: 'me/small', path: 'tail.safetensors', endpoint: hub.endpoint }, t.name);
      assert.deepEqual(bytes, TAIL.slice(start, start + t.byteLength));
      const log = resolves(hub);
      // The first request brought the first 64 KiB: a tensor inside it costs nothing more.
      if (start + t.byteLength <= 65536) assert.equal(log.length, 1, t.name);
      else {
        assert.equal(log.length, 2, t.name);
        assert.equal(log[1].range, `bytes=${Math.max(start, 65536)}-${start + t.byteLength - 1}`);
        // The second range went straight to the CDN URL the first one's redirect gave: one round trip, not two.
        assert.equal(hub.log('resolve').length, 1, t.name);
        assert.equal(hub.requests.at(-1).kind, 'cdn');
      }
    }
    await rejectsWith(
      readTensor('hf://me/small/tail.safetensors', 'nope', { endpoint: hub.endpoint }),
      'InvalidArgument',
      /no tensor named `nope`/,
    );
    // Local random-access sources too.
    assert.deepEqual(
      await readTensor(new Blob([TAIL]), 't00000001'),
      await readTensor('hf://me/small/tail.safetensors', 't00000001', { endpoint: hub.endpoint }),
    );
  });
});

test('reads of one file run several at a time once the first has landed: one resolve, the same bytes', async () => {
  await withHub(async (hub) => {
    hub.latency = 60;
    const file = await openRemote('hf://me/small/tail.safetensors', { endpoint: hub.endpoint, readers: 4 });
    try {
      hub.clearLog();
      const piece = 4096;
      const offsets = Array.from({ length: 12 }, (_, i) => 65536 + i * piece);
      const t0 = performance.now();
      const parts = await Promise.all(offsets.map((o) => file.read(o, piece)));
      const elapsed = performance.now() - t0;
      offsets.forEach((o, i) => assert.deepEqual(parts[i], TAIL.slice(o, o + piece), `at ${o}`));
      // 12 round trips one at a time take 720 ms at least; four at a time about 180.
      assert.ok(elapsed < 12 * 60 * 0.6, `${elapsed} ms`);
      assert.equal(file.maxInFlight, 4);
      assert.ok(hub.maxInFlight >= 3, `${hub.maxInFlight} requests at once at the stand-in`);
      // Every read went straight to the CDN URL the first request landed at, held to its ETag: no second resolve.
      assert.equal(hub.log('resolve').length, 0);
      assert.equal(hub.log('cdn').length, 12);
      assert.ok(hub.log('cdn').every((r) => r.status === 206));
      assert.equal(file.requests, 2 + 12, 'resolve + CDN, then one CDN request per read (counted over the readers)');
    } finally {
      await file.close();
    }
  });
});

test("reads in flight follow the caller's signal with one listener per file, none once they end; abort ends them all", async () => {
  const { getEventListeners } = await import('node:events');
  await withHub(async (hub) => {
    const controller = new AbortController();
    const { signal } = controller;
    const file = await openRemote('hf://me/small/tail.safetensors', { endpoint: hub.endpoint, readers: 4, signal });
    try {
      assert.equal(getEventListeners(signal, 'abort').length, 0);
      hub.latency = 200;
      const reads = Array.from({ length: 8 }, (_, i) => file.read(65536 + i * 1000, 1000));
      for (let i = 0; i < 50 && hub.inFlight < 4; ++i) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.equal(hub.inFlight, 4);
      assert.equal(getEventListeners(signal, 'abort').length, 1);
      const reason = new Error('stop');
      controller.abort(reason);
      for (const r of await Promise.allSettled(reads)) assert.equal(r.reason, reason);
      for (let i = 0; i < 50 && hub.inFlight > 0; ++i) await new Promise((resolve) => setTimeout(resolve, 5));
      assert.equal(hub.inFlight, 0, 'the four requests were dropped, well before their answers');
      assert.equal(getEventListeners(signal, 'abort').length, 0);
    } finally {
      await file.close();
    }
  });
});

test('a server that ignores Range is read one read at a time (the policy allows no second reader)', async () => {
  await withHub(async (hub) => {
    hub.faults.push({ type: 'ignoreRange' });
    const file = await openRemote('hf://me/small/tail.safetensors', { endpoint: hub.endpoint, readers: 4 });
    try {
      const parts = await Promise.all([70000, 80000, 90000].map((o) => file.read(o, 100)));
      [70000, 80000, 90000].forEach((o, i) => assert.deepEqual(parts[i], TAIL.slice(o, o + 100)));
      assert.equal(file.maxInFlight, 1);
    } finally {
      await file.close();
    }
  });
});

test('a file that changes under one of several reads in flight fails that read with the change; the others are held to the ETag', async () => {
  await withHub(async (hub) => {
    const file = await openRemote('hf://me/small/tail.safetensors', {
      endpoint: hub.endpoint,
      readers: 4,
      retryDelay: 10,
    });
    try {
      hub.latency = 30;
      // The file changes after two more CDN reads: its old CDN URL then answers 403, and the start URL the new ETag.
      hub.faults.push({ type: 'change', path: 'tail.safetensors', after: 2 });
      const reads = [70000, 80000, 90000, 100000, 110000, 120000].map((o) => file.read(o, 1000));
      const results = await Promise.allSettled(reads);
      const failed = results.filter((r) => r.status === 'rejected');
      assert.equal(failed.length, 4, 'the two reads served before the change succeed, the four after it fail');
      for (const r of failed)
        assert.match(
          r.reason.message,
          /^`hf:\/\/me\/small\/tail\.safetensors` changed while being read \(ETag "[0-9a-f]{64}" became "[0-9a-f]{64}"\)$/,
        );
      // What did come back is the first version's.
      results.forEach(
        (r, i) =>
          r.status === 'fulfilled' && assert.deepEqual(r.value, TAIL.slice(70000 + i * 10000, 71000 + i * 10000)),
      );
      // Back through the start URL after a 403 at the old CDN URL: at most once per failed read.
      assert.ok(hub.log('resolve', 'tail.safetensors').length <= 1 + 4);
    } finally {
      await file.close();
    }
  });
});

test('openRemote gives a {size, read} source the streaming reader accepts', async () => {
  await withHub(async (hub) => {
    const file = await openRemote('hf://me/small/tail.safetensors', { endpoint: hub.endpoint });
    try {
      assert.equal(file.size, TAIL.length);
      assert.match(file.etag, /^"[0-9a-f]{64}"$/);
      const parts = [];
      for await (const ev of readSafetensors(file)) if (ev.type === 'data') parts.push(ev.bytes);
      const header = await inspect(TAIL);
      assert.equal(
        parts.reduce((n, p) => n + p.length, 0),
        header.dataSize,
      );
    } finally {
      await file.close();
    }
  });
});

// ---- the CLIs ----

function runCli(command, args, env) {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { env: { ...process.env, ...env }, encoding: 'latin1', timeout: 60000 },
      (error, stdout, stderr) => resolve({ status: error ? error.code : 0, stdout, stderr }),
    );
  });
}
const npmCli = (args, env) => runCli(process.execPath, [cliPath, ...args], env);
const native = (args, env) => runCli(nativeCli, args, env);

test('npm and native CLIs print the same for hf:// and URLs as for the local file, with the same requests', async (t) => {
  await withHub(async (hub) => {
    const env = { HF_ENDPOINT: hub.endpoint, HF_TOKEN: '' };
    const clis = [['npm', npmCli]];
    if (hasNativeCli) clis.push(['native', native]);
    else t.diagnostic('build/native/peft-bridge not built: npm CLI only');
    const { writeFileSync, mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = mkdtempSync(join(tmpdir(), 'pb-hub-'));
    try {
      for (const [repo, bytes, requests] of [
        ['me/small', SMALL, 1],
        ['me/big', BIG, 2],
      ]) {
        const localPath = join(dir, `${repo.replace('/', '_')}.safetensors`);
        writeFileSync(localPath, bytes);
        for (const json of [[], ['--json']]) {
          const local = await npmCli(['inspect', localPath, ...json]);
          assert.equal(local.status, 0, local.stderr);
          for (const address of [
            `hf://${repo}/model.safetensors`,
            `${hub.endpoint}/${repo}/resolve/main/model.safetensors`,
          ]) {
            for (const [name, run] of clis) {
              hub.clearLog();
              const r = await run(['inspect', address, ...json], env);
              assert.equal(r.status, 0, `${name} ${address}: ${r.stderr}`);
              assert.ok(r.stdout === local.stdout, `${name} ${address}: output differs from the local file's`);
              assert.equal(resolves(hub).length, requests, `${name} ${address}`);
            }
          }
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }

    // Failures print the same bytes too.
    const cases = [
      ['inspect', 'hf://me/small/nope.safetensors'],
      ['inspect', 'hf://me/small/nope.safetensors', '--json'],
      ['inspect', 'hf://me/private/model.safetensors'],
      ['inspect', 'hf://me/small/../x.safetensors'],
      ['inspect', 'hf://me'], // hf://me/small is the repo: inspect lists its files (remote-cli.test.mjs)
      ['inspect', 'hf://me/small/model.safetensors@'],
      ['inspect', 'hf://me/big/model.safetensors'], // changes after its first request
    ];
    for (const args of cases) {
      const results = [];
      for (const [, run] of clis) {
        hub.setFile('me/big', 'model.safetensors', BIG); // the same ETags for both CLIs
        hub.faults.length = 0;
        hub.faults.push({ type: 'change', after: 1, path: 'me/big/model.safetensors' });
        results.push(await run(args, env));
      }
      assert.equal(results[0].status, 1, `${args.join(' ')}: exit ${results[0].status}`);
      assert.ok(results[0].stdout.length + results[0].stderr.length > 0);
      for (const r of results.slice(1)) assert.deepEqual(r, results[0], args.join(' '));
    }
    hub.faults.length = 0;

    // HF_TOKEN opens private repos, and goes to the endpoint's origin only.
    const foreign = await startHub({ files: FILES });
    try {
      for (const [name, run] of clis) {
        const ok = await run(['inspect', 'hf://me/private/model.safetensors'], { ...env, HF_TOKEN: 'hf_secret' });
        assert.equal(ok.status, 0, `${name}: ${ok.stderr}`);
        const other = await run(['inspect', `${foreign.endpoint}/me/small/resolve/main/model.safetensors`], {
          ...env,
          HF_TOKEN: 'hf_secret',
        });
        assert.equal(other.status, 0, other.stderr);
        assert.ok(
          foreign.requests.every((r) => r.auth === null),
          `${name} sent HF_TOKEN to another server`,
        );
      }
    } finally {
      await foreign.close();
    }

    // Retries in both: a 503 and a truncated body on the way still give the same output.
    for (const [name, run] of clis) {
      hub.faults.length = 0;
      hub.faults.push(
        { type: 'status', status: 503, retryAfter: 0, times: 1 },
        { type: 'truncate', at: 3000, skip: 1, times: 1 },
      );
      hub.clearLog();
      const r = await run(['inspect', 'hf://me/big/model.safetensors', '--json'], env);
      assert.equal(r.status, 0, `${name}: ${r.stderr}`);
      assert.equal(JSON.parse(r.stdout).headerSize, (await inspect(BIG)).headerSize);
      // 503, then a body cut at 3000 bytes, resumed there. (The native CLI knows the header's end by then and asks
      // for the rest of the header at once; the npm one finishes the first range first.)
      const ranges = resolves(hub).map((q) => q.range);
      assert.deepEqual(ranges.slice(0, 2), ['bytes=0-65535', 'bytes=0-65535'], name);
      assert.match(ranges[2], /^bytes=3000-/, name);
      assert.ok(ranges.at(-1).endsWith(`-${headerEnd(BIG) - 1}`) && ranges.length <= 4, `${name}: ${ranges}`);
      // A server ignoring Range: one request, cancelled after the header.
      hub.faults.length = 0;
      hub.faults.push({ type: 'ignoreRange' });
      hub.clearLog();
      const s = await run(['inspect', 'hf://me/big/model.safetensors', '--json'], env);
      assert.equal(s.status, 0, `${name}: ${s.stderr}`);
      assert.equal(resolves(hub).length, 1, name);
    }
  });
});
