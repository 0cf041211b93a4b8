// create --base hf://… in both CLIs, against the local stand-in Hub (tests/hub/server.mjs): the same bytes in both,
// and the adapter the same base gives locally (only the config's base_model_name_or_path / revision differ).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, collect, nativeCli, repoRoot, skipWithoutNativeCli, webDir } from './helpers/common.mjs';
import { startHub } from '../hub/server.mjs';

const { createAdapter } = await import(join(webDir, 'src', 'node.js'));
const { openMergeHandles } = await import(join(webDir, 'src', 'ops', 'merge.js'));

const work = mkdtempSync(join(tmpdir(), 'pb-create-remote-'));
const corpus = (name) => join(repoRoot, 'tests', 'golden', 'corpus', name, 'base');
let hub;
before(async () => {
  hub = await startHub({ files: { 'me/llama': corpus('llama_dora'), 'me/sharded': corpus('llama_lora_bf16') } });
});
after(async () => {
  await hub?.close();
  rmSync(work, { recursive: true, force: true });
});

const run = (command, args) =>
  new Promise((resolve) => {
    const env = {
      ...process.env,
      HF_ENDPOINT: hub.endpoint,
      HF_TOKEN: '',
      HF_HOME: join(work, 'home'),
      PB_HTTP_RETRIES: '0',
    };
    execFile(command, args, { env, encoding: 'latin1', timeout: 60000 }, (error, stdout, stderr) =>
      resolve({ status: error ? error.code : 0, stdout, stderr }),
    );
  });
const filesOf = (dir) =>
  Object.fromEntries(
    readdirSync(dir)
      .sort()
      .map((n) => [n, readFileSync(join(dir, n))]),
  );

test("create from a Hub base: both CLIs alike, and the local base's adapter", async (t) => {
  if (skipWithoutNativeCli(t)) return;
  let n = 0;
  for (const [repo, local, args] of [
    ['hf://me/llama', corpus('llama_dora'), ['--target-modules', 'all-linear', '--dora', '--seed', '4']],
    ['hf://me/sharded@main', corpus('llama_lora_bf16'), ['--target-modules', 'q_proj,v_proj', '--dora']],
  ]) {
    const outs = [join(work, `native${n}`), join(work, `npm${n}`), join(work, `local${n}`)];
    n += 1;
    const a = await run(nativeCli, ['create', '--base', repo, '-o', outs[0], ...args]);
    const b = await run(process.execPath, [cliPath, 'create', '--base', repo, '-o', outs[1], ...args]);
    assert.equal(a.status, 0, a.stderr);
    assert.deepEqual(
      { ...b, stdout: b.stdout.replaceAll(outs[1], '') },
      { ...a, stdout: a.stdout.replaceAll(outs[0], '') },
    );
    assert.deepEqual(filesOf(outs[1]), filesOf(outs[0]));
    const c = await run(nativeCli, ['create', '--base', local, '-o', outs[2], ...args]);
    assert.equal(c.status, 0, c.stderr);
    const remote = filesOf(outs[0]);
    const here = filesOf(outs[2]);
    assert.deepEqual(remote['adapter_model.safetensors'], here['adapter_model.safetensors']);
    const rc = JSON.parse(remote['adapter_config.json']);
    const lc = JSON.parse(here['adapter_config.json']);
    const [name, revision] = repo.slice(5).split('@');
    assert.equal(rc.base_model_name_or_path, name);
    assert.equal(rc.revision, revision ?? null);
    assert.deepEqual(
      { ...rc, base_model_name_or_path: null, revision: null },
      { ...lc, base_model_name_or_path: null, revision: null },
    );
  }
});

test("createAdapter from a Hub repo: the plan is `create --dry-run`'s, the files the CLI's", async (t) => {
  if (skipWithoutNativeCli(t)) return;
  for (const [base, cli, options, args] of [
    [
      { repo: 'me/llama' },
      'hf://me/llama',
      { targetModules: 'all-linear', dora: true, seed: 4 },
      ['--target-modules', 'all-linear', '--dora', '--seed', '4'],
    ],
    [
      { repo: 'me/sharded', revision: 'main' },
      'hf://me/sharded@main',
      { targetModules: ['q_proj', 'v_proj'], dora: true },
      ['--target-modules', 'q_proj,v_proj', '--dora'],
    ],
  ]) {
    const out = join(work, `api-${base.repo.replace('/', '-')}`);
    const planned = await run(nativeCli, ['create', '--base', cli, '--dry-run', '--json', ...args]);
    const plannedText = await run(nativeCli, ['create', '--base', cli, '--dry-run', ...args]);
    const made = await run(nativeCli, ['create', '--base', cli, '-o', out, ...args]);
    assert.equal(made.status, 0, made.stderr);
    const plan = await createAdapter({ base, ...options, endpoint: hub.endpoint, dryRun: true });
    assert.equal(plan.text, plannedText.stdout);
    const { ok, dryRun, ...summary } = JSON.parse(planned.stdout);
    assert.deepEqual(plan.summary, summary);
    assert.deepEqual(plan.files, []);
    const progress = [];
    const created = await createAdapter({
      base,
      ...options,
      endpoint: hub.endpoint,
      onProgress: (p) => progress.push(p),
    });
    assert.ok(made.stdout.startsWith(created.text));
    assert.ok(progress.length > 0 && progress.at(-1).bytesIn === progress.at(-1).totalIn);
    const files = {};
    for (const f of created.files) files[f.path] = Buffer.from(await collect(f.stream));
    assert.deepEqual(files, filesOf(out));
  }
  assert.equal(openMergeHandles(), 0);
});
