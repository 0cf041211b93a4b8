// Every transport follows the one HTTP retry decision (net/http_retry.h), against the local Hub stand-in's injected
// faults: the JS API's push (web/src/remote/push.js) and reads (web/src/remote/range-client.js), the native CLI's push and reads.
// Each case is one the transports decided differently before: a 501 (final: not retried), a Retry-After longer
// than allowed (the failure is final at once, saying so, where a push used to wait 10 s and retry), a Retry-After
// given as an HTTP-date (waited, counted from the answer's Date, where reads and the JS push used the backoff).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startHub } from '../hub/server.mjs';
import { hasNativeCli, makeFile, f32Bytes, nativeCli } from './helpers/common.mjs';

const pb = await import('../../web/src/node.js');
const { pushToHub, inspect } = pb;

const TOKEN = 'hf_retry_writer';
const work = mkdtempSync(join(tmpdir(), 'pb-retry-'));
after(() => rmSync(work, { recursive: true, force: true }));

/** A safetensors file with one F32 tensor of n values. */
const safetensors = (n, value) =>
  makeFile(JSON.stringify({ w: { dtype: 'F32', shape: [n], data_offsets: [0, 4 * n] } }), f32Bytes(n, value));
const model = safetensors(2000, 1);
const hub = await startHub({ files: { 'me/m': { 'model.safetensors': model } }, owners: { me: TOKEN } });
after(() => hub.close());
const upload = { path: 'model.safetensors', content: safetensors(3000, 2) };

function run(args, env = {}) {
  const started = Date.now();
  return new Promise((resolve) => {
    const vars = { HF_ENDPOINT: hub.endpoint, HF_TOKEN: TOKEN, PB_HTTP_BACKOFF_MS: '5', PB_PROGRESS: '', ...env };
    const options = { env: { ...process.env, ...vars }, encoding: 'utf8', timeout: 60000 };
    execFile(nativeCli, args, options, (error, stdout, stderr) =>
      resolve({ status: error ? error.code : 0, stdout, stderr, ms: Date.now() - started }),
    );
  });
}
const nativeSkip = !hasNativeCli && 'build/native/peft-bridge not built';

test('JS push: a Retry-After longer than allowed fails the push at once, saying how long it asked for', async () => {
  hub.clearLog();
  hub.faults.push({ on: 'upload', type: 'status', status: 429, retryAfter: 3600, times: 1 });
  const started = Date.now();
  const push = pushToHub({ repo: 'me/m', token: TOKEN, endpoint: hub.endpoint, retryDelay: 5, files: [upload] });
  await assert.rejects(push, (e) => {
    assert.equal(e.code, 'IoError');
    const said = /: HTTP 429 \(the server asked to wait 3600 s before trying again, more than the 10 s allowed\)$/;
    assert.match(e.message, said);
    return true;
  });
  assert.ok(Date.now() - started < 5000, 'no wait');
  assert.equal(hub.log('upload').length, 1, 'not retried');
  assert.equal(hub.log('commit').length, 0);
  hub.faults.length = 0;
});

test("JS push: a Retry-After as an HTTP-date is waited, counted from the answer's Date", async () => {
  hub.clearLog();
  hub.faults.push({ on: 'preupload', type: 'status', status: 503, retryAfterDate: 1, times: 1 });
  const retries = [];
  const started = Date.now();
  const onProgress = (e) => e.phase === 'retry' && retries.push(e);
  const ok = await pushToHub({
    repo: 'me/m',
    token: TOKEN,
    endpoint: hub.endpoint,
    retryDelay: 5,
    files: [upload],
    onProgress,
  });
  assert.equal(ok.commit, hub.commit('me/m'));
  assert.deepEqual(
    retries.map((r) => [r.status, r.wait]),
    [[503, 1000]],
  );
  assert.ok(Date.now() - started >= 1000);
  assert.equal(hub.log('preupload').length, 2);
  hub.faults.length = 0;
});

test('JS reads: a 501 is final; a Retry-After as an HTTP-date is waited', async () => {
  const address = 'hf://me/m/model.safetensors';
  hub.clearLog();
  hub.faults.push({ type: 'status', status: 501, path: 'model.safetensors', times: 1 });
  await assert.rejects(
    inspect(address, { endpoint: hub.endpoint, retryDelay: 5 }),
    (e) => e.code === 'IoError' && /HTTP 501/.test(e.message),
  );
  assert.equal(hub.requests.filter((r) => r.status === 501).length, 1, 'not retried');
  hub.faults.length = 0;

  hub.faults.push({ type: 'status', status: 503, retryAfterDate: 2, path: 'model.safetensors', times: 1 });
  const started = Date.now();
  const info = await inspect(address, { endpoint: hub.endpoint, retryDelay: 5 });
  assert.ok(Date.now() - started >= 2000, `waited ${Date.now() - started} ms`);
  assert.ok(JSON.stringify(info).includes('"w"'));
  hub.faults.length = 0;
});

test('native push: a 501 is final; a Retry-After too long fails at once, saying so', { skip: nativeSkip }, async () => {
  // a folder to push, with bytes the Hub does not hold yet (an object already stored is not uploaded again)
  const dir = join(work, 'out');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'model.safetensors'), safetensors(3000, 3));
  const push = () => run(['push', dir, '--to', 'me/m', '-q']);

  hub.clearLog();
  hub.faults.push({ on: 'upload', type: 'status', status: 501, times: 1 });
  let r = await push();
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /Injected failure \(HTTP 501\)/);
  assert.equal(hub.log('upload').length, 1, 'not retried');
  hub.faults.length = 0;

  hub.clearLog();
  hub.faults.push({ on: 'upload', type: 'status', status: 503, retryAfter: 3600, times: 1 });
  r = await push();
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /Injected failure \(HTTP 503\) \(the server asked to wait 3600 s before trying again/);
  assert.ok(r.ms < 5000, `${r.ms} ms`);
  assert.equal(hub.log('upload').length, 1, 'not retried');
  hub.faults.length = 0;
});

test('native reads: a 501 is final; a Retry-After as an HTTP-date is waited', { skip: nativeSkip }, async () => {
  const address = 'hf://me/m/model.safetensors';
  hub.clearLog();
  hub.faults.push({ type: 'status', status: 501, path: 'model.safetensors', times: 1 });
  let r = await run(['inspect', address]);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /HTTP 501/);
  assert.equal(hub.requests.filter((x) => x.status === 501).length, 1, 'not retried');
  hub.faults.length = 0;

  hub.faults.push({ type: 'status', status: 503, retryAfterDate: 2, path: 'model.safetensors', times: 1 });
  r = await run(['inspect', address]);
  assert.equal(r.status, 0, r.stderr);
  assert.ok(r.ms >= 2000, `waited ${r.ms} ms`);
  hub.faults.length = 0;
});
