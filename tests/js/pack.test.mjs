// The npm package as published: `npm pack` of web/, its file list (the whitelist only, a separate .wasm, no wasm
// inlined as base64), installed into an empty project where a script imports "peft-bridge" (the "node"
// export condition), inspects a generated file and merges a tiny adapter; the export conditions resolve in order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, sep } from 'node:path';
import { webDir } from './helpers/common.mjs';

const npm = (args, cwd) =>
  execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd,
    encoding: 'utf8',
    timeout: 120000,
  });

test('npm pack: whitelisted files, a separate .wasm; installed, "peft-bridge" inspects and merges', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pb-pack-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const [packed] = JSON.parse(npm(['pack', '--json', '--pack-destination', dir], webDir));
  const files = packed.files.map((f) => f.path).sort();
  const allowed = (p) =>
    /^src\/((io|remote|ops|edge|browser|cli)\/)?[a-z-]+\.js$/.test(p) ||
    /^src\/((edge|browser)\/)?index\.d\.ts$/.test(p) ||
    ['bin/peft-bridge.mjs', 'dist/peft_bridge_wasm.mjs', 'dist/peft_bridge_wasm.wasm'].includes(p) ||
    ['package.json', 'README.md', 'LICENSE'].includes(p);
  assert.deepEqual(
    files.filter((p) => !allowed(p)),
    [],
    'only the whitelist is published',
  );
  const expected = [
    'dist/peft_bridge_wasm.wasm',
    'src/index.d.ts',
    'src/node.js',
    'src/browser.js',
    'src/workerd.js',
    'src/workerd-wasm.js',
    'src/edge/index.js',
    'src/edge/workerd.js',
    'src/edge/index.d.ts',
    'src/browser/index.js',
    'src/browser/index.d.ts',
    'src/remote/remote.js',
    'src/ops/merge-worker.js',
    'bin/peft-bridge.mjs',
    'src/cli/merge-command.js',
    'README.md',
    'LICENSE',
  ];
  for (const p of expected) assert.ok(files.includes(p), p);
  const sources = readdirSync(join(webDir, 'src'), { recursive: true }).map((p) => `src/${p.split(sep).join('/')}`);
  const modules = sources.filter((p) => p.endsWith('.js') || p.endsWith('.d.ts'));
  assert.deepEqual(
    modules.filter((p) => !files.includes(p)),
    [],
    'every module of web/src is published',
  );

  const project = join(dir, 'project');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  // @huggingface/hub (the package's one dependency) and its own come from npm's cache where `npm ci` put them. Not
  // --offline: `npm ci` caches the registry's abbreviated metadata, and `npm install` of a tarball (npm 11.19) asks for
  // the full one, so on a fresh machine it has to fetch that (ENOTCACHED offline).
  npm(['install', '--prefer-offline', join(dir, packed.filename)], project);

  const installed = join(project, 'node_modules', 'peft-bridge', 'dist');
  const glue = readFileSync(join(installed, 'peft_bridge_wasm.mjs'), 'utf8');
  assert.ok(!/base64,[A-Za-z0-9+/]{256}/.test(glue), 'no wasm inlined as base64 (SINGLE_FILE off)');
  assert.ok(glue.length < 256 * 1024, `the glue is ${glue.length} bytes`);
  assert.deepEqual(
    [...readFileSync(join(installed, 'peft_bridge_wasm.wasm')).subarray(0, 4)],
    [0, 0x61, 0x73, 0x6d],
    '\\0asm',
  );

  // A base with one 2x2 F32 q_proj and a rank-1 adapter (alpha = r: scaling 1): W + B·A is exact in F32.
  writeFileSync(
    join(project, 'main.js'),
    `import { inspect, readTensor, writeSafetensors, createMergeStream } from 'peft-bridge';
const f32 = (...v) => new Uint8Array(Float32Array.from(v).buffer);
const bytes = (stream) => new Response(stream).arrayBuffer().then((b) => new Uint8Array(b));
const name = 'model.layers.0.self_attn.q_proj.weight';
const base = await bytes(writeSafetensors({ tensors: [{ name, dtype: 'F32', shape: [2, 2], data: f32(1, 2, 3, 4) }] }));
const key = 'base_model.model.model.layers.0.self_attn.q_proj';
const weights = writeSafetensors({ tensors: [
  { name: key + '.lora_A.weight', dtype: 'F32', shape: [1, 2], data: f32(1, 1) },
  { name: key + '.lora_B.weight', dtype: 'F32', shape: [2, 1], data: f32(1, 2) },
] });
const config = { peft_type: 'LORA', r: 1, lora_alpha: 1, target_modules: ['q_proj'] };
const merged = await bytes(new Blob([base]).stream().pipeThrough(createMergeStream({ adapter: { weights, config } })));
const info = await inspect(base);
const out = await inspect(merged);
const values = [...new Float32Array((await readTensor(merged, name)).slice().buffer)];
console.log(JSON.stringify({ tensors: info.tensors.map((t) => [t.name, t.dtype, t.shape]), merged: out.tensors.length, values }));
`,
  );
  const result = JSON.parse(execFileSync(process.execPath, ['main.js'], { cwd: project, encoding: 'utf8' }));
  assert.deepEqual(result, {
    tensors: [['model.layers.0.self_attn.q_proj.weight', 'F32', [2, 2]]],
    merged: 1,
    values: [2, 3, 5, 6],
  });

  // The export conditions, in their order: workerd, browser, node (Node's own), each to its entry.
  const node = (conditions, code) =>
    execFileSync(process.execPath, [...conditions, '--input-type=module', '-e', code], {
      cwd: project,
      encoding: 'utf8',
    }).trim();
  const resolve = (conditions, specifier = 'peft-bridge') =>
    node(conditions, `console.log(import.meta.resolve(${JSON.stringify(specifier)}))`);
  assert.match(resolve([]), /\/src\/node\.js$/);
  assert.match(resolve(['--conditions=browser']), /\/src\/browser\.js$/);
  assert.match(resolve(['--conditions=workerd', '--conditions=browser']), /\/src\/workerd\.js$/);
  // The subpath entries: the edge helpers (with the module compiled at deploy time under workerd) and the
  // browser's save helper; the worker helpers are no longer in the root entry.
  assert.match(resolve([], 'peft-bridge/edge'), /\/src\/edge\/index\.js$/);
  assert.match(resolve(['--conditions=workerd'], 'peft-bridge/edge'), /\/src\/edge\/workerd\.js$/);
  assert.match(resolve(['--conditions=browser'], 'peft-bridge/browser'), /\/src\/browser\/index\.js$/);
  const names = (specifier) =>
    JSON.parse(node([], `console.log(JSON.stringify(Object.keys(await import(${JSON.stringify(specifier)})).sort()))`));
  const workerHelpers = ['inOwnRequest', 'workerEndpoint', 'workerErrorStatus', 'workerHubAccess'];
  assert.deepEqual(names('peft-bridge/edge'), ['AdapterCache', 'createAdapterCache', ...workerHelpers]);
  assert.deepEqual(names('peft-bridge/browser'), ['saveStreams']);
  const root = names('peft-bridge');
  assert.deepEqual(
    workerHelpers.filter((n) => root.includes(n)),
    [],
  );
  assert.ok(root.includes('createAdapterCache') && root.includes('saveStreams'), root.join(', '));
  assert.match(
    execFileSync(join(project, 'node_modules', '.bin', 'peft-bridge'), ['--version'], { encoding: 'utf8' }),
    /\d+\.\d+/,
  );
});
