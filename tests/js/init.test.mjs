// init(): a precompiled WebAssembly.Module (edge runtimes), memoization, and (in child processes, since init
// is once per process) wasmBinary and the default Node loading.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { wasmPath, webDir } from './helpers/common.mjs';

const { init, inspect } = await import(join(webDir, 'src', 'index.js'));

const EMPTY = new Uint8Array([8, 0, 0, 0, 0, 0, 0, 0, 0x7b, 0x7d, 32, 32, 32, 32, 32, 32]);

test('init accepts a precompiled WebAssembly.Module and is memoized', async () => {
  const module = await WebAssembly.compile(readFileSync(wasmPath));
  const first = init({ wasmModule: module });
  const second = init({ wasmBinary: new Uint8Array(4) }); // ignored: already initializing
  await first;
  await second;
  const h = await inspect(EMPTY);
  assert.equal(h.fileSize, 16);
});

function child(source) {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', source], { encoding: 'utf8' });
  return r;
}

test('init with wasmBinary, and with no options (fs next to the module), in fresh processes', () => {
  const index = JSON.stringify(join(webDir, 'src', 'index.js'));
  const wasm = JSON.stringify(wasmPath);
  const body = `const h = await pb.inspect(new Uint8Array(${JSON.stringify([...EMPTY])})); console.log(h.fileSize);`;
  let r = child(
    `import * as pb from ${index}; import {readFileSync} from 'node:fs'; await pb.init({wasmBinary: readFileSync(${wasm})}); ${body}`,
  );
  assert.equal(r.stdout, '16\n', r.stderr);
  r = child(`import * as pb from ${index}; ${body}`);
  assert.equal(r.stdout, '16\n', r.stderr);
  r = child(
    `import * as pb from ${index}; await pb.init({wasmBinary: new Uint8Array([0, 97, 115, 109, 9, 9, 9, 9])}).then(() => console.log('loaded'), (e) => console.log('rejected'));`,
  );
  assert.equal(r.stdout, 'rejected\n', r.stderr);
  r = child(`import * as pb from ${index}; try { await pb.init({wasmModule: {}}) } catch (e) { console.log(e.name) }`);
  assert.equal(r.stdout, 'TypeError\n', r.stderr);
});
