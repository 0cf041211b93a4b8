// The npm CLI merges the shards of a sharded base at once, on its own thread and on worker threads
// (web/src/cli/shard-workers.js), as the native CLI merges them on threads: the same files, the same progress
// line, the same error (the first failing shard's in file order) and the same summary, quantization errors
// included, whatever --threads says. A worker plans the merge again from the main thread's adapter descriptor and
// bytes, and reads only the shards the main thread read.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, skipWithoutNativeCli, webDir } from './helpers/common.mjs';
import { NAMES, makeShardedModel } from './helpers/sharded-model.mjs';
import { both } from './helpers/two-trees.mjs';

const FORCED = { PB_PROGRESS: 'always', PB_PROGRESS_CLOCK_MS: '2000' };
const ARGS = ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out'];

/** The three-shard BF16 base and its r=4 q/v adapter (helpers/sharded-model.mjs) as files: setup(root) writes them. */
async function modelFiles(options) {
  const model = await makeShardedModel(options);
  const files = {
    'base/model.safetensors.index.json': model.base.index,
    'base/config.json': model.base.config,
    'rob/adapter_config.json': model.adapter.config,
  };
  for (const name of NAMES) files[`base/${name}`] = new Uint8Array(await model.files[name].arrayBuffer());
  files['rob/adapter_model.safetensors'] = new Uint8Array(await model.adapter.weights.arrayBuffer());
  return (root) => {
    mkdirSync(join(root, 'base'));
    mkdirSync(join(root, 'rob'));
    for (const [path, bytes] of Object.entries(files)) writeFileSync(join(root, path), bytes);
  };
}

const drawn = (stderr) =>
  stderr
    .split('\r')
    .slice(1)
    .map((l) => l.trimEnd());

test('npm CLI --threads N: the files of one thread and of the native CLI, one progress line counting the files', async (t) => {
  if (skipWithoutNativeCli(t)) return;
  const setup = await modelFiles();
  let one = null;
  for (const threads of ['1', '2', '3', '8']) {
    const r = both(t, setup, [...ARGS, '--threads', threads], FORCED);
    assert.equal(r.status, 0, r.stderr);
    one ??= r.after;
    assert.deepEqual(r.after, one, `--threads ${threads}: other bytes than one thread`);
    const lines = drawn(r.stderr);
    if (threads === '1') assert.match(lines[0], new RegExp(`${NAMES[0]}$`));
    else
      assert.deepEqual(
        lines.map((l) => l.replace(/^.*  /, '')),
        ['3 files at once', '3 files at once'],
        `--threads ${threads}`,
      );
  }
});

test("npm CLI: a shard that fails on a worker fails the merge as natively, the first failing shard's error, nothing written", async (t) => {
  if (skipWithoutNativeCli(t)) return;
  for (const nanInShard of [1, 2]) {
    for (const threads of ['2', '3']) {
      const r = both(t, await modelFiles({ nanInShard }), [...ARGS, '--safe', '--threads', threads]);
      assert.equal(r.status, 1);
      assert.match(
        r.stderr,
        new RegExp(`layers\\.${2 * nanInShard}\\.self_attn\\.q_proj`),
        `NaN in shard ${nanInShard}, --threads ${threads}`,
      );
      assert.deepEqual(r.after, r.before, 'nothing written');
    }
  }
});

test("npm CLI --quantize with shards on workers: the summary lists every shard's quantization errors in shard order", async (t) => {
  if (skipWithoutNativeCli(t)) return;
  const setup = await modelFiles();
  const args = [...ARGS, '--quantize', 'fp8', '--json'];
  const summaries = ['1', '3'].map((threads) => both(t, setup, [...args, '--threads', threads]).stdout);
  const errors = summaries.map((s) => JSON.parse(s).quantization.errors);
  assert.deepEqual(errors[1], errors[0]);
  // The weights of every shard, in file order (layers 0-1, 2-3, 4-5).
  const layers = errors[1].map((e) => Number(JSON.stringify(e).match(/layers\.(\d+)\./)[1]));
  assert.equal(layers.length, 18, summaries[1]); // q, k and v of six layers
  assert.deepEqual(
    layers,
    [...layers].sort((a, b) => a - b),
  );
});

/** Runs `fn` with the merge planned on this thread as runMerge plans it: {o, session, base, adapterFiles, plan}. */
async function planned(root, fn) {
  const { MergeSession } = await import(join(webDir, 'src', 'ops', 'merge.js'));
  const { openMergeInputs } = await import(join(webDir, 'src', 'cli', 'merge-command.js'));
  const { recordWholeReads } = await import(join(webDir, 'src', 'cli', 'inputs.js'));
  const o = {
    base: join(root, 'base'),
    adapter: join(root, 'rob'),
    baseConfig: null,
    convert: false,
    namingTables: null,
  };
  const session = await MergeSession.create('Merger', o);
  const inputs = [];
  let adapterFiles = null;
  try {
    const wholeReads = new Map();
    recordWholeReads(wholeReads);
    const opened = await openMergeInputs(session, o, inputs).finally(() => recordWholeReads(null));
    adapterFiles = opened.adapterFiles;
    return await fn({ o, session, base: opened.base, adapterFiles, plan: session.plan(), wholeReads });
  } finally {
    for (const input of inputs) await (input.release ? input.release() : input.handle.close());
    await adapterFiles?.close();
    session.close();
  }
}

test('a shard worker reads the adapter and configs the main thread read, even once their paths name other files', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'pb-shard-workers-'));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  (await modelFiles())(root);
  const reference = spawnSync(process.execPath, [cliPath, ...ARGS, '--threads', '1', '--quiet'], {
    cwd: root,
    encoding: 'latin1',
  });
  assert.equal(reference.status, 0, reference.stderr);
  const { ShardWorkers } = await import(join(webDir, 'src', 'cli', 'shard-workers.js'));
  await planned(root, async ({ o, base, adapterFiles, plan, wholeReads }) => {
    // The adapter's weights move away, other bytes take their path, and the adapter's config now scales by 4
    // times as much (the plan alone would not tell). (The shards are opened by path: the next test.)
    for (const path of [join(root, 'rob', 'adapter_model.safetensors')]) {
      renameSync(path, `${path}.moved`);
      writeFileSync(path, 'not safetensors');
    }
    const configPath = join(root, 'rob', 'adapter_config.json');
    writeFileSync(configPath, JSON.stringify({ ...JSON.parse(readFileSync(configPath, 'utf8')), lora_alpha: 32 }));
    assert.ok(wholeReads.has(configPath), [...wholeReads.keys()].join(', '));
    const workers = new ShardWorkers(1, o, base, adapterFiles, plan, wholeReads);
    try {
      const [worker] = workers.workers;
      await worker.ready;
      for (const [s, name] of NAMES.entries()) {
        const file = { temp: join(root, `${name}.out`), handle: await open(join(root, `${name}.out`), 'w') };
        const moved = [];
        try {
          await worker.merge(s, file, false, (n) => moved.push(n));
        } finally {
          await file.handle.close();
        }
        assert.equal(
          moved.reduce((a, b) => a + b, 0),
          plan.shards[s].sourceBytes,
          'every source byte counted',
        );
        assert.deepEqual(readFileSync(file.temp), readFileSync(join(root, 'out', name)), name);
      }
    } finally {
      await workers.stop();
    }
  });
});

test('a shard worker never reads a shard other than the one the main thread read: it fails, saying so', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'pb-shard-workers-'));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  (await modelFiles())(root);
  const { ShardWorkers } = await import(join(webDir, 'src', 'cli', 'shard-workers.js'));
  await planned(root, async ({ o, base, adapterFiles, plan, wholeReads }) => {
    // Shards are open only while read (a base of thousands must not hold a descriptor each): the worker opens
    // them by path, and the same bytes under another inode are not the file this thread planned from.
    const path = join(root, 'base', NAMES[1]);
    const bytes = readFileSync(path);
    renameSync(path, `${path}.moved`);
    writeFileSync(path, bytes);
    const workers = new ShardWorkers(1, o, base, adapterFiles, plan, wholeReads);
    try {
      await assert.rejects(
        workers.workers[0].ready,
        (e) =>
          e.code === 'IoError' &&
          e.message === `\`${path}\` changed while the command ran (it is not the file whose header was read)`,
      );
    } finally {
      await workers.stop();
    }
  });
});

test("a shard worker whose plan differs from the main thread's fails the merge, saying why", async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'pb-shard-workers-'));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  (await modelFiles())(root);
  const { ShardWorkers } = await import(join(webDir, 'src', 'cli', 'shard-workers.js'));
  await planned(root, async ({ o, base, adapterFiles, plan }) => {
    // The main thread's plan as it would be had the adapter config changed in between (the index and the configs
    // are read again by path): another first shard.
    const other = {
      ...plan,
      shards: [{ ...plan.shards[0], outputSize: plan.shards[0].outputSize + 8 }, ...plan.shards.slice(1)],
    };
    const workers = new ShardWorkers(2, o, base, adapterFiles, other);
    try {
      const here = [];
      await assert.rejects(
        workers.mergeShards(
          3,
          async (s) => here.push(s),
          () => assert.fail('a worker that failed to plan takes no shard'),
        ),
        (e) => e.code === 'IoError' && e.message === 'a merge worker planned the merge otherwise than the main thread',
      );
    } finally {
      await workers.stop();
    }
  });
});
