// The one HTTP policy (src/net/http_policy.h) on every fault of the local fake Hub (tests/hub/server.mjs), as
// the native CLI, the npm CLI and the JS API meet it: the same exit status and output bytes from both CLIs, the
// same error from the API, the same requests, in bounded time. Deadlines are made small with the PB_HTTP_*
// variables (the API's options of the same meaning), so every case ends within a second or two.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, hasNativeCli, makeFile, nativeCli, pb } from './helpers/common.mjs';
import { startHub } from '../hub/server.mjs';

const { inspect, inspectRepo, SafetensorsError } = pb;

const SMALL = makeFile(JSON.stringify({ a: { dtype: 'F32', shape: [4], data_offsets: [0, 16] } }), new Uint8Array(16));
const FILES = { 'me/small': { 'model.safetensors': SMALL }, 'me/private': { 'model.safetensors': SMALL } };
const home = mkdtempSync(join(tmpdir(), 'pb-http-')); // HF_HOME: no token file unless a test writes one
process.on('exit', () => rmSync(home, { recursive: true, force: true }));

// Small limits for the tests, by environment (both CLIs) and by option (the API).
const LIMITS = {
  PB_HTTP_IDLE_MS: '300',
  PB_HTTP_TOTAL_MS: '4000',
  PB_HTTP_RETRIES: '1',
  PB_HTTP_BACKOFF_MS: '10',
  PB_HTTP_MIN_RATE: '1000',
  PB_HTTP_RATE_WINDOW_MS: '400',
};
const API = { idleTimeout: 300, timeout: 4000, retries: 1, retryDelay: 10, minRate: 1000, rateWindow: 400 };

function run(command, args, env) {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { env: { ...process.env, ...env }, encoding: 'latin1', timeout: 30000 },
      (error, stdout, stderr) => resolve({ status: error ? error.code : 0, stdout, stderr, ms: Date.now() - started }),
    );
  });
}

const clis = [['npm', (args, env) => run(process.execPath, [cliPath, ...args], env)]];
if (hasNativeCli) clis.push(['native', (args, env) => run(nativeCli, args, env)]);

async function withHubs(fn) {
  const hub = await startHub({ files: FILES, tokens: { 'me/private': 'hf_secret' } });
  const foreign = await startHub({ files: FILES });
  try {
    return await fn(hub, foreign);
  } finally {
    await hub.close();
    await foreign.close();
  }
}

/**
 * Runs `inspect address` in both CLIs and through the API with `faults` set afresh each time; checks that they
 * agree and returns {message, requests (per run), ms (the slowest run)}. `normalize` hides what depends on timing.
 */
async function agree(hub, address, faults, { env = {}, api = {}, normalize = (s) => s } = {}) {
  const results = [];
  const requests = [];
  let slowest = 0;
  for (const [name, cli] of clis) {
    hub.faults.length = 0;
    hub.faults.push(...faults());
    hub.clearLog();
    const r = await cli(['inspect', address], {
      HF_ENDPOINT: hub.endpoint,
      HF_TOKEN: '',
      HF_HOME: home,
      ...LIMITS,
      ...env,
    });
    results.push([name, { status: r.status, stdout: r.stdout, stderr: normalize(r.stderr) }]);
    requests.push(hub.requests.length);
    slowest = Math.max(slowest, r.ms);
  }
  for (const [name, r] of results.slice(1))
    assert.deepEqual(r, results[0][1], `${name} differs from ${results[0][0]} on ${address}`);
  hub.faults.length = 0;
  hub.faults.push(...faults());
  hub.clearLog();
  const started = Date.now();
  let error = null;
  try {
    await inspect(address, { endpoint: hub.endpoint, ...API, ...api });
  } catch (e) {
    error = e;
  }
  slowest = Math.max(slowest, Date.now() - started);
  requests.push(hub.requests.length);
  const cli = results[0][1];
  if (error) {
    assert.ok(error instanceof SafetensorsError, String(error?.stack ?? error));
    assert.equal(cli.status, 1);
    assert.equal(normalize(`error: ${error.code}: ${error.message}\n`), cli.stderr, 'the API fails as the CLIs do');
  } else {
    assert.equal(cli.status, 0, cli.stderr);
  }
  return { error, stderr: cli.stderr, requests, ms: slowest };
}

test('a server that never answers: idle deadline per attempt, retried, then a precise error', async () => {
  await withHubs(async (hub) => {
    const r = await agree(hub, 'hf://me/small/model.safetensors', () => [{ type: 'hang' }]);
    assert.equal(
      r.stderr,
      'error: IoError: cannot open `hf://me/small/model.safetensors`: no answer for 300 ms (PB_HTTP_IDLE_MS)\n',
    );
    assert.deepEqual(
      r.requests,
      r.requests.map(() => 4),
      'two attempts, each a resolve and a CDN request',
    );
    assert.ok(r.ms < 3000, `${r.ms} ms`);
  });
});

test('the total deadline ends a read, whatever the idle deadline', async () => {
  await withHubs(async (hub) => {
    const env = { PB_HTTP_IDLE_MS: '5000', PB_HTTP_TOTAL_MS: '800' };
    const r = await agree(hub, 'hf://me/small/model.safetensors', () => [{ type: 'hang' }], {
      env,
      api: { idleTimeout: 5000, timeout: 800 },
    });
    assert.equal(
      r.stderr,
      'error: IoError: cannot open `hf://me/small/model.safetensors`: the read did not finish within 800 ms (PB_HTTP_TOTAL_MS)\n',
    );
    assert.deepEqual(
      r.requests,
      r.requests.map(() => 2),
      "not retried: the deadline is the whole read's",
    );
    assert.ok(r.ms < 2500, `${r.ms} ms`);
  });
});

test('a server trickling bytes is abandoned at the minimum rate', async () => {
  await withHubs(async (hub) => {
    const faults = () => [{ type: 'slow', chunk: 1, delay: 50 }]; // 20 B/s: under the idle deadline, far under the rate
    const r = await agree(hub, 'hf://me/small/model.safetensors', faults, {
      normalize: (s) => s.replace(/at byte \d+/g, 'at byte N'),
    });
    assert.equal(
      r.stderr,
      'error: IoError: cannot read `hf://me/small/model.safetensors`: slower than 1000 B/s for 400 ms at byte N (PB_HTTP_MIN_RATE)\n',
    );
    assert.ok(r.ms < 3000, `${r.ms} ms`);
  });
});

test('a redirect loop stops at the redirect cap and is not retried', async () => {
  await withHubs(async (hub) => {
    const r = await agree(hub, 'hf://me/small/model.safetensors', () => [{ type: 'redirect', location: 'self' }]);
    assert.equal(
      r.stderr,
      'error: IoError: cannot open `hf://me/small/model.safetensors`: more than 10 redirects (PB_HTTP_MAX_REDIRECTS)\n',
    );
    assert.deepEqual(
      r.requests,
      r.requests.map(() => 11),
      'the resolve, then 10 CDN hops, once',
    );
  });
});

test('a redirect to file: (or another non-HTTP scheme) fails at once', async () => {
  await withHubs(async (hub) => {
    for (const location of ['file:///etc/passwd', 'ftp://127.0.0.1/x']) {
      const r = await agree(hub, 'hf://me/small/model.safetensors', () => [{ type: 'redirect', location }]);
      assert.equal(
        r.stderr,
        `error: IoError: cannot open \`hf://me/small/model.safetensors\`: redirected to \`${location.split(':')[0]}:\`, which is not an http(s) URL\n`,
      );
      assert.deepEqual(
        r.requests,
        r.requests.map(() => 2),
      );
    }
    const r = await agree(hub, 'hf://me/small/model.safetensors', () => [
      { type: 'redirect', location: `http://u:p@127.0.0.1:1/x` },
    ]);
    assert.match(r.stderr, /redirected to a URL with user info, which is refused\n$/);
  });
});

test('URLs with user info are refused before any request', async () => {
  await withHubs(async (hub) => {
    const url = hub.endpoint.replace('http://', 'http://user:pw@') + '/me/small/resolve/main/model.safetensors';
    const r = await agree(hub, url, () => []);
    assert.equal(r.error.code, 'InvalidArgument');
    assert.equal(
      r.stderr,
      `error: InvalidArgument: \`${url}\`: URLs with user info (user:password@) are refused; use a token instead\n`,
    );
    assert.deepEqual(
      r.requests,
      r.requests.map(() => 0),
    );
  });
});

test('the token reaches the endpoint origin on every hop, never another server after a redirect', async () => {
  await withHubs(async (hub, foreign) => {
    const elsewhere = `${foreign.endpoint}/me/small/resolve/main/model.safetensors`;
    const faults = () => [{ type: 'redirect', location: elsewhere, path: 'me/private/model.safetensors' }];
    foreign.clearLog();
    const r = await agree(hub, 'hf://me/private/model.safetensors', faults, {
      env: { HF_TOKEN: 'hf_secret' },
      api: { token: 'hf_secret' },
    });
    assert.equal(r.error, null);
    assert.ok(foreign.requests.length >= 3, 'each run followed the redirect to the other server');
    assert.ok(
      foreign.requests.every((q) => q.auth === null),
      'the token went to another origin',
    );
    assert.ok(
      hub.requests.every((q) => q.auth === 'Bearer hf_secret'),
      'the token went to every hop on the endpoint',
    );
  });
});

test('5xx are retried up to the limit, 4xx are not', async () => {
  await withHubs(async (hub) => {
    const r = await agree(hub, 'hf://me/small/model.safetensors', () => [{ type: 'status', status: 503 }]);
    assert.equal(
      r.stderr,
      'error: IoError: cannot open `hf://me/small/model.safetensors`: HTTP 503: Injected failure\n',
    );
    assert.deepEqual(
      r.requests,
      r.requests.map(() => 4),
    );
    const f = await agree(hub, 'hf://me/small/model.safetensors', () => [{ type: 'status', status: 403 }]);
    assert.match(f.stderr, /HTTP 403: Injected failure \(no token was sent\)\n$/);
    assert.deepEqual(
      f.requests,
      f.requests.map(() => 2),
    );
  });
});

test('the token file huggingface_hub writes is read when HF_TOKEN is unset', async (t) => {
  await withHubs(async (hub) => {
    const dir = mkdtempSync(join(tmpdir(), 'pb-token-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'token'), 'hf_secret\n');
    writeFileSync(join(dir, 'other'), 'hf_secret');
    mkdirSync(join(dir, '.cache', 'huggingface'), { recursive: true });
    writeFileSync(join(dir, '.cache', 'huggingface', 'token'), ' hf_secret ');
    for (const env of [
      { HF_HOME: dir },
      { HF_TOKEN_PATH: join(dir, 'other') },
      { HF_HOME: '', XDG_CACHE_HOME: '', HOME: dir },
    ]) {
      for (const [name, cli] of clis) {
        const r = await cli(['inspect', 'hf://me/private/model.safetensors'], {
          HF_ENDPOINT: hub.endpoint,
          HF_TOKEN: '',
          ...env,
        });
        assert.equal(r.status, 0, `${name} ${JSON.stringify(env)}: ${r.stderr}`);
      }
    }
    // HF_TOKEN wins over the file.
    for (const [name, cli] of clis) {
      const r = await cli(['inspect', 'hf://me/private/model.safetensors'], {
        HF_ENDPOINT: hub.endpoint,
        HF_TOKEN: 'wrong',
        HF_HOME: dir,
      });
      assert.equal(r.status, 1, name);
      assert.match(r.stderr, /HTTP 401: Repository not found\n$/, name);
    }
  });
});

test('a bad PB_HTTP_* value is the same usage error in both CLIs', async () => {
  await withHubs(async (hub) => {
    const r = await agree(hub, 'hf://me/small/model.safetensors', () => [], {
      env: { PB_HTTP_IDLE_MS: 'soon' },
      api: { idleTimeout: 'soon' },
    });
    assert.equal(
      r.stderr,
      'error: InvalidArgument: PB_HTTP_IDLE_MS must be a whole number from 1 below 2^32, got `soon`\n',
    );
    assert.deepEqual(
      r.requests,
      r.requests.map(() => 0),
    );
  });
});

test('JSON read remotely (the index) is held to a size cap', async () => {
  await withHubs(async (hub) => {
    const weightMap = {};
    for (let i = 0; i < 2000; ++i) weightMap[`tensor.${i}`] = 'model.safetensors';
    const index = JSON.stringify({ weight_map: weightMap });
    hub.addRepo('me/bigindex', { 'model.safetensors.index.json': index, 'model.safetensors': SMALL });
    hub.clearLog();
    await assert.rejects(inspectRepo({ repo: 'me/bigindex', endpoint: hub.endpoint, maxJsonBytes: 10000 }), (e) => {
      assert.equal(e.code, 'IoError');
      assert.equal(
        e.message,
        `\`${hub.endpoint}/me/bigindex/resolve/main/model.safetensors.index.json\` is ${index.length} bytes, more than the cap of 10000 for a JSON file read whole (PB_HTTP_MAX_JSON_BYTES)`,
      );
      return true;
    });
    assert.equal(hub.requests.length, 1);
    assert.equal(hub.requests[0].range, 'bytes=0-10000');
    // Under the cap it reads (and fails later only because the index names tensors the shard does not hold).
    await assert.rejects(
      inspectRepo({ repo: 'me/bigindex', endpoint: hub.endpoint }),
      /2000 tensor\(s\) of model\.safetensors\.index\.json are not in the shard it names:\n  tensor\.0 /,
    );
  });
});

test('the older faults agree too: a wrong Content-Range fails at once; bodies cut short every time still resume to the end', async () => {
  await withHubs(async (hub) => {
    const w = await agree(hub, 'hf://me/small/model.safetensors', () => [{ type: 'wrongContentRange' }]);
    assert.equal(
      w.stderr,
      `error: IoError: cannot read \`hf://me/small/model.safetensors\`: wrong Content-Range \`bytes 1-${SMALL.length}/${SMALL.length}\` in answer to bytes=0-65535\n`,
    );
    assert.deepEqual(
      w.requests,
      w.requests.map(() => 2),
    );
    // Every body is cut after 20 bytes: each attempt progresses, so the count of failures starts afresh each time.
    const t = await agree(hub, 'hf://me/small/model.safetensors', () => [{ type: 'truncate', at: 20 }], {
      env: { PB_HTTP_RETRIES: '1' },
    });
    assert.equal(t.error, null);
    const attempts = Math.ceil(SMALL.length / 20);
    // The first attempt goes through /resolve and its redirect; every later one straight to the CDN URL it gave.
    assert.deepEqual(
      t.requests,
      t.requests.map(() => attempts + 1),
    );
  });
});
