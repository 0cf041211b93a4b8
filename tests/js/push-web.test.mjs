// pushToHub outside Node, against the local Hub stand-in: in headless Chromium (the package's browser entry and
// @huggingface/hub's browser build, loaded through an import map) a 12 MB generated file (hashed by the library's
// streaming WASM sha256, uploaded in parts, each part read into memory: browsers stream request bodies only over
// HTTP/2) and a Blob; in workerd (the modules a bundler would produce) a generated file uploaded in parts through
// FixedLengthStream, and a file of 10 MB or more refused up front (the library cannot hash it there).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { downloadFile, listFiles } from '@huggingface/hub';
import { repoRoot, webDir } from './helpers/common.mjs';
import { startHub } from '../hub/server.mjs';
import { freePort, hasWorkerd, packageModules, serveWorkerd } from './helpers/workerd.mjs';

const CHROMIUM = '/usr/bin/chromium';
const TOKEN = 'hf_web_writer';
const dir = mkdtempSync(join(tmpdir(), 'pb-push-web-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

// The generated file, the same bytes in Node, the page and the worker (its source is sent to both).
const GENERATOR = `(size) => new ReadableStream({
  start() { this.at = 0; },
  pull(controller) {
    if (this.at >= size) return controller.close();
    const n = Math.min(65536, size - this.at);
    const chunk = new Uint8Array(n);
    for (let i = 0; i < n; i++) chunk[i] = ((this.at + i) * 2654435761) >>> 24;
    this.at += n;
    controller.enqueue(chunk);
  },
})`;
const generate = eval(GENERATOR);
async function shaOfGenerated(size) {
  const hash = createHash('sha256');
  for await (const chunk of generate(size)) hash.update(chunk);
  return hash.digest('hex');
}
async function pushedSha(hub, repo, path, revision) {
  const blob = await downloadFile({ repo, path, revision, hubUrl: hub.endpoint });
  return createHash('sha256')
    .update(Buffer.from(await blob.arrayBuffer()))
    .digest('hex');
}
async function lfsOf(hub, repo) {
  const out = {};
  for await (const f of listFiles({ repo, hubUrl: hub.endpoint })) out[f.path] = !!f.lfs;
  return out;
}

// What the browser and the worker import: @huggingface/hub's browser build and its dependencies' ES modules.
const LIBRARIES = {
  '@huggingface/hub': 'node_modules/@huggingface/hub/dist/browser/index.mjs',
  '@huggingface/xetchunk-wasm': 'node_modules/@huggingface/xetchunk-wasm/dist/esm/index.js',
  '@huggingface/blake3-jit': 'node_modules/@huggingface/blake3-jit/dist/esm/index.js',
  'gearhash-jit': 'node_modules/gearhash-jit/dist/esm/index.js',
};

test(
  'Chromium: pushToHub from the browser entry: a 12 MB generated file in parts and a Blob, one commit',
  { timeout: 120000 },
  async (t) => {
    if (!existsSync(CHROMIUM)) return t.skip(`${CHROMIUM} not installed`);
    const { chromium } = await import('playwright-core');
    const { startStatic } = await import(join(webDir, 'app', 'serve.mjs'));
    const hub = await startHub({
      owners: { me: TOKEN },
      files: { 'me/web': { 'README.md': 'x' } },
      multipartThreshold: 8 * 2 ** 20,
      partSize: 4 * 2 ** 20,
    });
    t.after(() => hub.close());
    const site = await startStatic({ root: repoRoot });
    t.after(() => site.close());
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
    t.after(() => browser.close());
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${site.origin}/web/`); // any page of the origin (a 404 here)
    const importMap = Object.fromEntries(Object.entries(LIBRARIES).map(([k, v]) => [k, `/${v}`]));
    await page.setContent(`<!doctype html>
<script type="importmap">${JSON.stringify({ imports: importMap })}</script>
<script type="module">
import { pushToHub } from '/web/src/browser.js';
const generate = ${GENERATOR};
const size = 12_000_000;
const events = [];
pushToHub({
  repo: 'me/web', token: ${JSON.stringify(TOKEN)}, endpoint: ${JSON.stringify(hub.endpoint)},
  files: [
    { path: 'model.safetensors', content: () => generate(size), size },
    { path: 'config.json', content: new Blob(['{"from":"chromium"}']) },
  ],
  onProgress: (e) => events.push(e.phase),
}).then((r) => { window.result = { ok: true, r, phases: [...new Set(events)] }; }, (e) => { window.result = { ok: false, code: e.code, message: e.message }; });
</script>`);
    await page.waitForFunction(() => window.result !== undefined, null, { timeout: 100000 });
    const result = await page.evaluate(() => window.result);
    assert.ok(result.ok, JSON.stringify(result));
    assert.deepEqual(errors, []);
    assert.equal(result.r.commit, hub.commit('me/web'));
    assert.deepEqual(result.r.files, [
      { path: 'model.safetensors', size: 12_000_000, lfs: true },
      { path: 'config.json', size: 19, lfs: false },
    ]);
    for (const p of ['hashing', 'uploading', 'committing', 'done']) assert.ok(result.phases.includes(p), p);
    assert.equal(hub.log('part').filter((r) => r.status === 200).length, 3);
    assert.equal(await pushedSha(hub, 'me/web', 'model.safetensors'), await shaOfGenerated(12_000_000));
    assert.deepEqual(await lfsOf(hub, 'me/web'), {
      'README.md': false,
      'model.safetensors': true,
      'config.json': false,
    });
  },
);

test(
  'workerd: pushToHub with the modules a bundler makes: a generated file in parts, a 10 MB file refused',
  { timeout: 120000 },
  async (t) => {
    if (!hasWorkerd) return t.skip('workerd is not installed (npm ci)');
    const hub = await startHub({
      owners: { me: TOKEN },
      files: { 'me/edge': { 'README.md': 'x' } },
      multipartThreshold: 2 ** 20,
      partSize: 512 * 1024,
    });
    t.after(() => hub.close());
    const root = mkdtempSync(join(dir, 'workerd-'));
    const modules = [];
    const embed = (name, from) => {
      const to = join(root, name);
      mkdirSync(dirname(to), { recursive: true });
      copyFileSync(from, to);
      modules.push(`(name = "${name}", esModule = embed "${name}")`);
    };
    for (const name of packageModules()) embed(`node_modules/peft-bridge/src/${name}`, join(webDir, 'src', name));
    embed('node_modules/peft-bridge/dist/peft_bridge_wasm.mjs', join(webDir, 'dist', 'peft_bridge_wasm.mjs'));
    copyFileSync(
      join(webDir, 'dist', 'peft_bridge_wasm.wasm'),
      join(root, 'node_modules/peft-bridge/dist/peft_bridge_wasm.wasm'),
    );
    modules.push(
      '(name = "node_modules/peft-bridge/dist/peft_bridge_wasm.wasm", wasm = embed "node_modules/peft-bridge/dist/peft_bridge_wasm.wasm")',
    );
    const libraryDirs = new Set(Object.values(LIBRARIES).map((p) => dirname(p)));
    for (const d of libraryDirs)
      for (const name of readdirSync(join(repoRoot, d)).filter((n) => /\.m?js$/.test(n)))
        embed(`${d}/${name}`, join(repoRoot, d, name));
    // workerd resolves a bare specifier as a path beside the importing module: each import a bundler would resolve is
    // a small module there re-exporting the package's entry
    const importers = {
      'node_modules/@huggingface/hub/dist/browser': ['@huggingface/xetchunk-wasm'],
      'node_modules/@huggingface/xetchunk-wasm/dist/esm': ['@huggingface/blake3-jit', 'gearhash-jit'],
    };
    let aliases = 0;
    for (const [from, specifiers] of Object.entries(importers)) {
      for (const specifier of specifiers) {
        const name = `${from}/${specifier}`;
        const file = `alias-${++aliases}.js`;
        writeFileSync(
          join(root, file),
          `export * from "./${posix.relative(posix.dirname(name), LIBRARIES[specifier])}";\n`,
        );
        modules.push(`(name = "${name}", esModule = embed "${file}")`);
      }
    }
    writeFileSync(
      join(root, 'main.mjs'),
      `import { pushToHub } from './node_modules/peft-bridge/src/workerd.js'; // the "workerd" entry: the WASM module (the calls' deadlines)
import * as hub from './node_modules/@huggingface/hub/dist/browser/index.mjs'; // what a bundler gives the worker
const generate = ${GENERATOR};
export default {
  async fetch(request, env) {
    const size = Number(new URL(request.url).searchParams.get('size'));
    try {
      const r = await pushToHub({
        repo: 'me/edge', token: ${JSON.stringify(TOKEN)}, endpoint: env.HF_ENDPOINT, branch: 'edge', hub,
        files: [{ path: 'model.safetensors', content: () => generate(size), size }, { path: 'config.json', content: new TextEncoder().encode('{}') }],
      });
      return Response.json({ ok: true, r });
    } catch (e) {
      return Response.json({ ok: false, code: e.code, message: e.message });
    }
  },
};
`,
    );
    const port = await freePort();
    writeFileSync(
      join(root, 'config.capnp'),
      `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
    (name = "internet", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [ (name = "http", address = "127.0.0.1:${port}", http = (), service = "main") ],
);
const worker :Workerd.Worker = (
  modules = [
    (name = "main.mjs", esModule = embed "main.mjs"),
    ${modules.join(',\n    ')}
  ],
  compatibilityDate = "2025-06-01",
  bindings = [ (name = "HF_ENDPOINT", text = "${hub.endpoint}") ],
  globalOutbound = "internet",
);
`,
    );
    const worker = await serveWorkerd(t, root, port);
    const { url } = worker;
    const log = () => worker.log();
    const ask = async (size) => (await fetch(`${url}/?size=${size}`)).json();
    const size = 3_000_000;
    const ok = await ask(size);
    assert.ok(ok.ok, `${JSON.stringify(ok)}\n${log()}`);
    assert.equal(ok.r.commit, hub.commit('me/edge', 'edge'));
    assert.equal(hub.log('part').filter((r) => r.status === 200).length, Math.ceil(size / (512 * 1024)));
    assert.equal(await pushedSha(hub, 'me/edge', 'model.safetensors', 'edge'), await shaOfGenerated(size));
    const big = await ask(10_000_000);
    assert.equal(big.ok, false);
    assert.equal(big.code, 'InvalidArgument');
    assert.match(big.message, /in workerd, @huggingface\/hub hashes only files under 10 MB/);
  },
);
