// --push-to OWNER/REPO[@BRANCH] in the CLIs (src/app/push_target.h; docs/push.md), against the local Hub stand-in:
// the npm CLI pushes what merge, translate, combine, extract and create wrote, in one commit each (read back with
// @huggingface/hub and with both CLIs' inspect); branches and pull requests; a fault retried, a failing commit
// leaving the repo as it was, tokens; the grammar's usage errors are the same bytes in both CLIs; the native CLI
// pushes the same files with the same requests (src/cli/push_command.cc), multipart included.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { downloadFile, listFiles } from '@huggingface/hub';
import { cliPath, hasNativeCli, nativeCli } from './helpers/common.mjs';
import { writeAdapter, writeShardedBase } from './helpers/remote-model.mjs';
import { startHub } from '../hub/server.mjs';

const TOKEN = 'hf_cli_writer';
const work = mkdtempSync(join(tmpdir(), 'pb-push-cli-'));
const home = join(work, 'hf-home'); // no token file
const dirs = { adapter: join(work, 'adapter'), base: join(work, 'base') };
let hub;

before(async () => {
  await writeAdapter(dirs.adapter, { layers: 2, hidden: 64 });
  await writeShardedBase(dirs.base, { shards: 2, layers: 2, hidden: 64, vocab: 100 });
  hub = await startHub({
    files: { 'me/existing': { 'README.md': 'hello' }, 'other/open': { 'README.md': 'public' } },
    owners: { me: TOKEN, other: 'hf_other' },
  });
});
after(async () => {
  await hub?.close();
  rmSync(work, { recursive: true, force: true });
});

function run(command, args, env) {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 120000, maxBuffer: 1 << 26 },
      (error, stdout, stderr) => resolve({ status: error ? error.code : 0, stdout, stderr }),
    );
  });
}
const hubEnv = (env = {}) => ({
  HF_ENDPOINT: hub.endpoint,
  HF_TOKEN: TOKEN,
  HF_HOME: home,
  PB_HTTP_RETRIES: '2',
  PB_HTTP_BACKOFF_MS: '10',
  PB_PROGRESS: '',
  ...env,
});
const npm = (args, env) => run(process.execPath, [cliPath, ...args], hubEnv(env));
const native = (args, env) => run(nativeCli, args, hubEnv(env));

async function listing(repo, revision) {
  const out = {};
  for await (const f of listFiles({ repo, revision, hubUrl: hub.endpoint, recursive: true }))
    if (f.type === 'file') out[f.path] = !!f.lfs;
  return out;
}
const bytesOf = async (repo, path, revision) =>
  Buffer.from(await (await downloadFile({ repo, path, revision, hubUrl: hub.endpoint })).arrayBuffer());

/** Every file of `dir` is in the repo (at `revision`), byte for byte. */
async function assertPushed(repo, dir, revision) {
  const names = readdirSync(dir).sort();
  const listed = await listing(repo, revision);
  for (const name of names) {
    assert.ok(name in listed, `${name} pushed`);
    assert.equal(listed[name], !/\.(json|txt|md)$/.test(name), `${name}: LFS for weights, a regular file otherwise`);
    assert.ok((await bytesOf(repo, name, revision)).equals(readFileSync(join(dir, name))), name);
  }
  return listed;
}

test("merge --push-to: the merged folder in one commit, read back with huggingface.js and both CLIs' inspect", async () => {
  const out = join(work, 'merged');
  const r = await npm([
    'merge',
    '--base',
    dirs.base,
    '--adapter',
    dirs.adapter,
    '-o',
    out,
    '--push-to',
    'me/merged',
    '--create-repo',
  ]);
  assert.equal(r.status, 0, r.stderr);
  const names = readdirSync(out).sort();
  assert.deepEqual(names, [
    'config.json',
    'model-00001-of-00002.safetensors',
    'model-00002-of-00002.safetensors',
    'model.safetensors.index.json',
  ]);
  const listed = await assertPushed('me/merged', out);
  assert.deepEqual(Object.keys(listed).sort(), names);
  assert.equal(hub.log('commit').length, 1);
  const commit = hub.commit('me/merged');
  assert.match(
    r.stderr,
    new RegExp(
      `pushed 4 files \\(2 through LFS\\), [0-9.]+ [kM]B to me/merged@main: commit ${commit.slice(0, 12)}\\n  ${hub.endpoint}/me/merged/commit/${commit}\\n$`,
    ),
  );
  // the pushed repo inspected through the Hub = the local files inspected
  const remote = await npm(['inspect', 'hf://me/merged']);
  assert.equal(remote.status, 0, remote.stderr);
  const expected = [];
  for (const s of names.filter((n) => n.endsWith('.safetensors')))
    expected.push(`==> ${s} <==\n${(await npm(['inspect', join(out, s)])).stdout}`);
  assert.ok(remote.stdout.startsWith(`${expected.join('\n')}\n==> total: 2 files <==\n`), remote.stdout);
  assert.equal(remote.stdout, (await npm(['inspect', out])).stdout, 'as the local folder inspected');
  if (hasNativeCli) assert.deepEqual(await native(['inspect', 'hf://me/merged']), remote);
  const commitBody = hub.requests.find((x) => x.kind === 'commit');
  assert.equal(commitBody.auth, `Bearer ${TOKEN}`);
});

test('translate --push-to owner/repo@branch: the branch is created from main and gets the files; main is untouched', async () => {
  const out = join(work, 'mlx');
  const before = hub.commit('me/existing');
  const r = await npm(['translate', dirs.adapter, out, '--to', 'mlx', '--push-to', 'me/existing@mlx', '-q']);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '', '-q: no summary');
  assert.equal(hub.commit('me/existing'), before);
  const listed = await assertPushed('me/existing', out, 'mlx');
  assert.deepEqual(Object.keys(listed).sort(), ['README.md', 'adapter_config.json', 'adapters.safetensors']);
});

test('combine --push-to --create-pr: a pull request with the combined adapter, main unchanged; --commit-message', async () => {
  const out = join(work, 'combined');
  const before = hub.commit('me/existing');
  const r = await npm([
    'combine',
    dirs.adapter,
    dirs.adapter,
    '--weights',
    '0.5,0.5',
    '-o',
    out,
    '--push-to',
    'me/existing',
    '--create-pr',
    '--commit-message',
    'half and half',
  ]);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(hub.commit('me/existing'), before);
  const pr = hub.branches('me/existing').filter((b) => b.startsWith('refs/pr/'));
  assert.deepEqual(pr, ['refs/pr/1']);
  await assertPushed('me/existing', out, 'refs/pr/1');
  assert.match(
    r.stderr,
    /opened a pull request on me\/existing \(against main\) with 2 files \(1 through LFS\), .* commit [0-9a-f]{12}\n  http:\/\/127\.0\.0\.1:\d+\/me\/existing\/discussions\/1\n$/,
  );
});

test('create and extract --push-to; a 503 on an upload is retried; a failing commit leaves the repo unchanged', async () => {
  const created = join(work, 'created');
  hub.faults.push({ on: 'upload', type: 'status', status: 503, times: 1 });
  const c = await npm([
    'create',
    '--base',
    dirs.base,
    '-o',
    created,
    '--target-modules',
    'q_proj',
    '--push-to',
    'me/fresh',
    '--create-repo',
    '--private',
  ]);
  assert.equal(c.status, 0, c.stderr);
  assert.equal(hub.log('upload').filter((x) => x.status === 503).length, 1);
  // private: readable with the token only
  assert.equal((await fetch(`${hub.endpoint}/api/models/me/fresh/tree/main`)).status, 401);
  const listed = {};
  for await (const f of listFiles({ repo: 'me/fresh', hubUrl: hub.endpoint, accessToken: TOKEN }))
    listed[f.path] = !!f.lfs;
  assert.deepEqual(listed, { 'adapter_config.json': false, 'adapter_model.safetensors': true });

  // extract: the merged model against its base gives back a LoRA; the commit call fails, nothing is committed
  const extracted = join(work, 'extracted');
  hub.faults.push({ on: 'commit', type: 'status', status: 500, times: 1 });
  const before = hub.commit('me/existing');
  const e = await npm([
    'extract',
    '--base',
    dirs.base,
    '--tuned',
    join(work, 'merged'),
    '--rank',
    '8',
    '-o',
    extracted,
    '--push-to',
    'me/existing',
  ]);
  assert.equal(e.status, 1);
  assert.equal(
    e.stderr.split('\n').at(-2),
    `error: IoError: pushing to me/existing: Injected failure (HTTP 500); the output is complete in \`${extracted}\`: push it with \`peft-bridge push ${extracted} --to me/existing\``,
  );
  assert.equal(hub.commit('me/existing'), before, 'no partial commit');
  assert.deepEqual(
    readdirSync(extracted).sort(),
    ['adapter_config.json', 'adapter_model.safetensors'],
    'the local output stays',
  );
  // pushed again as the error says, it goes through, the LFS object uploaded once
  const uploads = hub.log('upload').length;
  const again = await npm(['push', extracted, '--to', 'me/existing']);
  assert.equal(again.status, 0, again.stderr);
  assert.match(again.stdout, /^pushed 2 files \(1 through LFS\), .* to me\/existing@main: commit [0-9a-f]{12}\n/);
  assert.equal(hub.log('upload').length, uploads);
  await assertPushed('me/existing', extracted);
});

test('tokens: none, unknown, without rights: exit 1 with the reason, nothing committed', async () => {
  const out = (n) => join(work, `tok-${n}`);
  const args = (n, repo = 'me/existing') => [
    'create',
    '--base',
    dirs.base,
    '-o',
    out(n),
    '--target-modules',
    'v_proj',
    '--push-to',
    repo,
  ];
  const before = hub.commit('me/existing');
  const none = await npm(args(1), { HF_TOKEN: '' });
  assert.equal(none.status, 1);
  assert.match(none.stderr, /--push-to needs a token with write access: set HF_TOKEN/);
  const bad = await npm(args(2), { HF_TOKEN: 'hf_wrong' });
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /Invalid credentials in Authorization header.*\(HTTP 401\)/);
  // a repo in a namespace the token may not create in, that does not exist either: the creation's refusal
  const other = await npm(args(3, 'other/repo'), {});
  assert.equal(other.status, 1);
  assert.match(
    other.stderr,
    /error: IoError: creating other\/repo: You don't have the rights to write to other\/repo \(HTTP 403\); the output/,
  );
  assert.ok(
    hub.requests.some((x) => x.kind === 'repoInfo' && x.repo === 'other/repo' && x.status === 404),
    'asked whether it exists',
  );
  assert.equal(hub.commit('me/existing'), before);
});

test('the grammar: bad targets and combinations are usage errors (exit 2), the same bytes in both CLIs; no token fails alike', async () => {
  const merge = ['merge', '--base', dirs.base, '--adapter', dirs.adapter, '-o', join(work, 'never')];
  const cases = [
    [
      [...merge, '--push-to', 'me'],
      'error: --push-to `me`: `me` is not a repo id: expected OWNER/NAME (expected OWNER/REPO[@BRANCH])\nrun `peft-bridge merge --help` for usage\n',
    ],
    [[...merge, '--push-to', 'me/bad name'], null],
    [[...merge, '--push-to', 'hf://me/m'], null],
    [[...merge, '--push-to', 'me/m@a..b'], null],
    [
      [...merge, '--push-to', 'me/m', '--dry-run'],
      'error: --push-to pushes what the command writes, and --dry-run writes nothing\nrun `peft-bridge merge --help` for usage\n',
    ],
    [
      [...merge, '--create-pr'],
      'error: --create-pr applies to --push-to OWNER/REPO[@BRANCH]\nrun `peft-bridge merge --help` for usage\n',
    ],
    [['unmerge', '--base', 'b', '--adapter', 'a', '-o', 'o', '--push-to', 'me/m'], null],
  ];
  for (const [args, stderr] of cases) {
    const r = await npm(args);
    assert.equal(r.status, 2, args.join(' '));
    assert.equal(r.stdout, '');
    if (stderr) assert.equal(r.stderr, stderr);
    if (hasNativeCli) assert.deepEqual(await native(args), r, args.join(' '));
  }
  const help = await npm(['merge', '--help']);
  assert.match(help.stdout, /--push-to OWNER\/REPO\[@BRANCH\]/);
  if (hasNativeCli) assert.equal((await native(['merge', '--help'])).stdout, help.stdout);
  // no token: the command writes its output, then the push fails before any request, the same line in both CLIs
  for (const [name, cli] of [['npm', npm], ...(hasNativeCli ? [['native', native]] : [])]) {
    const r = await cli([...merge.slice(0, -1), join(work, `no-token-${name}`), '--push-to', 'me/m', '-q'], {
      HF_TOKEN: '',
    });
    assert.equal(r.status, 1, name);
    const out = join(work, `no-token-${name}`);
    assert.equal(
      r.stderr,
      `error: InvalidArgument: --push-to needs a token with write access: set HF_TOKEN, or log in with \`hf auth login\` (huggingface_hub's token file); the output is complete in \`${out}\`: push it with \`peft-bridge push ${out} --to me/m\`\n`,
      name,
    );
  }
  assert.equal(hub.requests.filter((x) => x.repo === 'me/m').length, 0);
});

test(
  'a Hub that never answers the commit: both CLIs give up at PB_HTTP_IDLE_MS with the same error, nothing committed',
  { skip: !hasNativeCli && 'build/native/peft-bridge not built', timeout: 60000 },
  async (t) => {
    const hub3 = await startHub({ files: { 'me/hang': { 'README.md': 'x' } }, owners: { me: TOKEN } });
    t.after(() => hub3.close());
    const before = hub3.commit('me/hang');
    const errors = {};
    for (const [name, cli] of [
      ['npm', npm],
      ['native', native],
    ]) {
      hub3.faults.push({ on: 'commit', type: 'hang' });
      const started = performance.now();
      const r = await cli(
        ['translate', dirs.adapter, join(work, `hang-${name}`), '--to', 'peft', '--push-to', 'me/hang'],
        { HF_ENDPOINT: hub3.endpoint, PB_HTTP_IDLE_MS: '500' },
      );
      const took = performance.now() - started;
      assert.equal(r.status, 1, `${name}: ${r.stderr}`);
      assert.ok(took < 15000, `${name} gave up after ${took.toFixed(0)} ms`);
      errors[name] = r.stderr.split('\n').at(-2);
      const out = join(work, `hang-${name}`);
      assert.equal(
        errors[name],
        `error: IoError: POST ${hub3.endpoint}/api/models/me/hang/commit/main: no answer for 500 ms (PB_HTTP_IDLE_MS); the output is complete in \`${out}\`: push it with \`peft-bridge push ${out} --to me/hang\``,
        name,
      );
      hub3.faults.length = 0;
    }
    assert.equal(hub3.log('commit').length, 2, 'one commit call each: never retried');
    assert.equal(hub3.commit('me/hang'), before);
  },
);

test(
  'native CLI --push-to: the same files and requests as the npm CLI (multipart, branch, PR, private repo, faults)',
  { skip: !hasNativeCli && 'build/native/peft-bridge not built' },
  async (t) => {
    // small parts, so that the shards go multipart
    const hub2 = await startHub({
      files: { 'me/both': { 'README.md': 'x' } },
      owners: { me: TOKEN },
      multipartThreshold: 40_000,
      partSize: 16_384,
    });
    t.after(() => hub2.close());
    const env = { HF_ENDPOINT: hub2.endpoint };
    const outs = {};
    for (const [name, cli] of [
      ['npm', npm],
      ['native', native],
    ]) {
      const out = join(work, `both-${name}`);
      const r = await cli(
        [
          'merge',
          '--base',
          dirs.base,
          '--adapter',
          dirs.adapter,
          '-o',
          out,
          '--push-to',
          `me/merged-${name}`,
          '--create-repo',
          '--private',
        ],
        env,
      );
      assert.equal(r.status, 0, `${name}: ${r.stderr}`);
      assert.match(
        r.stderr,
        new RegExp(
          `pushed 4 files \\(2 through LFS\\), [0-9.]+ [kM]B to me/merged-${name}@main: commit [0-9a-f]{12}\\n  http://127\\.0\\.0\\.1:\\d+/me/merged-${name}/commit/[0-9a-f]{40}\\n$`,
        ),
      );
      outs[name] = out;
    }
    // the same files, the same bytes; the same request kinds, in the same order
    const kinds = (repo) =>
      hub2.requests
        .filter((x) => x.repo === repo || x.kind === 'part' || x.kind === 'upload' || x.kind === 'complete')
        .map((x) => x.kind);
    for (const name of ['npm', 'native']) {
      const listed = {};
      for await (const f of listFiles({ repo: `me/merged-${name}`, hubUrl: hub2.endpoint, accessToken: TOKEN }))
        listed[f.path] = !!f.lfs;
      assert.deepEqual(
        listed,
        {
          'config.json': false,
          'model-00001-of-00002.safetensors': true,
          'model-00002-of-00002.safetensors': true,
          'model.safetensors.index.json': false,
        },
        name,
      );
      for (const file of Object.keys(listed)) {
        const blob = await downloadFile({
          repo: `me/merged-${name}`,
          path: file,
          hubUrl: hub2.endpoint,
          accessToken: TOKEN,
        });
        assert.ok(
          Buffer.from(await blob.arrayBuffer()).equals(readFileSync(join(outs[name], file))),
          `${name} ${file}`,
        );
      }
    }
    assert.ok(hub2.log('part').length >= 4, 'multipart uploads');
    assert.ok(kinds('me/merged-native').includes('complete'));

    // a branch, a pull request, a retried part, and a failing commit that leaves the repo as it was
    const adapterOut = join(work, 'native-peft');
    hub2.faults.push({ on: 'upload', type: 'status', status: 503, times: 1 });
    const dev = await native(
      ['translate', dirs.adapter, adapterOut, '--to', 'peft', '--push-to', 'me/both@dev', '-q'],
      env,
    );
    assert.equal(dev.status, 0, dev.stderr);
    assert.equal(dev.stderr, '');
    assert.equal(hub2.log('upload').filter((x) => x.status === 503).length, 1, 'a 503 on the upload, retried');
    assert.equal(hub2.commit('me/both', 'dev').length, 40);
    assert.deepEqual([...hub2.files('me/both', 'dev').keys()].sort(), [
      'README.md',
      'adapter_config.json',
      'adapter_model.safetensors',
    ]);
    const before = hub2.commit('me/both');
    const pr = await native(
      [
        'combine',
        dirs.adapter,
        '-o',
        join(work, 'native-comb'),
        '--push-to',
        'me/both',
        '--create-pr',
        '--commit-message',
        'one',
      ],
      env,
    );
    assert.equal(pr.status, 0, pr.stderr);
    assert.match(
      pr.stderr,
      /opened a pull request on me\/both \(against main\) with 2 files .*\n  http:\/\/127\.0\.0\.1:\d+\/me\/both\/discussions\/1\n$/,
    );
    assert.equal(hub2.commit('me/both'), before);
    hub2.faults.push({ on: 'commit', type: 'status', status: 500, times: 1 });
    const failed = await native(
      [
        'create',
        '--base',
        dirs.base,
        '-o',
        join(work, 'native-created'),
        '--target-modules',
        'q_proj',
        '--push-to',
        'me/both',
      ],
      env,
    );
    assert.equal(failed.status, 1);
    assert.equal(
      failed.stderr.split('\n').at(-2),
      `error: IoError: pushing to me/both: Injected failure (HTTP 500); the output is complete in \`${join(work, 'native-created')}\`: push it with \`peft-bridge push ${join(work, 'native-created')} --to me/both\``,
    );
    assert.equal(hub2.commit('me/both'), before, 'no partial commit');
    // pushed again as it says, by the native CLI's push command
    const retried = await native(['push', join(work, 'native-created'), '--to', 'me/both', '-q'], env);
    assert.equal(retried.status, 0, retried.stderr);
    assert.deepEqual([...hub2.files('me/both').keys()].sort(), [
      'README.md',
      'adapter_config.json',
      'adapter_model.safetensors',
    ]);
    const after = hub2.commit('me/both');
    assert.notEqual(after, before);
    const bad = await native(
      [
        'create',
        '--base',
        dirs.base,
        '-o',
        join(work, 'native-created2'),
        '--target-modules',
        'q_proj',
        '--push-to',
        'other/x',
      ],
      { ...env, HF_TOKEN: 'hf_wrong' },
    );
    assert.equal(bad.status, 1);
    assert.match(
      bad.stderr,
      /error: IoError: creating other\/x: Invalid credentials in Authorization header \(HTTP 401\); the output is complete in .*\n$/,
    );
    assert.equal(hub2.commit('me/both'), after);
  },
);

test('--push-to a repo that does not exist creates it, as `hf upload` does (--private: private), in both CLIs', async () => {
  for (const [name, cli] of [['npm', npm], ...(hasNativeCli ? [['native', native]] : [])]) {
    const out = join(work, `fresh-${name}`);
    hub.clearLog();
    const r = await cli(
      ['translate', dirs.adapter, out, '--to', 'peft', '--push-to', `me/new-${name}`, '--private'],
      {},
    );
    assert.equal(r.status, 0, `${name}: ${r.stderr}`);
    assert.deepEqual(
      hub.log('create').map((x) => [x.repo, x.status]),
      [[`me/new-${name}`, 200]],
      name,
    );
    assert.equal((await fetch(`${hub.endpoint}/api/models/me/new-${name}`)).status, 401, `${name}: private`);
    const listed = {};
    for await (const f of listFiles({ repo: `me/new-${name}`, hubUrl: hub.endpoint, accessToken: TOKEN }))
      listed[f.path] = !!f.lfs;
    assert.deepEqual(listed, { 'adapter_config.json': false, 'adapter_model.safetensors': true }, name);
    // pushed to again: the creation answers 409 and the push goes on into the existing repo
    const again = await cli(
      [
        'translate',
        dirs.adapter,
        out,
        '--to',
        'peft',
        '--force',
        '--push-to',
        `me/new-${name}`,
        '--commit-message',
        'again',
      ],
      {},
    );
    assert.equal(again.status, 0, `${name}: ${again.stderr}`);
    assert.deepEqual(
      hub.log('create').map((x) => x.status),
      [200, 409],
      name,
    );
  }
  // a repo that exists in a namespace the token may not create in: asked for, found, and pushed to (here the
  // Hub then refuses the write itself, as it would for hf upload)
  hub.clearLog();
  const r = await npm(
    [
      'create',
      '--base',
      dirs.base,
      '-o',
      join(work, 'foreign-ns'),
      '--target-modules',
      'q_proj',
      '--push-to',
      'other/open',
    ],
    {},
  );
  assert.equal(r.status, 1);
  assert.deepEqual(
    hub.requests.filter((x) => x.repo === 'other/open').map((x) => [x.kind, x.status]),
    [
      ['create', 403],
      ['repoInfo', 200],
      ['preupload', 403],
    ],
  );
  assert.match(
    r.stderr,
    /error: IoError: pushing to other\/open: You don't have the rights to write to other\/open \(HTTP 403\)/,
  );
});

test('push DIR --to OWNER/REPO[@BRANCH]: a folder (or one file) in one commit, the same in both CLIs; what it refuses', async () => {
  const folder = join(work, 'to-push');
  mkdirSync(join(folder, 'sub'), { recursive: true });
  mkdirSync(join(folder, '.git'), { recursive: true });
  writeFileSync(join(folder, '.git', 'HEAD'), 'ref: refs/heads/main\n');
  writeFileSync(join(folder, 'README.md'), '# pushed\n');
  writeFileSync(join(folder, 'sub', 'notes.txt'), 'nested\n');
  writeFileSync(join(folder, 'weights.safetensors'), readFileSync(join(dirs.adapter, 'adapter_model.safetensors')));
  writeFileSync(join(folder, 'config.json.tmp-aB3xY9'), 'a stale temporary'); // ours: not pushed
  for (const [name, cli] of [['npm', npm], ...(hasNativeCli ? [['native', native]] : [])]) {
    const r = await cli(['push', folder, '--to', `me/pushed-${name}@dev`, '--commit-message', 'a folder'], {});
    assert.equal(r.status, 0, `${name}: ${r.stderr}`);
    assert.match(
      r.stdout,
      new RegExp(
        `^pushed 3 files \\(1 through LFS\\), [0-9.]+ [kM]?B to me/pushed-${name}@dev: commit [0-9a-f]{12}\\n  http://127\\.0\\.0\\.1:\\d+/me/pushed-${name}/commit/[0-9a-f]{40}\\n$`,
      ),
      name,
    );
    assert.deepEqual(
      await listing(`me/pushed-${name}`, 'dev'),
      { 'README.md': false, 'sub/notes.txt': false, 'weights.safetensors': true },
      name,
    );
    assert.ok((await bytesOf(`me/pushed-${name}`, 'sub/notes.txt', 'dev')).equals(Buffer.from('nested\n')));
    const one = await cli(['push', join(folder, 'README.md'), '--to', `me/pushed-${name}`, '-q'], {});
    assert.equal(one.status, 0, one.stderr);
    assert.equal(one.stdout, '');
    assert.deepEqual(await listing(`me/pushed-${name}`), { 'README.md': false }, name);
  }
  const refusals = [];
  writeFileSync(join(folder, '.peft-bridge-commit'), '{}');
  refusals.push([
    ['push', folder, '--to', 'me/x'],
    1,
    `error: InvalidArgument: \`${folder}\` holds the journal of an interrupted peft-bridge run (.peft-bridge-commit): its output is not complete; run the command into it again, which completes or undoes that run\n`,
  ]);
  refusals.push([
    ['push', join(work, 'nothing'), '--to', 'me/x'],
    1,
    `error: IoError: cannot open \`${join(work, 'nothing')}\`: No such file or directory\n`,
  ]);
  refusals.push([['push', folder], 2, 'error: --to is required\nrun `peft-bridge push --help` for usage\n']);
  refusals.push([
    ['push', folder, '--to', 'me/x', '--dry-run'],
    2,
    'error: unknown option `--dry-run`\nrun `peft-bridge push --help` for usage\n',
  ]);
  for (const [args, status, stderr] of refusals) {
    const r = await npm(args);
    assert.deepEqual([r.status, r.stdout, r.stderr], [status, '', stderr], args.join(' '));
    if (hasNativeCli) assert.deepEqual(await native(args), r, args.join(' '));
  }
  assert.equal(hub.requests.filter((x) => x.repo === 'me/x').length, 0);
  const help = await npm(['push', '--help']);
  assert.match(help.stdout, /^usage: peft-bridge push DIR --to OWNER\/REPO\[@BRANCH\]/);
  if (hasNativeCli) assert.equal((await native(['push', '--help'])).stdout, help.stdout);
});
