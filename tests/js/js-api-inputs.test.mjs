// The JS API's inputs: in Node a path or file: URL is a local file wherever a
// source is taken; a RandomAccessSource's close(); adapterInfo / translateAdapter on a directory (a local folder or
// a Hub repo, the files chosen by the core's rule, as both CLIs choose them); inspectRepo('owner/repo');
// huggingface.js's option names; convert's default order (the CLI's); cancelling one merged file skips it.
// The Node entry (web/src/node.js) is the one that reads paths; the default entry refuses them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import {
  cliPath,
  collect,
  fixturePath,
  hasNativeCli,
  makeFile,
  nativeCli,
  peftAdapterBytes,
  readFixture,
  skipWithoutFixtures,
  rejectsWith,
  webDir,
} from './helpers/common.mjs';
import { startHub } from '../hub/server.mjs';

const pb = await import(join(webDir, 'src', 'node.js'));
const {
  inspect,
  inspectRepo,
  readTensor,
  readSafetensors,
  convert,
  adapterInfo,
  translateAdapter,
  mergeShards,
  writeSafetensors,
  SafetensorsError,
} = pb;
const run = promisify(execFile);

const GPT2 = 'peft-gpt2-seqcls-cattn-cproj';
const MLX = 'mlx-lm-qwen2.5-0.5b';

function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-jsapi-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A safetensors file of F32 tensors: {name: values}. */
function f32File(tensors) {
  const header = {};
  const parts = [];
  let offset = 0;
  for (const [name, values] of Object.entries(tensors)) {
    header[name] = { dtype: 'F32', shape: [values.length], data_offsets: [offset, offset + 4 * values.length] };
    parts.push(new Uint8Array(new Float32Array(values).buffer));
    offset += 4 * values.length;
  }
  const data = new Uint8Array(offset);
  let at = 0;
  for (const p of parts) data.set(p, (at += p.length) - p.length);
  return makeFile(JSON.stringify(header), data);
}

test('a path, a file: URL string and a URL are local files for every reading function (Node entry)', async (t) => {
  if (skipWithoutFixtures(t)) return;
  const path = fixturePath('safetensors-jl-dtypes/model.safetensors');
  const bytes = readFixture('safetensors-jl-dtypes/model.safetensors');
  const expected = await inspect(bytes);
  for (const source of [path, pathToFileURL(path).href, pathToFileURL(path)]) {
    assert.deepEqual(await inspect(source), expected, String(source));
  }
  const name = expected.tensors.at(-1).name;
  assert.deepEqual(await readTensor(path, name), await readTensor(bytes, name));
  const events = [];
  for await (const ev of readSafetensors(pathToFileURL(path))) events.push(ev.type);
  assert.equal(events[0], 'header');
  assert.equal(events.at(-1), 'end');
  assert.deepEqual(await collect(convert(path, { dtype: 'bf16' })), await collect(convert(bytes, { dtype: 'bf16' })));
  // A tensor's data given as a path (the writer's sources too).
  const dir = tempDir(t);
  writeFileSync(join(dir, 'data.bin'), new Uint8Array([1, 2, 3, 4]));
  const written = await collect(
    writeSafetensors({ tensors: [{ name: 'x', dtype: 'U8', shape: [4], data: join(dir, 'data.bin') }] }),
  );
  assert.deepEqual([...(await readTensor(written, 'x'))], [1, 2, 3, 4]);
});

test('a missing or unreadable path is an IoError naming it; a directory is not a file', async (t) => {
  const dir = tempDir(t);
  const missing = join(dir, 'nope.safetensors');
  await rejectsWith(inspect(missing), 'IoError', new RegExp(`cannot open \`${missing}\`: No such file or directory`));
  await rejectsWith(collect(convert(missing, { dtype: 'f16' })), 'IoError', /No such file or directory/);
  await rejectsWith(inspect(dir), 'IoError', /is not a regular file/);
  await rejectsWith(inspect('file://remote-host/x.safetensors'), 'InvalidArgument', /file: URL/);
});

test('the default (browser-like) entry refuses a path with InvalidArgument instead of iterating the string', async () => {
  const script = `
    const pb = await import(${JSON.stringify(pathToFileURL(join(webDir, 'src', 'index.js')).href)});
    try { await pb.inspect('/x.safetensors'); console.log('no error'); }
    catch (e) { console.log(JSON.stringify({ name: e.name, code: e.code, message: e.message })); }`;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script]);
  const e = JSON.parse(stdout);
  assert.equal(e.name, 'SafetensorsError');
  assert.equal(e.code, 'InvalidArgument');
  assert.match(e.message, /only in Node/);
});

test('a local file source is closed when the function is done with it, and a RandomAccessSource passed in stays open', async (t) => {
  if (skipWithoutFixtures(t)) return;
  const bytes = readFixture('safetensors-jl-dtypes/model.safetensors');
  let closes = 0;
  const mine = { size: bytes.length, read: (o, n) => bytes.subarray(o, o + n), close: () => void ++closes };
  await inspect(mine);
  await readTensor(mine, (await inspect(bytes)).tensors[0].name);
  assert.equal(closes, 0, "a source the caller passed is the caller's");
  // Many reads of a path leave no file descriptor behind (a leak would run out of descriptors or show in /proc).
  const path = fixturePath('safetensors-jl-dtypes/model.safetensors');
  const { readdirSync } = await import('node:fs');
  const fds = () => readdirSync('/proc/self/fd').length;
  const before = fds();
  for (let i = 0; i < 50; ++i) await inspect(path);
  await rejectsWith(
    collect(
      convert(path, {
        dtype: 'bf16',
        order: 'reference',
        signal: AbortSignal.abort(new SafetensorsError('IoError', 'stop')),
      }),
    ),
    'IoError',
    /stop/,
  );
  assert.ok(fds() <= before + 1, `${fds()} descriptors after, ${before} before`);
});

test('adapterInfo and translateAdapter take a directory or a weights path: the core chooses the files, as the CLIs', async (t) => {
  if (skipWithoutFixtures(t)) return;
  const gpt2 = join(fixturePath(GPT2), '..', GPT2);
  const expected = await adapterInfo({
    weights: readFixture(`${GPT2}/adapter_model.safetensors`),
    config: readFixture(`${GPT2}/adapter_config.json`),
  });
  assert.deepEqual(await adapterInfo(gpt2), expected);
  assert.deepEqual(await adapterInfo(pathToFileURL(`${gpt2}/`)), expected);
  assert.deepEqual(await adapterInfo(join(gpt2, 'adapter_model.safetensors')), expected, 'the config beside the file');
  // mlx-lm's adapters.safetensors, and the same bytes as the npm CLI's adapter-info --json (minus `ok`).
  const mlx = fixturePath(MLX);
  const { stdout } = await run(process.execPath, [cliPath, 'adapter-info', mlx, '--json']);
  const { ok, ...cli } = JSON.parse(stdout);
  assert.deepEqual(await adapterInfo(mlx), cli);
  if (hasNativeCli) {
    const native = JSON.parse((await run(nativeCli, ['adapter-info', mlx, '--json'])).stdout);
    delete native.ok;
    assert.deepEqual(cli, native);
  }
  // mlx-lm cannot hold the classification head (score.weight): allowPartial, as the CLI's --allow-partial.
  const viaDir = await translateAdapter(gpt2, { to: 'mlx', allowPartial: true });
  const viaBytes = await translateAdapter(
    { weights: readFixture(`${GPT2}/adapter_model.safetensors`), config: readFixture(`${GPT2}/adapter_config.json`) },
    { to: 'mlx', allowPartial: true },
  );
  assert.deepEqual(
    viaDir.files.map((f) => f.name),
    viaBytes.files.map((f) => f.name),
  );
  for (const [i, f] of viaDir.files.entries())
    assert.ok(Buffer.from(f.bytes).equals(Buffer.from(viaBytes.files[i].bytes)), f.name);
});

test("adapter directories: the only .safetensors file, ambiguity, pickles and nothing, with the CLIs' errors", async (t) => {
  if (skipWithoutFixtures(t)) return;
  const dir = tempDir(t);
  const weights = fixturePath(`${GPT2}/adapter_model.safetensors`);
  const config = fixturePath(`${GPT2}/adapter_config.json`);
  const only = join(dir, 'only');
  mkdirSync(only);
  copyFileSync(weights, join(only, 'my_lora.safetensors'));
  copyFileSync(config, join(only, 'adapter_config.json'));
  assert.equal((await adapterInfo(only)).modules.length, (await adapterInfo(fixturePath(GPT2))).modules.length);
  copyFileSync(weights, join(only, 'other.safetensors'));
  await rejectsWith(adapterInfo(only), 'InvalidArgument', /holds several \.safetensors files/);
  const pickle = join(dir, 'pickle');
  mkdirSync(pickle);
  writeFileSync(join(pickle, 'adapter_model.bin'), 'x');
  const empty = join(dir, 'empty');
  mkdirSync(empty);
  await rejectsWith(adapterInfo(empty), 'IoError', /holds no adapter_model\.safetensors/);
  await assert.rejects(adapterInfo(pickle), SafetensorsError);
  await assert.rejects(adapterInfo(join(pickle, 'adapter_model.bin')), SafetensorsError);
  // The npm CLI reports the same for each (its rule is the core's too).
  for (const d of [only, pickle, empty]) {
    const jsErr = await run(process.execPath, [cliPath, 'adapter-info', d, '--json']).then(
      () => null,
      (e) => e.stdout,
    );
    const apiErr = await adapterInfo(d).then(
      () => null,
      (e) => e,
    );
    assert.ok(jsErr && apiErr, d);
    assert.equal(JSON.parse(jsErr).error.message, apiErr.message, d);
    if (hasNativeCli) {
      const nativeErr = await run(nativeCli, ['adapter-info', d, '--json']).then(
        () => null,
        (e) => e.stdout,
      );
      assert.equal(nativeErr, jsErr, d);
    }
  }
});

test("adapterInfo / translateAdapter on a Hub repo: the listing, the core's choice, tokens by either name", async (t) => {
  if (skipWithoutFixtures(t)) return;
  const gpt2 = {
    'adapter_model.safetensors': readFixture(`${GPT2}/adapter_model.safetensors`),
    'adapter_config.json': readFixture(`${GPT2}/adapter_config.json`),
    'README.md': 'hi',
  };
  const mlx = {
    'adapters.safetensors': readFixture(`${MLX}/adapters.safetensors`),
    'adapter_config.json': readFixture(`${MLX}/adapter_config.json`),
  };
  const hub = await startHub({
    files: {
      'me/gpt2-lora': gpt2,
      'me/loras': Object.fromEntries(Object.entries(mlx).map(([k, v]) => [`mlx/${k}`, v])),
      'me/private': gpt2,
    },
    tokens: { 'me/private': 'hf_secret' },
  });
  t.after(() => hub.close());
  const local = await adapterInfo(fixturePath(GPT2));
  assert.deepEqual(await adapterInfo({ repo: 'me/gpt2-lora' }, { endpoint: hub.endpoint }), local);
  assert.deepEqual(
    await adapterInfo({ repo: 'me/loras', subfolder: 'mlx', endpoint: hub.endpoint }),
    await adapterInfo(fixturePath(MLX)),
  );
  // huggingface.js's names: hubUrl for endpoint, accessToken for token (in the options or the repo).
  assert.deepEqual(
    await adapterInfo({ repo: 'me/private' }, { hubUrl: hub.endpoint, accessToken: 'hf_secret' }),
    local,
  );
  assert.deepEqual(await adapterInfo({ repo: 'me/private', hubUrl: hub.endpoint, accessToken: 'hf_secret' }), local);
  await rejectsWith(adapterInfo({ repo: 'me/private' }, { hubUrl: hub.endpoint }), 'IoError', /401/);
  const tree = hub.requests.filter((r) => r.kind === 'tree' && r.repo === 'me/private');
  assert.ok(tree.every((r) => r.auth === null || r.auth === 'Bearer hf_secret'));
  const translated = await translateAdapter(
    { repo: 'me/gpt2-lora' },
    { to: 'mlx', endpoint: hub.endpoint, allowPartial: true },
  );
  const expected = await translateAdapter(fixturePath(GPT2), { to: 'mlx', allowPartial: true });
  assert.deepEqual(
    translated.files.map((f) => [f.name, Buffer.from(f.bytes).toString('hex')]),
    expected.files.map((f) => [f.name, Buffer.from(f.bytes).toString('hex')]),
  );
  await rejectsWith(adapterInfo({ repo: 'me/nothing' }, { endpoint: hub.endpoint }), 'IoError', /404/);
});

test('inspectRepo takes "owner/repo" and huggingface.js option names; inspect takes them too', async (t) => {
  const model = f32File({ a: [1, 2], b: [3] });
  const hub = await startHub({
    files: { 'me/model': { 'model.safetensors': model }, 'me/private': { 'model.safetensors': model } },
    tokens: { 'me/private': 'hf_x' },
  });
  t.after(() => hub.close());
  const repo = await inspectRepo('me/model', { hubUrl: hub.endpoint });
  assert.equal(repo.repo, 'me/model');
  assert.deepEqual(
    repo.shards.map((s) => s.path),
    ['model.safetensors'],
  );
  assert.deepEqual(repo.shards[0].header, await inspect(model));
  assert.deepEqual(
    (await inspectRepo('me/private', { endpoint: hub.endpoint, accessToken: 'hf_x' })).shards[0].header,
    await inspect(model),
  );
  assert.deepEqual(
    (await inspectRepo({ repo: 'me/model', hubUrl: hub.endpoint })).shards[0].header,
    await inspect(model),
  );
  assert.deepEqual(
    await inspect('hf://me/private/model.safetensors', { hubUrl: hub.endpoint, accessToken: 'hf_x' }),
    await inspect(model),
  );
  assert.deepEqual(
    await inspect({ repo: 'me/private', path: 'model.safetensors', hubUrl: hub.endpoint, accessToken: 'hf_x' }),
    await inspect(model),
  );
  await rejectsWith(inspectRepo('me/private', { hubUrl: hub.endpoint }), 'IoError', /401/);
  await rejectsWith(inspectRepo('not a repo/../x', { hubUrl: hub.endpoint }), 'InvalidArgument');
  await assert.rejects(inspectRepo(42), TypeError);
});

test('convert defaults to the CLI\'s order: the bytes of `peft-bridge convert`; a stream needs order: "input"', async (t) => {
  if (skipWithoutFixtures(t)) return;
  const dir = tempDir(t);
  const path = fixturePath('safetensors-jl-dtypes/model.safetensors');
  const out = join(dir, 'out.safetensors');
  await run(process.execPath, [cliPath, 'convert', path, out, '--dtype', 'f16']);
  const cli = readFileSync(out);
  assert.ok(Buffer.from(await collect(convert(path, { dtype: 'f16' }))).equals(cli));
  assert.ok(
    Buffer.from(
      await collect(convert(readFixture('safetensors-jl-dtypes/model.safetensors'), { dtype: 'f16' })),
    ).equals(cli),
  );
  if (hasNativeCli) {
    await run(nativeCli, ['convert', path, out, '--dtype', 'f16']);
    assert.ok(readFileSync(out).equals(cli));
  }
  const stream = new Blob([readFixture('safetensors-jl-dtypes/model.safetensors')]).stream();
  await rejectsWith(
    collect(convert(stream, { dtype: 'f16' })),
    'InvalidArgument',
    /the default, the CLI's.*order: "input"/,
  );
});

// A two-shard base whose every tensor a rank-2 PEFT adapter changes, for the merge tests below.
function shardedModel() {
  const matrix = (name) =>
    makeFile(
      JSON.stringify({ [name]: { dtype: 'F32', shape: [4, 4], data_offsets: [0, 64] } }),
      new Uint8Array(new Float32Array(Array.from({ length: 16 }, (_, i) => i / 8)).buffer),
    );
  const names = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
  const shards = [matrix('model.layers.0.self_attn.q_proj.weight'), matrix('model.layers.1.self_attn.q_proj.weight')];
  const index = {
    metadata: { total_size: 128 },
    weight_map: {
      'model.layers.0.self_attn.q_proj.weight': names[0],
      'model.layers.1.self_attn.q_proj.weight': names[1],
    },
  };
  const adapter = {
    weights: peftAdapterBytes(['model.layers.0.self_attn.q_proj', 'model.layers.1.self_attn.q_proj']),
    config: { peft_type: 'LORA', r: 2, lora_alpha: 4, target_modules: ['q_proj'] },
  };
  return { files: Object.fromEntries(names.map((n, i) => [n, shards[i]])), index: JSON.stringify(index), adapter };
}

test("cancelling one merged file's stream skips that file; the others come out whole and identical", async () => {
  const model = shardedModel();
  let closes = 0;
  const open = (name) => {
    const bytes = model.files[name];
    return { size: bytes.length, read: (o, n) => bytes.subarray(o, o + n), close: () => void ++closes };
  };
  const whole = {};
  for await (const f of mergeShards({ base: { index: model.index, open }, adapter: model.adapter }))
    whole[f.path] = await collect(f.stream);
  assert.deepEqual(Object.keys(whole), [...Object.keys(model.files), 'model.safetensors.index.json']);
  assert.equal(closes, 2, 'each random-access shard source closed once the merge is done with it');
  for (const when of ['before reading', 'after one chunk']) {
    const got = {};
    for await (const f of mergeShards({ base: { index: model.index, open }, adapter: model.adapter })) {
      if (f.path === 'model-00001-of-00002.safetensors') {
        if (when === 'after one chunk') {
          const reader = f.stream.getReader();
          await reader.read();
          await reader.cancel();
        } else {
          await f.stream.cancel();
        }
        continue;
      }
      got[f.path] = await collect(f.stream);
    }
    assert.deepEqual(Object.keys(got), ['model-00002-of-00002.safetensors', 'model.safetensors.index.json'], when);
    for (const [path, bytes] of Object.entries(got))
      assert.ok(Buffer.from(bytes).equals(Buffer.from(whole[path])), `${when}: ${path}`);
  }
  // Not reading a file to its end, nor cancelling it, still stops the merge.
  await rejectsWith(
    (async () => {
      for await (const f of mergeShards({ base: { index: model.index, open }, adapter: model.adapter })) void f;
    })(),
    'InvalidArgument',
    /not read to its end \(nor cancelled\)/,
  );
});

test('mergeShards reads shards given as paths by base.open', async (t) => {
  const model = shardedModel();
  const dir = tempDir(t);
  for (const [name, bytes] of Object.entries(model.files)) writeFileSync(join(dir, name), bytes);
  const fromBytes = {};
  for await (const f of mergeShards({
    base: { index: model.index, open: (n) => model.files[n] },
    adapter: model.adapter,
  }))
    fromBytes[f.path] = await collect(f.stream);
  writeFileSync(join(dir, 'adapter.safetensors'), model.adapter.weights);
  const fromPaths = {};
  const adapter = { weights: join(dir, 'adapter.safetensors'), config: model.adapter.config };
  for await (const f of mergeShards({ base: { index: model.index, open: (n) => join(dir, n) }, adapter }))
    fromPaths[f.path] = await collect(f.stream);
  assert.deepEqual(Object.keys(fromPaths), Object.keys(fromBytes));
  for (const k of Object.keys(fromBytes)) assert.ok(Buffer.from(fromPaths[k]).equals(Buffer.from(fromBytes[k])), k);
});

// ---- the README's JavaScript examples, run as written ("peft-bridge" resolved to the Node entry) ----

/** The ```js blocks of the README's JavaScript API section, dedented. */
function readmeBlocks() {
  const text = readFileSync(join(webDir, '..', 'README.md'), 'utf8');
  const section = text.slice(text.indexOf('## The JavaScript API'));
  return [...section.matchAll(/^( *)```js\n([\s\S]*?)^\1```/gm)].map(([, indent, body]) =>
    body.replace(new RegExp(`^${indent}`, 'gm'), ''),
  );
}

async function runExample(t, code, dir, hub) {
  const file = join(dir, 'example.mjs');
  writeFileSync(
    file,
    code.replaceAll('"peft-bridge"', JSON.stringify(pathToFileURL(join(webDir, 'src', 'node.js')).href)),
  );
  const env = { ...process.env, HF_ENDPOINT: hub.endpoint };
  delete env.HF_TOKEN;
  return run(process.execPath, [file], { cwd: dir, env });
}

test("the README's first JS example runs as written, and its convert writes the bytes `peft-bridge convert` writes", async (t) => {
  if (skipWithoutFixtures(t)) return;
  const dir = tempDir(t);
  const model = fixturePath('safetensors-jl-dtypes/model.safetensors');
  copyFileSync(model, join(dir, 'model.safetensors'));
  mkdirSync(join(dir, 'my-lora'));
  for (const f of ['adapter_model.safetensors', 'adapter_config.json'])
    copyFileSync(fixturePath(`${GPT2}/${f}`), join(dir, 'my-lora', f));
  // createAdapter's base: a LLaMA-shaped model with q_proj and v_proj (a golden corpus base).
  const corpusBase = join(webDir, '..', 'tests', 'golden', 'corpus', 'llama_lora_f32', 'base');
  mkdirSync(join(dir, 'my-model'));
  for (const f of readdirSync(corpusBase)) copyFileSync(join(corpusBase, f), join(dir, 'my-model', f));
  // extractAdapter's fine-tune: the same base with its golden LoRA merged in.
  const corpusTuned = join(corpusBase, '..', 'peft_merged');
  mkdirSync(join(dir, 'my-finetune'));
  for (const f of readdirSync(corpusTuned)) copyFileSync(join(corpusTuned, f), join(dir, 'my-finetune', f));
  const hub = await startHub({
    files: { 'owner/model': { 'model.safetensors': readFixture('safetensors-jl-dtypes/model.safetensors') } },
  });
  t.after(() => hub.close());
  const [example] = readmeBlocks();
  const { stdout } = await runExample(t, example, dir, hub);
  assert.equal(stdout, 'IoError cannot open `missing.safetensors`: No such file or directory\n');
  assert.ok(
    hub.log('resolve').some((r) => r.repo === 'owner/model'),
    'inspectRepo read the repo',
  );
  const written = readFileSync(join(dir, 'model-bf16.safetensors'));
  await run(process.execPath, [cliPath, 'convert', 'model.safetensors', 'npm.safetensors', '--dtype', 'bf16'], {
    cwd: dir,
  });
  assert.ok(written.equals(readFileSync(join(dir, 'npm.safetensors'))), 'the npm CLI');
  if (hasNativeCli) {
    await run(nativeCli, ['convert', 'model.safetensors', 'native.safetensors', '--dtype', 'bf16'], { cwd: dir });
    assert.ok(written.equals(readFileSync(join(dir, 'native.safetensors'))), 'the native CLI');
  }
});

test("the README's Node example (mergeRemote into files) runs as written against the stand-in Hub", async (t) => {
  const dir = tempDir(t);
  const model = shardedModel();
  const weightMap = JSON.parse(model.index).weight_map;
  const lora = {
    'adapter_model.safetensors': model.adapter.weights,
    'adapter_config.json': JSON.stringify(model.adapter.config),
  };
  const hub = await startHub({
    files: { 'owner/model': { ...model.files, 'model.safetensors.index.json': model.index }, 'owner/lora': lora },
  });
  t.after(() => hub.close());
  const node = readmeBlocks().find((b) => b.includes('mergeRemote(options)'));
  assert.ok(node, 'the Node example');
  await runExample(t, node, dir, hub);
  const expected = {};
  for await (const f of mergeShards({
    base: { index: model.index, open: (n) => model.files[n] },
    adapter: model.adapter,
  }))
    expected[f.path] = await collect(f.stream);
  for (const [path, bytes] of Object.entries(expected))
    assert.ok(readFileSync(join(dir, path)).equals(Buffer.from(bytes)), path);
  assert.deepEqual(
    Object.keys(expected).sort(),
    [...new Set(Object.values(weightMap))].concat('model.safetensors.index.json').sort(),
  );
});
