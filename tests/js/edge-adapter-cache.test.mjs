// createAdapterCache in real workerd (the package's "workerd" entry, the `fetch` global), against the local Hub
// stand-in: one cache kept across requests, registration checked against a base, modules served by Range, a
// composition whose bytes equal Node's, the cache's hits on a second request.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pb, repoRoot, webDir } from './helpers/common.mjs';
import { writeAdapter, writeSingleBase } from './helpers/remote-model.mjs';
import { startHub } from '../hub/server.mjs';

const workerdBin = join(repoRoot, 'node_modules', 'workerd', 'bin', 'workerd');
const skip = !existsSync(workerdBin) ? 'workerd is not installed (npm ci)' : false;
const Q0 = 'model.layers.0.self_attn.q_proj';

const WORKER = `import { createAdapterCache } from 'peft-bridge';
let cache = null;
export default {
  async fetch(request, env) {
    try {
      if (!cache) {
        cache = createAdapterCache({ endpoint: env.HF_ENDPOINT, budgetBytes: 1 << 20, dtype: 'bf16' });
        await cache.register('sql', { repo: 'me/sql', base: { repo: 'me/base' } });
        await cache.register('sql4', { repo: 'me/sql4', base: { repo: 'me/base' } });
      }
      const d = await cache.compose([{ id: 'sql', scale: 0.5 }, { id: 'sql4', scale: 2 }], '${Q0}');
      const m = await cache.module('sql4', '${Q0}');
      const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
      return Response.json({ A: hex(d.A), B: hex(d.B), mA: hex(m.A), rank: d.rank, stats: cache.stats() });
    } catch (e) {
      return new Response(String(e && e.stack || e), { status: 500 });
    }
  },
};
`;

async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

test('workerd: the adapter cache serves modules and compositions across requests', { skip, timeout: 120000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pb-edge-cache-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  await writeSingleBase(join(dir, 'base'));
  await writeAdapter(join(dir, 'sql'));
  await writeAdapter(join(dir, 'sql-r4'), { rank: 4 });
  const hub = await startHub({ files: { 'me/base': join(dir, 'base'), 'me/sql': join(dir, 'sql'), 'me/sql4': join(dir, 'sql-r4') } });
  t.after(() => hub.close());

  const cache = pb.createAdapterCache({ endpoint: hub.endpoint, budgetBytes: 1 << 20, dtype: 'bf16' });
  await cache.register('sql', { repo: 'me/sql', base: { repo: 'me/base' } });
  await cache.register('sql4', { repo: 'me/sql4', base: { repo: 'me/base' } });
  const want = await cache.compose([{ id: 'sql', scale: 0.5 }, { id: 'sql4', scale: 2 }], Q0);
  const wantModule = await cache.module('sql4', Q0);
  await cache.close();

  const root = join(dir, 'workerd');
  const pkg = join(root, 'node_modules', 'peft-bridge');
  mkdirSync(join(pkg, 'src'), { recursive: true });
  mkdirSync(join(pkg, 'dist'));
  const modules = [];
  for (const name of readdirSync(join(webDir, 'src')).filter((n) => n.endsWith('.js'))) {
    copyFileSync(join(webDir, 'src', name), join(pkg, 'src', name));
    modules.push(`(name = "node_modules/peft-bridge/src/${name}", esModule = embed "node_modules/peft-bridge/src/${name}")`);
  }
  for (const name of ['peft_bridge_wasm.mjs', 'peft_bridge_wasm.wasm']) copyFileSync(join(webDir, 'dist', name), join(pkg, 'dist', name));
  modules.push('(name = "node_modules/peft-bridge/dist/peft_bridge_wasm.mjs", esModule = embed "node_modules/peft-bridge/dist/peft_bridge_wasm.mjs")');
  modules.push('(name = "node_modules/peft-bridge/dist/peft_bridge_wasm.wasm", wasm = embed "node_modules/peft-bridge/dist/peft_bridge_wasm.wasm")');
  writeFileSync(join(root, 'main.mjs'), WORKER);
  writeFileSync(join(root, 'pkg.js'), 'export * from "./node_modules/peft-bridge/src/workerd.js";\n');
  writeFileSync(join(root, 'pkg-wasm.js'), 'export { default } from "../node_modules/peft-bridge/dist/peft_bridge_wasm.wasm";\n');
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
    (name = "peft-bridge", esModule = embed "pkg.js"),
    (name = "peft-bridge/peft_bridge_wasm.wasm", esModule = embed "pkg-wasm.js"),
    ${modules.join(',\n    ')}
  ],
  compatibilityDate = "2025-06-01",
  bindings = [ (name = "HF_ENDPOINT", text = "${hub.endpoint}") ],
  globalOutbound = "internet",
);
`,
  );
  const child = spawn(workerdBin, ['serve', join(root, 'config.capnp'), '--verbose'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.on('data', (d) => (log += d));
  child.stderr.on('data', (d) => (log += d));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  t.after(async () => {
    child.kill('SIGTERM');
    await exited;
  });
  const url = `http://127.0.0.1:${port}/`;
  let first;
  for (let i = 0; ; ++i) {
    try {
      first = await fetch(url);
      break;
    } catch {
      if (i > 200 || child.exitCode !== null) throw new Error(`workerd did not start:\n${log}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  const hex = (b) => Buffer.from(b).toString('hex');
  const a = await first.text();
  assert.equal(first.status, 200, a);
  const one = JSON.parse(a);
  assert.equal(one.rank, 12);
  assert.equal(one.A, hex(want.A));
  assert.equal(one.B, hex(want.B));
  assert.equal(one.mA, hex(wantModule.A));
  assert.equal(one.stats.spanReads, 3);
  // The second request is served from the cache: no new Range request.
  const two = await (await fetch(url)).json();
  assert.equal(two.A, one.A);
  assert.equal(two.stats.spanReads, 3);
  assert.ok(two.stats.hits >= 3);
});
