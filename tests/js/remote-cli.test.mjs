// Remote arguments in both CLIs (src/net/remote_address.h; docs/remote.md): adapter-info, translate and merge of a
// Hub adapter (a repo, or its weights file's URL), inspect of a whole repo and of an index URL, against the local
// stand-in Hub (tests/hub/server.mjs). The native CLI and the npm CLI must print the same bytes and exit alike;
// a remote read must give what the same files read locally give.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, hasNativeCli, nativeCli } from './helpers/common.mjs';
import { writeAdapter, writeShardedBase, writeSingleBase } from './helpers/remote-model.mjs';
import { startHub } from '../hub/server.mjs';

const work = mkdtempSync(join(tmpdir(), 'pb-remote-cli-'));
const home = join(work, 'hf-home'); // no token file
const dirs = {
  adapter: join(work, 'adapter'),
  sharded: join(work, 'sharded'),
  single: join(work, 'single'),
  big: join(work, 'big'),
  bigAdapter: join(work, 'big-adapter'),
};
let hub;
let foreign; // another origin, to which a redirect must not carry the token

before(async () => {
  await writeAdapter(dirs.adapter, { layers: 2, hidden: 64 });
  await writeShardedBase(dirs.sharded, { shards: 2, layers: 2, hidden: 64, vocab: 100 });
  await writeSingleBase(dirs.single, { layers: 2, hidden: 64 });
  writeFileSync(join(dirs.sharded, 'tokenizer.json'), '{"model": {"type": "BPE"}}\n'); // copied into a merged folder
  // Shards larger than the first range (64 KiB), so that their data takes requests of its own.
  await writeShardedBase(dirs.big, { shards: 2, layers: 2, hidden: 256, vocab: 300 });
  await writeAdapter(dirs.bigAdapter, { layers: 2, hidden: 256 });
  const adapterFiles = Object.fromEntries(
    readdirSync(dirs.adapter).map((n) => [n, new Uint8Array(readFileSync(join(dirs.adapter, n)))]),
  );
  const files = {
    'me/adapter': dirs.adapter,
    'me/private-adapter': dirs.adapter,
    'me/nested': Object.fromEntries(Object.entries(adapterFiles).map(([n, b]) => [`lora/${n}`, b])),
    'me/sharded': dirs.sharded,
    'me/single': dirs.single,
    'me/big': dirs.big,
    'me/empty': { 'README.md': 'nothing here' },
  };
  hub = await startHub({ files, tokens: { 'me/private-adapter': 'hf_secret' } });
  foreign = await startHub({ files });
});
after(async () => {
  await hub?.close();
  await foreign?.close();
  rmSync(work, { recursive: true, force: true });
});

function run(command, args, env) {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { env: { ...process.env, ...env }, encoding: 'latin1', timeout: 60000, maxBuffer: 1 << 26 },
      (error, stdout, stderr) => resolve({ status: error ? error.code : 0, stdout, stderr }),
    );
  });
}

const clis = [['npm', (args, env) => run(process.execPath, [cliPath, ...args], env)]];
if (hasNativeCli) clis.push(['native', (args, env) => run(nativeCli, args, env)]);
const remoteEnv = (env = {}) => ({
  HF_ENDPOINT: hub.endpoint,
  HF_TOKEN: '',
  HF_HOME: home,
  PB_HTTP_RETRIES: '0',
  ...env,
});

/** Runs `args(name)` in both CLIs; asserts the same status, stdout and stderr; returns the first result. */
async function both(args, env = {}) {
  const results = [];
  for (const [name, cli] of clis)
    results.push([name, await cli(typeof args === 'function' ? args(name) : args, remoteEnv(env))]);
  for (const [name, r] of results.slice(1)) assert.deepEqual(r, results[0][1], `${name} differs from ${results[0][0]}`);
  return results[0][1];
}

const local = (args) => run(nativeCli, args, {});
const filesOf = (dir) =>
  Object.fromEntries(
    readdirSync(dir)
      .sort()
      .map((n) => [n, readFileSync(join(dir, n)).toString('hex')]),
  );

test('adapter-info of a Hub repo, a folder of one and a weights URL: as the same adapter read locally', async () => {
  const expected = (await both(['adapter-info', dirs.adapter])).stdout;
  for (const address of [
    'hf://me/adapter',
    'hf://me/adapter@main',
    'hf://me/nested/lora',
    `${hub.endpoint}/me/adapter/resolve/main/adapter_model.safetensors`,
  ]) {
    const r = await both(['adapter-info', address]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, expected, address);
  }
  const json = await both(['adapter-info', '--json', 'hf://me/adapter']);
  assert.equal(json.stdout, (await both(['adapter-info', '--json', dirs.adapter])).stdout);
});

test('translate of a Hub adapter writes what the local translate writes, in both CLIs', async () => {
  const want = join(work, 'kohya-local');
  assert.equal((await both((n) => ['translate', dirs.adapter, `${want}-${n}`, '--to', 'kohya', '-q'])).status, 0);
  const r = await both((n) => ['translate', 'hf://me/adapter', join(work, `kohya-${n}`), '--to', 'kohya', '-q']);
  assert.equal(r.status, 0, r.stderr);
  for (const [name] of clis) assert.deepEqual(filesOf(join(work, `kohya-${name}`)), filesOf(`${want}-${name}`), name);
});

/** The totals over `files` (their own reports, one by one), as inspect of a model ends: counted here from each
 * file's --json report. */
async function totalsJson(files) {
  const total = {
    files: files.length,
    tensors: 0,
    headerSize: 0,
    dataSize: 0,
    fileSize: 0,
    parameters: {},
    totalParameters: 0,
  };
  for (const f of files) {
    const r = JSON.parse((await local(['inspect', '--json', f])).stdout);
    total.tensors += r.tensors.length;
    for (const k of ['headerSize', 'dataSize', 'fileSize', 'totalParameters']) total[k] += r[k];
    for (const [dtype, n] of Object.entries(r.parameters)) total.parameters[dtype] = (total.parameters[dtype] ?? 0) + n;
  }
  return total;
}
async function totalsText(files) {
  const t = await totalsJson(files);
  const n = (v) => v.toLocaleString('en-US');
  const dtypes = Object.entries(t.parameters)
    .map(([d, v]) => `  ${d}: ${n(v)}\n`)
    .join('');
  return (
    `\n==> total: ${t.files} files <==\nheader: ${n(t.headerSize)} bytes, data: ${n(t.dataSize)} bytes, files: ${n(t.fileSize)} bytes\n` +
    `tensors: ${n(t.tensors)}\nparameters:\n${dtypes}  total: ${n(t.totalParameters)}\n`
  );
}

test('inspect of a whole repo and of its index URL: every shard under its name; a one-file repo too', async () => {
  const shards = readdirSync(dirs.sharded)
    .filter((n) => n.endsWith('.safetensors'))
    .sort();
  const parts = [];
  for (const s of shards) parts.push(`==> ${s} <==\n${(await local(['inspect', join(dirs.sharded, s)])).stdout}`);
  const expected = parts.join('\n') + (await totalsText(shards.map((s) => join(dirs.sharded, s))));
  for (const address of [
    'hf://me/sharded',
    'hf://me/sharded/model.safetensors.index.json',
    `${hub.endpoint}/me/sharded/resolve/main/model.safetensors.index.json`,
  ]) {
    const r = await both(['inspect', address]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, expected, address);
  }
  const json = JSON.parse((await both(['inspect', '--json', 'hf://me/sharded'])).stdout);
  assert.deepEqual(
    json.files.map((f) => f.path),
    shards,
  );
  assert.deepEqual(
    json.files[0].report,
    JSON.parse((await local(['inspect', '--json', join(dirs.sharded, shards[0])])).stdout),
  );
  assert.deepEqual(json.total, await totalsJson(shards.map((s) => join(dirs.sharded, s))));
  const single = await both(['inspect', 'hf://me/single']);
  assert.equal(
    single.stdout,
    `==> model.safetensors <==\n${(await local(['inspect', join(dirs.single, 'model.safetensors')])).stdout}`,
  );
  const none = await both(['inspect', 'hf://me/empty']);
  assert.equal(none.status, 1);
  assert.equal(
    none.stderr,
    'error: IoError: `hf://me/empty` has neither model.safetensors nor model.safetensors.index.json\n',
  );
});

test('merge with a Hub adapter writes what the local merge writes', async () => {
  const want = join(work, 'merged-local');
  assert.equal(
    (await local(['merge', '--base', dirs.sharded, '--adapter', dirs.adapter, '--out', want, '-q'])).status,
    0,
  );
  const merged = await both((n) => [
    'merge',
    '--base',
    dirs.sharded,
    '--adapter',
    'hf://me/adapter',
    '--out',
    join(work, `merged-${n}`),
    '-q',
  ]);
  assert.equal(merged.status, 0, merged.stderr);
  for (const [name] of clis) assert.deepEqual(filesOf(join(work, `merged-${name}`)), filesOf(want), name);
});

test('merge of a remote base (a repo, its index URL, one file) writes what the local merge writes, in both CLIs', async () => {
  const want = join(work, 'remote-base-local');
  const localRun = await local(['merge', '--base', dirs.sharded, '--adapter', dirs.adapter, '--out', want]);
  assert.equal(localRun.status, 0, localRun.stderr);
  assert.ok(filesOf(want)['tokenizer.json'], 'the local merge copies the tokenizer');
  // The same plan and outcome as the local merge (the timing and peak memory aside), and the same files.
  const steady = (text) => text.replace(/ in [0-9.]+ s \([^)]*\), peak memory .*/, '');
  for (const [name, cli] of clis) {
    const r = await cli(
      [
        'merge',
        '--base',
        'hf://me/sharded',
        '--adapter',
        'hf://me/adapter',
        '--out',
        join(work, `remote-base-${name}`),
      ],
      remoteEnv(),
    );
    assert.equal(r.status, 0, `${name}: ${r.stderr}`);
    assert.equal(steady(r.stdout), steady(localRun.stdout), name);
    assert.deepEqual(filesOf(join(work, `remote-base-${name}`)), filesOf(want), name);
  }

  // The index named by URL: its shards beside it, no other file copied (a file's folder need not be the model's).
  const byIndex = await both((n) => [
    'merge',
    '--base',
    `${hub.endpoint}/me/sharded/resolve/main/model.safetensors.index.json`,
    '--adapter',
    dirs.adapter,
    '--out',
    join(work, `by-index-${n}`),
    '-q',
  ]);
  assert.equal(byIndex.status, 0, byIndex.stderr);
  const { ['tokenizer.json']: _, ...weights } = filesOf(want);
  for (const [name] of clis) assert.deepEqual(filesOf(join(work, `by-index-${name}`)), weights, name);
  // ...as the local index file gives.
  assert.equal(
    (
      await both((n) => [
        'merge',
        '--base',
        join(dirs.sharded, 'model.safetensors.index.json'),
        '--adapter',
        dirs.adapter,
        '--out',
        join(work, `local-index-${n}`),
        '-q',
      ])
    ).status,
    0,
  );
  for (const [name] of clis) assert.deepEqual(filesOf(join(work, `local-index-${name}`)), weights, name);

  const oneWant = join(work, 'one-local');
  assert.equal(
    (
      await local([
        'merge',
        '--base',
        join(dirs.single, 'model.safetensors'),
        '--adapter',
        dirs.adapter,
        '--out',
        oneWant,
        '-q',
      ])
    ).status,
    0,
  );
  const one = await both((n) => [
    'merge',
    '--base',
    'hf://me/single/model.safetensors',
    '--adapter',
    dirs.adapter,
    '--out',
    join(work, `one-${n}`),
    '-q',
  ]);
  assert.equal(one.status, 0, one.stderr);
  assert.match(
    one.stderr,
    /^warning: the base `hf:\/\/me\/single\/model.safetensors` has no config.json beside its weights/,
  );
  for (const [name] of clis) assert.deepEqual(filesOf(join(work, `one-${name}`)), filesOf(oneWant), name);

  // unmerge reads a remote base the same way (the same bytes as the local unmerge).
  const back = join(work, 'unmerged-local');
  assert.equal(
    (await local(['unmerge', '--base', dirs.sharded, '--adapter', dirs.adapter, '--out', back, '-q'])).status,
    0,
  );
  const unmerged = await both((n) => [
    'unmerge',
    '--base',
    'hf://me/sharded',
    '--adapter',
    dirs.adapter,
    '--out',
    join(work, `unmerged-${n}`),
    '-q',
  ]);
  assert.equal(unmerged.status, 0, unmerged.stderr);
  for (const [name] of clis) assert.deepEqual(filesOf(join(work, `unmerged-${name}`)), filesOf(back), name);

  const notModel = await both([
    'merge',
    '--base',
    'hf://me/sharded/config.json',
    '--adapter',
    dirs.adapter,
    '--out',
    join(work, 'never'),
  ]);
  assert.equal(notModel.status, 1);
  assert.match(
    notModel.stderr,
    /^error: InvalidArgument: `hf:\/\/me\/sharded\/config.json` is neither a .safetensors file nor a model index/,
  );
  const empty = await both([
    'merge',
    '--base',
    'hf://me/empty',
    '--adapter',
    dirs.adapter,
    '--out',
    join(work, 'never'),
  ]);
  assert.equal(empty.status, 1);
  assert.match(empty.stderr, /has neither model.safetensors nor model.safetensors.index.json/);
  assert.throws(() => readdirSync(join(work, 'never')));
});

test('a remote base that fails or changes mid-merge leaves nothing; a cut connection resumes', async () => {
  const want = join(work, 'big-local');
  assert.equal(
    (await local(['merge', '--base', dirs.big, '--adapter', dirs.bigAdapter, '--out', want, '-q'])).status,
    0,
  );
  const shard2 = /model-00002-of-00002\.safetensors$/;
  for (const [name, cli] of clis) {
    // Cut once in the data of the second shard: resumed at the byte reached, the same output.
    hub.faults.length = 0;
    hub.faults.push({ type: 'truncate', at: 5000, path: shard2, skip: 1, times: 1 });
    const out = join(work, `big-${name}`);
    const r = await cli(
      ['merge', '--base', 'hf://me/big', '--adapter', dirs.bigAdapter, '--out', out, '-q'],
      remoteEnv({ PB_HTTP_RETRIES: '2', PB_HTTP_BACKOFF_MS: '1' }),
    );
    assert.equal(r.status, 0, `${name}: ${r.stderr}`);
    assert.equal(hub.faults[0].times, 0, `${name}: the cut happened`);
    assert.deepEqual(filesOf(out), filesOf(want), name);
  }
  // The second shard changes after its header was read: the merge fails, naming it, and writes nothing.
  const changed = [];
  for (const [name, cli] of clis) {
    hub.faults.length = 0;
    hub.faults.push({ type: 'change', after: 1, path: shard2 });
    const out = join(work, `changed-${name}`);
    changed.push(
      await cli(['merge', '--base', 'hf://me/big', '--adapter', dirs.bigAdapter, '--out', out, '-q'], remoteEnv()),
    );
    assert.throws(() => readdirSync(out), `${name} left ${out}`);
  }
  hub.faults.length = 0;
  // The change expires the CDN URL the shard's first read landed on; the read goes back through /resolve at the
  // pinned commit, which the stand-in no longer has (it keeps only the latest commit; the real Hub would serve the
  // old bytes there, and the merge would complete with them). Either way the merge fails naming the shard.
  for (const r of changed) {
    assert.equal(r.status, 1);
    assert.match(
      r.stderr,
      /^error: IoError: (`hf:\/\/me\/big\/model-00002-of-00002\.safetensors` changed while being read \(ETag "[0-9a-f]+" became "[0-9a-f]+"\)|cannot read `hf:\/\/me\/big\/model-00002-of-00002\.safetensors`: HTTP 404: Invalid rev id: [0-9a-f]+)\n$/,
    );
  }
  const etagless = (text) => text.replace(/"[0-9a-f]+"|rev id: [0-9a-f]+/g, '…'); // the fault flips the file back and forth
  assert.equal(etagless(changed.at(-1).stderr), etagless(changed[0].stderr));
});

test('faults: a missing file, a private repo, the token on a redirect, the adapter cap', async () => {
  const missing = await both(['adapter-info', 'hf://me/nothing-here']);
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /^error: IoError: .*hf:\/\/me\/nothing-here.*404/);
  const gone = await both(['inspect', 'hf://me/sharded/model-00009-of-00009.safetensors']);
  assert.equal(gone.status, 1);
  assert.match(gone.stderr, /404/);

  const denied = await both(['adapter-info', 'hf://me/private-adapter']);
  assert.equal(denied.status, 1);
  assert.match(denied.stderr, /401/);
  const allowed = await both(['adapter-info', 'hf://me/private-adapter'], { HF_TOKEN: 'hf_secret' });
  assert.equal(allowed.status, 0, allowed.stderr);

  // The weights answer a redirect to another origin: it is followed without the token.
  const location = `${foreign.endpoint}/me/adapter/resolve/main/adapter_model.safetensors`;
  for (const [name, cli] of clis) {
    hub.faults.length = 0;
    hub.faults.push({ type: 'redirect', location, path: /adapter_model\.safetensors$/ }); // the CDN's blob is shared by the repos
    hub.clearLog();
    foreign.clearLog();
    const r = await cli(['adapter-info', 'hf://me/private-adapter'], remoteEnv({ HF_TOKEN: 'hf_secret' }));
    assert.equal(r.status, 0, `${name}: ${r.stderr}`);
    assert.equal(r.stdout, allowed.stdout, name);
    assert.ok(
      hub.requests.length > 0 && hub.requests.every((q) => q.auth === 'Bearer hf_secret'),
      `${name}: the endpoint gets the token`,
    );
    assert.ok(
      foreign.requests.length > 0 && foreign.requests.every((q) => q.auth === null),
      `${name}: another origin never does: ${JSON.stringify(foreign.requests.map((q) => [q.url, q.auth]))}`,
    );
  }
  hub.faults.length = 0;

  const capped = await both(['adapter-info', 'hf://me/adapter'], { PB_HTTP_MAX_ADAPTER_BYTES: '1000' });
  assert.equal(capped.status, 1);
  const size = readFileSync(join(dirs.adapter, 'adapter_model.safetensors')).length;
  assert.equal(
    capped.stderr,
    `error: IoError: \`hf://me/adapter/adapter_model.safetensors\` is ${size} bytes, more than the cap of 1000 for adapter weights read whole (PB_HTTP_MAX_ADAPTER_BYTES)\n`,
  );
});

test("huggingface_hub's hf://owner/repo@revision/path names what hf://owner/repo/path@revision names, in both CLIs", async () => {
  const pairs = [
    [
      ['inspect', 'hf://me/sharded@main/model.safetensors.index.json'],
      ['inspect', 'hf://me/sharded/model.safetensors.index.json@main'],
    ],
    [
      ['inspect', '--json', 'hf://models/me/sharded@main'],
      ['inspect', '--json', 'hf://me/sharded@main'],
    ],
    [
      ['adapter-info', 'hf://me/nested@main/lora'],
      ['adapter-info', 'hf://me/nested/lora@main'],
    ],
    [
      ['adapter-info', 'hf://me/adapter@main/adapter_model.safetensors'],
      ['adapter-info', dirs.adapter],
    ],
  ];
  for (const [theirs, ours] of pairs) {
    const a = await both(theirs);
    assert.equal(a.status, 0, `${theirs.join(' ')}: ${a.stderr}`);
    assert.equal(a.stdout, (await both(ours)).stdout, theirs.join(' '));
  }
  // a file beside the one named is named in the form given
  const gone = await both(['inspect', 'hf://me/sharded@main/nested/model.safetensors.index.json']);
  assert.equal(gone.status, 1);
  assert.match(
    gone.stderr,
    /^error: IoError: cannot open `hf:\/\/me\/sharded@main\/nested\/model\.safetensors\.index\.json`: .*404/,
  );
});

test('a datasets/, spaces/ (or kernels/, buckets/) address is refused by its kind, before any request', async () => {
  hub.clearLog();
  for (const [args, kind] of [
    [['inspect', 'hf://datasets/me/sharded@main/model.safetensors'], 'dataset'],
    [['adapter-info', 'hf://spaces/me/adapter'], 'space'],
    [['merge', '--base', 'hf://datasets/me/sharded', '--adapter', dirs.adapter, '-o', join(work, 'never')], 'dataset'],
  ]) {
    const r = await both(args);
    assert.equal(r.status, 1, args.join(' '));
    const address = args.find((a) => a.startsWith('hf://'));
    assert.equal(
      r.stderr,
      `error: InvalidArgument: \`${address}\` names a Hub ${kind}, not a model repo: peft-bridge reads model repos (hf://owner/repo[@revision][/path])\n`,
    );
  }
  assert.equal(hub.requests.length, 0);
});

test('hints: a bare owner/repo that is no local path, an adapter repo given to inspect, an unreachable host named', async () => {
  const bare = await both(['adapter-info', 'me/adapter']);
  assert.equal(bare.status, 1);
  assert.equal(
    bare.stderr,
    'error: IoError: cannot open `me/adapter`: No such file or directory (did you mean `hf://me/adapter`?)\n',
  );
  for (const args of [
    ['inspect', 'me/sharded'],
    ['merge', '--base', 'me/sharded', '--adapter', dirs.adapter, '-o', join(work, 'never')],
    ['translate', 'me/adapter', join(work, 'never'), '--to', 'mlx'],
  ]) {
    const r = await both(args);
    assert.equal(r.status, 1, args.join(' '));
    assert.match(
      r.stderr,
      /No such file or directory \(did you mean `hf:\/\/me\/(sharded|adapter)`\?\)\n$/,
      args.join(' '),
    );
  }
  // an adapter's repo (or folder) given to inspect points at adapter-info
  for (const where of ['hf://me/adapter', dirs.adapter]) {
    const r = await both(['inspect', where]);
    assert.equal(r.status, 1);
    assert.equal(
      r.stderr,
      `error: IoError: \`${where}\` has neither model.safetensors nor model.safetensors.index.json: it is an adapter (adapter_config.json); \`peft-bridge adapter-info ${where}\` describes it\n`,
    );
  }
  // the host an hf:// address resolves at is in the message: the address itself does not show it
  const unresolved = await both(['inspect', 'hf://me/sharded'], { HF_ENDPOINT: 'http://nohost.invalid:8080' });
  assert.equal(unresolved.status, 1);
  assert.equal(
    unresolved.stderr,
    'error: IoError: cannot open `hf://me/sharded`: the host name `nohost.invalid:8080` did not resolve\n',
  );
  const { createServer } = await import('node:net');
  const closed = createServer();
  await new Promise((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = closed.address().port;
  await new Promise((resolve) => closed.close(resolve));
  const refused = await both(['inspect', 'hf://me/sharded/model.safetensors.index.json'], {
    HF_ENDPOINT: `http://127.0.0.1:${port}`,
  });
  assert.equal(refused.status, 1);
  assert.equal(
    refused.stderr,
    `error: IoError: cannot open \`hf://me/sharded/model.safetensors.index.json\`: could not connect to \`127.0.0.1:${port}\`\n`,
  );
});

test('inspect of a local sharded model (its folder or its index): every shard and the totals, as of the Hub repo', async () => {
  const shards = readdirSync(dirs.sharded)
    .filter((n) => n.endsWith('.safetensors'))
    .sort();
  const remote = await both(['inspect', 'hf://me/sharded']);
  const remoteJson = await both(['inspect', '--json', 'hf://me/sharded']);
  for (const where of [dirs.sharded, join(dirs.sharded, 'model.safetensors.index.json')]) {
    const r = await both(['inspect', where]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, remote.stdout, where);
    assert.match(r.stdout, /\n==> total: 2 files <==\n/);
    const j = await both(['inspect', '--json', where]);
    assert.equal(j.stdout, remoteJson.stdout, where);
    assert.deepEqual(JSON.parse(j.stdout).total, await totalsJson(shards.map((s) => join(dirs.sharded, s))));
  }
  const single = await both(['inspect', dirs.single]);
  assert.equal(single.stdout, (await both(['inspect', 'hf://me/single'])).stdout);
});

test('convert of a local sharded model (its folder or its index) writes the converted model folder, every shard', async () => {
  const shards = readdirSync(dirs.sharded)
    .filter((n) => n.endsWith('.safetensors'))
    .sort();
  const outs = {};
  for (const [name, cli] of clis) {
    for (const [i, where] of [dirs.sharded, join(dirs.sharded, 'model.safetensors.index.json')].entries()) {
      const out = join(work, `converted-${name}-${i}`);
      const r = await cli(['convert', where, out, '--dtype', 'bf16', '-q'], remoteEnv());
      assert.equal(r.status, 0, `${name}: ${r.stderr}`);
      outs[`${name}-${i}`] = filesOf(out);
    }
  }
  const first = Object.values(outs)[0];
  // the same bytes from both CLIs and both forms; the folder's other files come only with the folder (as for merge)
  for (const [k, files] of Object.entries(outs)) {
    const { 'tokenizer.json': tokenizer, ...weights } = files;
    const { 'tokenizer.json': _, ...expected } = first;
    assert.deepEqual(weights, expected, k);
    assert.equal(tokenizer, k.endsWith('-0') ? first['tokenizer.json'] : undefined, k);
  }
  assert.deepEqual(
    Object.keys(first).sort(),
    [...shards, 'config.json', 'model.safetensors.index.json', 'tokenizer.json'].sort(),
  );
  // each shard is that shard converted alone (in its own order), and the whole reports BF16 over both
  for (const s of shards) {
    const alone = join(work, `alone-${s}`);
    const r = await local(['convert', join(dirs.sharded, s), alone, '--dtype', 'bf16', '--order', 'input', '-q']);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(first[s], readFileSync(alone).toString('hex'), s);
  }
  const total = JSON.parse((await both(['inspect', '--json', join(work, `converted-${clis[0][0]}-0`)])).stdout).total;
  assert.deepEqual(Object.keys(total.parameters), ['BF16']);
  assert.equal(total.totalParameters, (await totalsJson(shards.map((s) => join(dirs.sharded, s)))).totalParameters);
  // --order is the one-file convert's
  const order = await both(['convert', dirs.sharded, join(work, 'never'), '--dtype', 'bf16', '--order', 'input']);
  assert.equal(order.status, 2);
  assert.equal(
    order.stderr,
    "error: --order applies to the convert of one .safetensors file (a model folder is written in the input's order)\nrun `peft-bridge convert --help` for usage\n",
  );
  const named = await both([
    'convert',
    dirs.sharded,
    join(work, 'model.bf16.safetensors'),
    '--dtype',
    'bf16',
    '--json',
  ]);
  assert.equal(named.status, 2);
  assert.equal(
    JSON.parse(named.stdout).error.message,
    `convert of a model (\`${dirs.sharded}\`: a folder, an index or a Hub repo) writes a model folder, and OUT \`${join(work, 'model.bf16.safetensors')}\` names a .safetensors file; name a folder (or convert one shard)`,
  );
});
