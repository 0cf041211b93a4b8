// pushToHub (web/src/remote/push.js, over @huggingface/hub's commit) against the local Hub stand-in's commit API: every
// kind of content (bytes, Blob, a Node file path, a generated stream replayed), LFS and regular files, multipart,
// branches and pull requests, read back with @huggingface/hub's listFiles / downloadFile and with our inspect;
// retried faults, faults that fail leaving the repo unchanged, bad tokens, bad repo names, abort.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { downloadFile, listFiles } from '@huggingface/hub';
import { startHub } from '../hub/server.mjs';
import { makeFile, f32Bytes } from './helpers/common.mjs';

const pb = await import('../../web/src/node.js');
const { pushToHub, inspect } = pb;

const dir = mkdtempSync(join(tmpdir(), 'pb-push-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

const TOKEN = 'hf_write_me';
const sha = (bytes) => createHash('sha256').update(bytes).digest('hex');

/** A safetensors file with one F32 tensor of n values. */
const safetensors = (n, value = 1) =>
  makeFile(JSON.stringify({ w: { dtype: 'F32', shape: [n], data_offsets: [0, 4 * n] } }), f32Bytes(n, value));

/** A deterministic generated file of `size` bytes in `chunk`-byte pieces, counting how often it is replayed. */
function generated(size, chunk = 65536) {
  const g = {
    runs: 0,
    size,
    content: () => {
      g.runs += 1;
      return (async function* () {
        for (let at = 0; at < size; at += chunk) {
          const piece = new Uint8Array(Math.min(chunk, size - at));
          for (let i = 0; i < piece.length; i++) piece[i] = ((at + i) * 2654435761) >>> 24;
          yield piece;
        }
      })();
    },
  };
  g.bytes = () => {
    const out = new Uint8Array(size);
    for (let i = 0; i < size; i++) out[i] = (i * 2654435761) >>> 24;
    return out;
  };
  return g;
}

async function listing(hub, repo, revision) {
  const out = {};
  for await (const f of listFiles({ repo, hubUrl: hub.endpoint, revision, recursive: true }))
    if (f.type === 'file') out[f.path] = { size: f.size, lfs: !!f.lfs };
  return out;
}

async function download(hub, repo, path, revision) {
  const blob = await downloadFile({ repo, path, revision, hubUrl: hub.endpoint });
  return new Uint8Array(await blob.arrayBuffer());
}

test('bytes, a Blob, a file path and a generated stream: one commit, LFS vs regular, read back with huggingface.js and inspect', async (t) => {
  const hub = await startHub({ owners: { me: TOKEN } });
  t.after(() => hub.close());
  const model = safetensors(3000, 2); // 12 KB: LFS by its name
  const adapterPath = join(dir, 'adapter_model.safetensors');
  const adapter = safetensors(64, 0.5);
  writeFileSync(adapterPath, adapter);
  const gen = generated(200_000);
  const events = [];
  const result = await pushToHub({
    repo: 'me/out',
    createRepo: true,
    token: TOKEN,
    endpoint: hub.endpoint,
    commitMessage: 'merged with peft-bridge',
    files: [
      { path: 'model.safetensors', content: model },
      { path: 'config.json', content: new Blob(['{"model_type":"llama"}']) },
      { path: 'lora/adapter_model.safetensors', content: adapterPath },
      { path: 'blob.bin', content: gen.content, size: gen.size },
    ],
    onProgress: (e) => events.push(e),
  });
  assert.match(result.commit, /^[0-9a-f]{40}$/);
  assert.equal(result.commit, hub.commit('me/out'));
  assert.equal(result.pullRequestUrl, null);
  assert.deepEqual(result.files, [
    { path: 'model.safetensors', size: model.length, lfs: true },
    { path: 'config.json', size: 22, lfs: false },
    { path: 'lora/adapter_model.safetensors', size: adapter.length, lfs: true },
    { path: 'blob.bin', size: 200_000, lfs: true },
  ]);
  assert.deepEqual(await listing(hub, 'me/out'), {
    'model.safetensors': { size: model.length, lfs: true },
    'config.json': { size: 22, lfs: false },
    'lora/adapter_model.safetensors': { size: adapter.length, lfs: true },
    'blob.bin': { size: 200_000, lfs: true },
  });
  assert.deepEqual(await download(hub, 'me/out', 'model.safetensors'), model);
  assert.deepEqual(await download(hub, 'me/out', 'lora/adapter_model.safetensors'), adapter);
  assert.deepEqual(sha(await download(hub, 'me/out', 'blob.bin')), sha(gen.bytes()));
  assert.equal(new TextDecoder().decode(await download(hub, 'me/out', 'config.json')), '{"model_type":"llama"}');
  // our own reader, through the Hub's resolve → CDN redirect
  const info = await inspect('hf://me/out/model.safetensors', { endpoint: hub.endpoint });
  assert.deepEqual(
    info.tensors.map((x) => [x.name, x.dtype, x.shape]),
    [['w', 'F32', [3000]]],
  );
  // one commit; a generated file replayed for the preupload sample (512 bytes), the hash and the upload
  assert.equal(hub.log('commit').length, 1);
  assert.equal(gen.runs, 3);
  const phases = events.map((e) => e.phase).filter((p, i, a) => p !== a[i - 1]);
  for (const p of ['preuploading', 'uploadingLargeFiles', 'committing', 'done']) assert.ok(phases.includes(p), p);
  const last = (phase, path) => events.filter((e) => e.phase === phase && e.path === path).at(-1);
  assert.deepEqual(last('hashing', 'blob.bin'), { phase: 'hashing', path: 'blob.bin', bytes: 200_000, total: 200_000 });
  assert.deepEqual(last('uploading', 'blob.bin'), {
    phase: 'uploading',
    path: 'blob.bin',
    bytes: 200_000,
    total: 200_000,
  });
  // uploads need no token (pre-signed); every API call carried it
  for (const r of hub.requests.filter((r) => ['create', 'preupload', 'batch', 'commit'].includes(r.kind)))
    assert.equal(r.auth, `Bearer ${TOKEN}`);
});

test('multipart: a generated file uploaded in parts, one replay, a 503 on a part retried, a reset part retried', async (t) => {
  const hub = await startHub({
    files: { 'me/big': { 'README.md': 'x' } },
    owners: { me: TOKEN },
    multipartThreshold: 1 << 20,
    partSize: 256 * 1024,
  });
  t.after(() => hub.close());
  const gen = generated(1_500_000, 100_000);
  hub.faults.push({ on: 'part', type: 'status', status: 503, skip: 1, times: 1 });
  hub.faults.push({ on: 'part', type: 'reset', at: 1000, skip: 3, times: 1 });
  const retries = [];
  const result = await pushToHub({
    repo: 'me/big',
    token: TOKEN,
    endpoint: hub.endpoint,
    retryDelay: 5,
    files: [{ path: 'model.safetensors', content: gen.content, size: gen.size }],
    onProgress: (e) => e.phase === 'retry' && retries.push(e),
  });
  assert.equal(retries.length, 2);
  assert.equal(retries[0].status, 503);
  assert.equal(hub.log('part').filter((r) => r.status === 200).length, Math.ceil(1_500_000 / (256 * 1024)));
  assert.equal(hub.log('complete').length, 1);
  assert.equal(sha(await download(hub, 'me/big', 'model.safetensors')), sha(gen.bytes()));
  assert.deepEqual((await listing(hub, 'me/big'))['model.safetensors'], { size: 1_500_000, lfs: true });
  assert.equal(result.commit, hub.commit('me/big'));
  // sample + hash + upload, and one more for each retried part (replayed to its start)
  assert.equal(gen.runs, 5);
});

test('createPr opens refs/pr/N and leaves main as it was; a branch is created from main and committed to', async (t) => {
  const hub = await startHub({
    files: { 'me/model': { 'config.json': '{}', 'model.safetensors': safetensors(4) } },
    owners: { me: TOKEN },
  });
  t.after(() => hub.close());
  const main = hub.commit('me/model');
  const merged = safetensors(4, 3);
  const pr = await pushToHub({
    repo: 'me/model',
    token: TOKEN,
    endpoint: hub.endpoint,
    createPr: true,
    files: [{ path: 'model.safetensors', content: merged }],
  });
  assert.equal(hub.commit('me/model'), main, 'main unchanged');
  assert.deepEqual(hub.branches('me/model'), ['refs/pr/1']);
  assert.equal(pr.commit, hub.commit('me/model', 'refs/pr/1'));
  assert.match(pr.pullRequestUrl, /\/me\/model\/discussions\/1$/);
  assert.deepEqual(await download(hub, 'me/model', 'model.safetensors', 'refs/pr/1'), merged);
  assert.deepEqual(await download(hub, 'me/model', 'model.safetensors'), safetensors(4));
  assert.deepEqual(Object.keys(await listing(hub, 'me/model', 'refs/pr/1')).sort(), [
    'config.json',
    'model.safetensors',
  ]);
  // the LFS object was already uploaded for the PR: a branch push of the same bytes uploads nothing
  const before = hub.log('upload').length;
  const dev = await pushToHub({
    repo: 'me/model',
    token: TOKEN,
    endpoint: hub.endpoint,
    branch: 'dev',
    files: [{ path: 'model.safetensors', content: merged }],
  });
  assert.equal(hub.log('upload').length, before);
  assert.equal(dev.branch, 'dev');
  assert.equal(dev.commit, hub.commit('me/model', 'dev'));
  assert.equal(hub.commit('me/model'), main);
  assert.deepEqual(await download(hub, 'me/model', 'model.safetensors', 'dev'), merged);
  // our inspect reads the branch too
  const info = await inspect('hf://me/model/model.safetensors@dev', { endpoint: hub.endpoint });
  assert.equal(info.tensors[0].shape[0], 4);
  // a PR against the branch
  const pr2 = await pushToHub({
    repo: 'me/model',
    token: TOKEN,
    endpoint: hub.endpoint,
    branch: 'dev',
    createPr: true,
    files: [{ path: 'extra.json', content: new TextEncoder().encode('{"a":1}') }],
  });
  assert.match(pr2.pullRequestUrl, /discussions\/2$/);
  assert.deepEqual(Object.keys(await listing(hub, 'me/model', 'refs/pr/2')).sort(), [
    'config.json',
    'extra.json',
    'model.safetensors',
  ]);
});

test('failures leave no commit: a commit refused, an upload failing past its retries, an abort; a second push reuses the uploads', async (t) => {
  const hub = await startHub({ files: { 'me/m': { 'README.md': 'hello' } }, owners: { me: TOKEN } });
  t.after(() => hub.close());
  const before = hub.commit('me/m');
  const model = safetensors(5000, 7);
  const files = [
    { path: 'model.safetensors', content: model },
    { path: 'config.json', content: new TextEncoder().encode('{}') },
  ];

  // the commit call fails (500): not retried, nothing committed, the uploaded object invisible
  hub.faults.push({ on: 'commit', type: 'status', status: 500, times: 1 });
  await assert.rejects(
    pushToHub({ repo: 'me/m', token: TOKEN, endpoint: hub.endpoint, retryDelay: 5, files }),
    (e) => e.code === 'IoError' && /500/.test(e.message),
  );
  assert.equal(hub.log('commit').length, 1);
  assert.equal(hub.commit('me/m'), before);
  assert.deepEqual([...hub.files('me/m').keys()], ['README.md']);
  assert.deepEqual(hub.pendingObjects(), [sha(model)]);
  assert.equal(
    (await fetch(`${hub.endpoint}/cdn/${sha(model)}`)).status,
    404,
    'uncommitted LFS objects are not served',
  );

  // the second push finds the object stored: no upload, one commit
  hub.clearLog();
  const ok = await pushToHub({ repo: 'me/m', token: TOKEN, endpoint: hub.endpoint, files });
  assert.equal(hub.log('upload').length, 0);
  assert.equal(ok.commit, hub.commit('me/m'));
  assert.deepEqual(await download(hub, 'me/m', 'model.safetensors'), model);

  // an upload that keeps failing: retried `retries` times, then the push fails with nothing committed
  const after = hub.commit('me/m');
  const other = safetensors(5000, 8);
  hub.clearLog();
  hub.faults.push({ on: 'upload', type: 'status', status: 502, times: 10 });
  await assert.rejects(
    pushToHub({
      repo: 'me/m',
      token: TOKEN,
      endpoint: hub.endpoint,
      retries: 2,
      retryDelay: 5,
      files: [{ path: 'model.safetensors', content: other }],
    }),
    (e) => e.code === 'IoError' && /502/.test(e.message),
  );
  assert.equal(hub.log('upload').length, 3);
  assert.equal(hub.log('commit').length, 0);
  assert.equal(hub.commit('me/m'), after);
  hub.faults.length = 0;

  // abort during the upload
  const controller = new AbortController();
  const gen = generated(3_000_000, 1000);
  await assert.rejects(
    pushToHub({
      repo: 'me/m',
      token: TOKEN,
      endpoint: hub.endpoint,
      signal: controller.signal,
      files: [{ path: 'model.safetensors', content: gen.content, size: gen.size }],
      onProgress: (e) => e.phase === 'uploading' && e.bytes > 1_000_000 && controller.abort(),
    }),
    (e) => e.name === 'AbortError',
  );
  assert.equal(hub.commit('me/m'), after);

  // generated content that does not keep its promised size
  const short = generated(100_000);
  await assert.rejects(
    pushToHub({
      repo: 'me/m',
      token: TOKEN,
      endpoint: hub.endpoint,
      files: [{ path: 'model.safetensors', content: short.content, size: 100_001 }],
    }),
    (e) => e.code === 'IoError' && /gave 100000 bytes, not the 100001 promised/.test(e.message),
  );
  assert.equal(hub.commit('me/m'), after);
});

test(
  'a Hub that accepts the connection and never answers: each call fails at the deadline of every request (PB_HTTP_IDLE_MS), nothing committed',
  { timeout: 30000 },
  async (t) => {
    const hub = await startHub({ files: { 'me/m': { 'README.md': 'hello' } }, owners: { me: TOKEN } });
    t.after(() => hub.close());
    const before = hub.commit('me/m');
    const files = [
      { path: 'model.safetensors', content: safetensors(5000, 3) },
      { path: 'config.json', content: new TextEncoder().encode('{}') },
    ];
    const call = (what) =>
      new RegExp(
        `^POST ${hub.endpoint.replace(/\./g, '\\.')}/api/models/me/m/${what}/main: no answer for 300 ms \\(PB_HTTP_IDLE_MS\\)$`,
      );

    // the commit never answers: not retried (it may have been applied), the push fails after one idle deadline
    hub.faults.push({ on: 'commit', type: 'hang' });
    let started = performance.now();
    await assert.rejects(
      pushToHub({ repo: 'me/m', token: TOKEN, endpoint: hub.endpoint, idleTimeout: 300, retryDelay: 5, files }),
      (e) => {
        assert.equal(e.code, 'IoError');
        assert.match(e.message, call('commit'));
        return true;
      },
    );
    const commitTook = performance.now() - started;
    assert.ok(commitTook < 5000, `gave up after ${commitTook.toFixed(0)} ms`);
    assert.equal(hub.log('commit').length, 1);
    assert.equal(hub.commit('me/m'), before);
    hub.faults.length = 0;

    // the preupload never answers: retried as other calls are (PB_HTTP_RETRIES), then the push fails
    hub.clearLog();
    hub.faults.push({ on: 'preupload', type: 'hang' });
    started = performance.now();
    await assert.rejects(
      pushToHub({
        repo: 'me/m',
        token: TOKEN,
        endpoint: hub.endpoint,
        http: { PB_HTTP_IDLE_MS: '300', PB_HTTP_RETRIES: '1', PB_HTTP_BACKOFF_MS: '5' },
        files,
      }),
      (e) => e.code === 'IoError' && call('preupload').test(e.message),
    );
    assert.ok(performance.now() - started < 5000);
    assert.equal(hub.log('preupload').length, 2, 'one retry');
    assert.equal(hub.log('commit').length, 0);
    hub.faults.length = 0;

    // one attempt that hangs is retried and the push succeeds; the call's own deadline (PB_HTTP_TOTAL_MS) ends retries
    hub.faults.push({ on: 'preupload', type: 'hang', times: 1 });
    const ok = await pushToHub({
      repo: 'me/m',
      token: TOKEN,
      endpoint: hub.endpoint,
      idleTimeout: 300,
      retryDelay: 5,
      files,
    });
    assert.equal(ok.commit, hub.commit('me/m'));
    hub.faults.push({ on: 'preupload', type: 'hang' });
    await assert.rejects(
      pushToHub({
        repo: 'me/m',
        token: TOKEN,
        endpoint: hub.endpoint,
        idleTimeout: 300,
        timeout: 500,
        retryDelay: 5,
        files,
      }),
      (e) =>
        e.code === 'IoError' &&
        /preupload\/main: (no answer for 300 ms \(PB_HTTP_IDLE_MS\)|did not finish within 500 ms \(PB_HTTP_TOTAL_MS\))$/.test(
          e.message,
        ),
    );
    await assert.rejects(
      pushToHub({ repo: 'me/m', token: TOKEN, endpoint: hub.endpoint, idleTimeout: 0, files }),
      (e) => e.code === 'InvalidArgument' && /PB_HTTP_IDLE_MS/.test(e.message),
    );
  },
);

test('tokens and names: none, unknown, without rights; bad repo ids, paths and options fail before any request', async (t) => {
  const hub = await startHub({
    files: { 'me/m': { 'README.md': 'hello' }, 'other/m': { 'README.md': 'x' } },
    owners: { me: TOKEN, other: 'hf_other' },
  });
  t.after(() => hub.close());
  const files = [{ path: 'a.json', content: new TextEncoder().encode('{}') }];
  const base = { endpoint: hub.endpoint, files, retryDelay: 5 };
  await assert.rejects(
    pushToHub({ ...base, repo: 'me/m', token: 'hf_nope' }),
    (e) => e.code === 'IoError' && /401/.test(e.message) && /Invalid credentials/.test(e.message),
  );
  await assert.rejects(
    pushToHub({ ...base, repo: 'other/m', token: TOKEN }),
    (e) => e.code === 'IoError' && /403/.test(e.message) && /rights/.test(e.message),
  );
  await assert.rejects(
    pushToHub({ ...base, repo: 'me/missing', token: TOKEN }),
    (e) => e.code === 'IoError' && /404/.test(e.message),
  );
  assert.equal(hub.log('commit').length, 0);
  hub.clearLog();
  for (const repo of ['me', 'me/m/x', 'me/bad name', '-me/m', 'me/m.git', 'me/a..b', '', 'me/']) {
    await assert.rejects(
      pushToHub({ ...base, repo, token: TOKEN }),
      (e) => e.code === 'InvalidArgument' && /repo id|owner\/name/.test(e.message),
      repo,
    );
  }
  await assert.rejects(
    pushToHub({ ...base, repo: 'me/m' }),
    (e) => e.code === 'InvalidArgument' && /token/.test(e.message),
  );
  await assert.rejects(
    pushToHub({ ...base, repo: 'me/m', token: TOKEN, files: [{ path: '../x', content: new Uint8Array(1) }] }),
    (e) => e.code === 'InvalidArgument',
  );
  await assert.rejects(
    pushToHub({ ...base, repo: 'me/m', token: TOKEN, files: [{ path: 'x', content: () => null }] }),
    (e) => e.code === 'InvalidArgument' && /size/.test(e.message),
  );
  await assert.rejects(
    pushToHub({ ...base, repo: 'me/m', token: TOKEN, files: [...files, ...files] }),
    (e) => e.code === 'InvalidArgument' && /twice/.test(e.message),
  );
  await assert.rejects(
    pushToHub({ ...base, repo: 'me/m', token: TOKEN, endpoint: 'ftp://x' }),
    (e) => e.code === 'InvalidArgument',
  );
  assert.deepEqual(hub.requests, []);
  // a missing repo is created when asked to
  const r = await pushToHub({ ...base, repo: 'me/new', token: TOKEN, createRepo: true });
  assert.equal(r.commit, hub.commit('me/new'));
});

test("HF_ENDPOINT: pushToHub without an endpoint pushes to the Hub HF_ENDPOINT names (a private Hub's token never goes to huggingface.co)", async (t) => {
  const hub = await startHub({ owners: { me: TOKEN } });
  const saved = process.env.HF_ENDPOINT;
  process.env.HF_ENDPOINT = hub.endpoint;
  t.after(() => {
    if (saved === undefined) delete process.env.HF_ENDPOINT;
    else process.env.HF_ENDPOINT = saved;
    return hub.close();
  });
  const home = new URL(hub.endpoint).origin;
  const foreign = [];
  // Every request goes through this fetch: one to any other origin is refused before it leaves (with the token).
  const guarded = (url, init) => {
    const origin = new URL(typeof url === 'string' || url instanceof URL ? url : url.url).origin;
    if (origin !== home) {
      foreign.push(origin);
      return Promise.reject(new TypeError(`refused: a request to ${origin}`));
    }
    return globalThis.fetch(url, init);
  };
  const model = safetensors(16, 3);
  const result = await pushToHub({
    repo: 'me/private',
    createRepo: true,
    token: TOKEN,
    fetch: guarded,
    retries: 0,
    files: [{ path: 'model.safetensors', content: model }],
  });
  assert.deepEqual(foreign, []);
  assert.equal(result.commit, hub.commit('me/private'));
  assert.ok(result.url.startsWith(hub.endpoint), result.url);
  assert.deepEqual(await download(hub, 'me/private', 'model.safetensors'), model);
  for (const r of hub.requests.filter((r) => ['create', 'commit'].includes(r.kind)))
    assert.equal(r.auth, `Bearer ${TOKEN}`);
});
