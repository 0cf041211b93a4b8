// Every front end writes the CLI's folder: the JS merge functions copy the base's other files (tokenizer,
// generation config, chat template...) as `peft-bridge merge` does, by the core's rule (app/base_extras.h, bound,
// never re-written in JS). For one base folder - with a subdirectory, hidden files and weights of other formats
// that are not copied - mergeShards (given the folder's listing as base.files), mergeInWorkers, planMerge, and the
// remote merges of the same folder on the local Hub stand-in (mergeRemote, mergeRemoteShard, planRemote) must give
// the native CLI's set of files, the copies byte for byte. The npm CLI's own copy: merge-extras.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  collect,
  f32Bytes,
  makeFile,
  nativeCli,
  pb,
  skipWithoutNativeCli,
  webDir,
  writePeftAdapterDir,
} from './helpers/common.mjs';
import { nodeWebWorker } from './helpers/node-web-worker.mjs';
import { startHub } from '../hub/server.mjs';

const { mergeShards, mergeInWorkers, planMerge, mergeRemote, mergeRemoteShard, planRemote } = pb;
const Q = 'model.layers.0.self_attn.q_proj';
const V = 'model.layers.0.self_attn.v_proj';
const COPIED = [
  'chat_template.jinja',
  'generation_config.json',
  'tokenizer.json',
  'tokenizer.model',
  'tokenizer_config.json',
];

const dir = mkdtempSync(join(tmpdir(), 'pb-extras-api-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

/** A 4x4 llama base folder with the files a Hub model has beside its weights, and some that are not copied. */
function writeBase(base) {
  mkdirSync(join(base, 'sub'), { recursive: true });
  const tensor = { dtype: 'F32', shape: [4, 4], data_offsets: [0, 64] };
  const header = { [`${Q}.weight`]: tensor, [`${V}.weight`]: { ...tensor, data_offsets: [64, 128] } };
  writeFileSync(join(base, 'model.safetensors'), makeFile(JSON.stringify(header), f32Bytes(32, 1)));
  writeFileSync(
    join(base, 'config.json'),
    JSON.stringify({
      architectures: ['LlamaForCausalLM'],
      model_type: 'llama',
      hidden_size: 4,
      num_attention_heads: 1,
    }),
  );
  writeFileSync(
    join(base, 'tokenizer.json'),
    JSON.stringify({ version: '1.0', model: { type: 'BPE', vocab: { a: 0, b: 1 } } }),
  );
  writeFileSync(join(base, 'tokenizer.model'), Buffer.from([0x0a, 0x03, 0x3c, 0x73, 0x3e, 0xff, 0x00, 0x7f])); // binary, not JSON
  writeFileSync(join(base, 'tokenizer_config.json'), JSON.stringify({ model_max_length: 2048 }));
  writeFileSync(join(base, 'generation_config.json'), JSON.stringify({ bos_token_id: 1, eos_token_id: 2 }));
  writeFileSync(
    join(base, 'chat_template.jinja'),
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}",
  );
  writeFileSync(join(base, 'sub', 'preprocessor_config.json'), '{}'); // a subdirectory: not copied
  writeFileSync(join(base, '.gitattributes'), '*.safetensors filter=lfs\n'); // hidden: not copied
  writeFileSync(join(base, 'pytorch_model.bin'), 'not read'); // weights of another format: not copied
}

const base = join(dir, 'base');
const adapter = join(dir, 'rob');
writeBase(base);
writePeftAdapterDir(adapter, [Q, V], ['q_proj', 'v_proj']);
const read = (path) => new Uint8Array(readFileSync(path));
/** The folder's listing as a caller gives it: names, with what each is (`readdir` with file types). */
const listing = readdirSync(base, { withFileTypes: true }).map((e) => ({
  name: e.name,
  kind: e.isFile() ? 'file' : e.isDirectory() ? 'directory' : 'other',
}));
const localBase = { open: (name) => read(join(base, name)), config: read(join(base, 'config.json')), files: listing };
const adapterInput = {
  weights: read(join(adapter, 'adapter_model.safetensors')),
  config: read(join(adapter, 'adapter_config.json')),
};

/** `peft-bridge merge`'s folder for the same inputs: name -> bytes. */
const natives = new Map();
function nativeFolder(extra = []) {
  const key = extra.join(' ');
  if (!natives.has(key)) natives.set(key, runNative(extra));
  return natives.get(key);
}
function runNative(extra) {
  const out = join(dir, `native-${natives.size}`);
  const r = spawnSync(nativeCli, ['merge', '--base', base, '--adapter', adapter, '--out', out, ...extra], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return Object.fromEntries(
    readdirSync(out)
      .sort()
      .map((n) => [n, read(join(out, n))]),
  );
}

async function folderOf(files) {
  const out = {};
  for await (const f of files) {
    const bytes = await collect(f.stream);
    assert.equal(bytes.length, f.size, `${f.path}: size told up front`);
    out[f.path] = bytes;
  }
  return Object.fromEntries(
    Object.keys(out)
      .sort()
      .map((n) => [n, out[n]]),
  );
}

function sameFolder(got, want, what) {
  assert.deepEqual(Object.keys(got), Object.keys(want), `${what}: the CLI's set of files`);
  for (const name of Object.keys(want))
    assert.ok(Buffer.from(got[name]).equals(Buffer.from(want[name])), `${what}: ${name} is not the CLI's bytes`);
}

test("mergeShards with the base folder's listing writes the CLI's folder; copyExtra: false the CLI's --no-copy-extra", async (t) => {
  if (skipWithoutNativeCli(t)) return;
  const want = nativeFolder();
  assert.deepEqual(Object.keys(want), [...COPIED, 'config.json', 'model.safetensors'].sort());
  sameFolder(await folderOf(mergeShards({ base: localBase, adapter: adapterInput })), want, 'mergeShards');
  // Plain names are files; bytes, Blobs and streams as base.open's results copy the same.
  const blobs = {
    ...localBase,
    files: listing.filter((e) => e.kind === 'file').map((e) => e.name),
    open: (name) => new Blob([read(join(base, name))]),
  };
  sameFolder(await folderOf(mergeShards({ base: blobs, adapter: adapterInput })), want, 'mergeShards (Blobs)');
  const streams = { ...localBase, open: (name) => new Blob([read(join(base, name))]).stream() };
  sameFolder(await folderOf(mergeShards({ base: streams, adapter: adapterInput })), want, 'mergeShards (streams)');
  sameFolder(
    await folderOf(mergeShards({ base: localBase, adapter: adapterInput, copyExtra: false })),
    nativeFolder(['--no-copy-extra']),
    'copyExtra: false',
  );
  // A listing holding paths: only the folder's own names are its files (nothing is asked for outside it).
  const asked = [];
  const paths = {
    ...localBase,
    files: [...listing, '../escape.txt', 'sub/preprocessor_config.json'],
    open: (name) => (asked.push(name), localBase.open(name)),
  };
  sameFolder(await folderOf(mergeShards({ base: paths, adapter: adapterInput })), want, 'a listing with paths');
  assert.ok(!asked.some((n) => n.includes('/')), asked.join(', '));
});

test('planMerge lists the copied files among its outputs and in copiedFiles, as merge --dry-run --json', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  const want = nativeFolder();
  const plan = await planMerge({ base: localBase, adapter: adapterInput });
  assert.deepEqual(plan.copiedFiles, COPIED);
  assert.deepEqual(plan.outputs.map((o) => o.path).sort(), Object.keys(want));
  for (const o of plan.outputs) assert.equal(o.size, want[o.path].length, o.path);
  const dry = spawnSync(nativeCli, ['merge', '--base', base, '--adapter', adapter, '--dry-run', '--json'], {
    encoding: 'utf8',
  });
  assert.deepEqual(plan.copiedFiles, JSON.parse(dry.stdout).copiedFiles);
});

test("mergeInWorkers writes the CLI's folder", async (t) => {
  if (skipWithoutNativeCli(t)) return;
  const workerModule = new URL(`file://${join(webDir, 'src', 'ops', 'merge-worker.js')}`);
  const files = await mergeInWorkers({
    base: { ...localBase, open: (name) => new Blob([read(join(base, name))]) },
    adapter: adapterInput,
    workers: 1,
    createWorker: () => nodeWebWorker(workerModule),
  });
  sameFolder(await folderOf(files), nativeFolder(), 'mergeInWorkers');
});

test("a Hub repo base: mergeRemote, each file by mergeRemoteShard, and planRemote give the CLI's folder", async (t) => {
  if (skipWithoutNativeCli(t)) return;
  const want = nativeFolder();
  const hub = await startHub({ files: { 'me/base': base, 'me/rob': adapter } });
  t.after(() => hub.close());
  const options = { base: { repo: 'me/base' }, adapter: { repo: 'me/rob' }, endpoint: hub.endpoint, retryDelay: 10 };
  sameFolder(await folderOf(mergeRemote(options)), want, 'mergeRemote');
  const plan = await planRemote(options);
  assert.deepEqual(plan.outputs.map((o) => o.path).sort(), Object.keys(want));
  const one = {};
  for (const { path } of plan.outputs)
    one[path] = await collect((await mergeRemoteShard({ ...options, shard: path })).stream);
  sameFolder(
    Object.fromEntries(
      Object.keys(one)
        .sort()
        .map((n) => [n, one[n]]),
    ),
    want,
    'mergeRemoteShard',
  );
  // And the CLI itself on the same repo: the same folder.
  const out = join(dir, 'native-remote');
  // (Run asynchronously: the Hub stand-in answers from this process.)
  await promisify(execFile)(nativeCli, ['merge', '--base', 'hf://me/base', '--adapter', adapter, '--out', out], {
    env: { ...process.env, HF_ENDPOINT: hub.endpoint },
  });
  assert.deepEqual(readdirSync(out).sort(), Object.keys(want));
});
