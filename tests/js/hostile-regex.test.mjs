// Module-name regexes used to run on std::regex, which recursed per character (a 40,000-character
// module path crashed the native CLI), backtracked exponentially ("(a+)+$"), and in WASM threw exceptions
// nothing caught, leaving the module broken. The core's own linear-time engine answers instead; both CLIs
// print the same bytes, and the WASM module keeps working after thousands of rejected patterns.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, nativeCli, pb, peftAdapterBytes, skipWithoutNativeCli } from './helpers/common.mjs';

const { adapterInfo, inspect, SafetensorsError } = pb;

const run = (command, args) => {
  const started = Date.now();
  const r = spawnSync(command, args, { encoding: 'buffer', timeout: 60000, maxBuffer: 64 << 20 });
  if (r.error) throw r.error;
  return {
    status: r.status,
    stdout: r.stdout.toString('latin1'),
    stderr: r.stderr.toString('latin1'),
    ms: Date.now() - started,
  };
};
const runJs = (args) => run(process.execPath, [cliPath, ...args]);
const runNative = (args) => run(nativeCli, args);

const adapterBytes = peftAdapterBytes;

function writeAdapter(t, modules, config) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-hostile-regex-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'adapter_model.safetensors'), adapterBytes(modules));
  writeFileSync(join(dir, 'adapter_config.json'), JSON.stringify(config));
  return dir;
}

let longPath = '';
for (let i = 0; longPath.length < 40000; ++i) longPath += `block${i}.`;
const LONG_CONFIG = {
  peft_type: 'LORA',
  r: 2,
  lora_alpha: 4,
  target_modules: '.*\\.(q_proj|v_proj)',
  modules_to_save: ['classifier'],
  rank_pattern: { 'block7\\..*\\.q_proj': 2, k_proj: 3 },
};
const LONG_MODULES = [`${longPath}q_proj`, `${longPath}k_proj`, `${longPath}classifier.dense`];
const NESTED = 'a'.repeat(28);
const NESTED_CONFIG = { peft_type: 'LORA', r: 2, lora_alpha: 4, target_modules: '(a+)+$' };
const NESTED_MODULES = [NESTED, `${NESTED}b`, 'a'.repeat(10000)];

test('both CLIs: the same bytes and exit code for a 40,000-character module path and a "(a+)+$" target', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const long = writeAdapter(t, LONG_MODULES, LONG_CONFIG);
  const nested = writeAdapter(t, NESTED_MODULES, NESTED_CONFIG);
  const out = mkdtempSync(join(tmpdir(), 'pb-hostile-regex-out-'));
  t.after(() => rmSync(out, { recursive: true, force: true }));
  for (const args of [
    ['adapter-info', long],
    ['adapter-info', long, '--json'],
    ['translate', long, join(out, 'a'), '--to', 'peft', '--dry-run'],
    ['adapter-info', nested],
    ['adapter-info', nested, '--json'],
    ['translate', nested, join(out, 'b'), '--to', 'kohya', '--dry-run'],
  ]) {
    const native = runNative(args);
    const js = runJs(args);
    assert.equal(native.status, js.status, args.join(' '));
    assert.equal(native.stdout, js.stdout, args.join(' '));
    assert.equal(native.stderr, js.stderr, args.join(' '));
    assert.ok(native.ms < 20000, `${args.join(' ')} took ${native.ms} ms natively`);
  }
  const info = JSON.parse(runNative(['adapter-info', nested, '--json']).stdout);
  assert.equal(runNative(['adapter-info', long]).status, 0);
  assert.ok(JSON.stringify(info).includes(`${NESTED}b`), 'the untargeted module is reported');
});

test('WASM: the module keeps working after 2,000 rejected or hostile patterns', async () => {
  const weights = adapterBytes(['model.layers.0.self_attn.q_proj']);
  const hostile = adapterBytes(NESTED_MODULES);
  const bad = ['(a)\\1', '(?<=attn\\.)q_proj', '(?P<n>q)', 'q_proj(', '[z-a]', '(' + 'a'.repeat(100000)];
  let rejected = 0;
  for (let i = 0; i < 2000; ++i) {
    if (i % 4 === 3) {
      const info = await adapterInfo({ weights: hostile, config: NESTED_CONFIG });
      assert.ok(info, 'a "(a+)+$" target is answered');
      continue;
    }
    const pattern = bad[i % bad.length];
    const config = {
      peft_type: 'LORA',
      r: 2,
      lora_alpha: 4,
      target_modules: i % 2 ? pattern : ['q_proj'],
      rank_pattern: i % 2 ? {} : { [pattern]: 4 },
    };
    await assert.rejects(adapterInfo({ weights, config }), (e) => {
      assert.ok(e instanceof SafetensorsError);
      assert.equal(e.code, 'InvalidConfig');
      assert.ok(e.message.length < 1000, `message of ${e.message.length} characters`);
      return true;
    });
    ++rejected;
  }
  assert.equal(rejected, 1500);
  const good = await adapterInfo({
    weights,
    config: { peft_type: 'LORA', r: 2, lora_alpha: 4, target_modules: '.*\\.q_proj' },
  });
  assert.ok(JSON.stringify(good).includes('model.layers.0.self_attn.q_proj'));
  const header = await inspect(weights);
  assert.equal(Object.keys(header.tensors ?? header).length > 0, true);
});
