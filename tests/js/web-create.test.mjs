// The web page's Create section in headless Chromium: a golden base on the local Hub stand-in (read by Range in
// the tab, with and without a revision) and a sharded base as local files; Plan shows the core's
// `create --dry-run` text, Create and save writes the files (a "chosen folder": the origin-private file system)
// the native CLI's `create` writes for the same options, byte for byte; a bad option shows the core's error, and
// Cancel stops a slow read.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nativeCli, repoRoot, skipWithoutNativeCli, webDir } from './helpers/common.mjs';
import { startHub } from '../hub/server.mjs';

const CHROMIUM = '/usr/bin/chromium';
const CORPUS = join(repoRoot, 'tests', 'golden', 'corpus');
const SINGLE = join(CORPUS, 'llama_dora', 'base'); // model.safetensors, config.json
const SHARDED = join(CORPUS, 'llama_lora_bf16', 'base'); // two shards, their index, config.json
const SHARDED_FILES = [
  'model-00001-of-00002.safetensors',
  'model-00002-of-00002.safetensors',
  'model.safetensors.index.json',
  'config.json',
];
const OUTPUTS = ['adapter_model.safetensors', 'adapter_config.json'];

// Each case: the base as the page gets it, the same base for the native CLI, the page's fields, the CLI's options.
const CASES = [
  {
    name: 'Hub repo, every option',
    repo: 'test/llama',
    cli: 'hf://test/llama',
    fields: {
      targets: 'all-linear',
      r: '4',
      alpha: '16',
      rslora: true,
      dora: true,
      init: 'gaussian',
      seed: '18446744073709551615',
      dtype: 'bf16',
    },
    args: [
      '--target-modules',
      'all-linear',
      '--r',
      '4',
      '--alpha',
      '16',
      '--rslora',
      '--dora',
      '--init',
      'gaussian',
      '--seed',
      '18446744073709551615',
      '--dtype',
      'bf16',
    ],
  },
  {
    name: 'sharded Hub repo at a revision, the defaults',
    repo: 'test/sharded',
    revision: 'main',
    cli: 'hf://test/sharded@main',
    fields: { targets: 'q_proj,v_proj' },
    args: ['--target-modules', 'q_proj,v_proj'],
  },
  {
    name: 'sharded local files, DoRA',
    files: SHARDED_FILES.map((f) => join(SHARDED, f)),
    cli: SHARDED,
    fields: { targets: 'q_proj,v_proj', dora: true, seed: '7', alpha: '2.5', dtype: 'f16' },
    args: ['--target-modules', 'q_proj,v_proj', '--dora', '--seed', '7', '--alpha', '2.5', '--dtype', 'f16'],
  },
];

test(
  "web page: create a fresh adapter from a Hub repo or local files, plan = the core's text, save = native CLI",
  { timeout: 180000 },
  async (t) => {
    if (!existsSync(CHROMIUM)) return t.skip(`${CHROMIUM} not installed`);
    if (skipWithoutNativeCli(t)) return;
    const { chromium } = await import('playwright-core');
    const { startStatic } = await import(join(webDir, 'app', 'serve.mjs'));
    const dir = mkdtempSync(join(tmpdir(), 'pb-web-create-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const hub = await startHub({ files: { 'test/llama': SINGLE, 'test/sharded': SHARDED } });
    t.after(() => hub.close());
    const site = await startStatic();
    t.after(() => site.close());
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
    t.after(() => browser.close());
    const env = { ...process.env, HF_ENDPOINT: hub.endpoint, HF_TOKEN: '', HF_HOME: join(dir, 'home') };
    // Asynchronous: the stand-in Hub answers from this process.
    const native = (args) =>
      new Promise((resolve) =>
        execFile(nativeCli, ['create', ...args], { env }, (error, stdout, stderr) =>
          resolve({ status: error ? error.code : 0, stdout, stderr }),
        ),
      );

    async function openPage() {
      const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
      const page = await context.newPage();
      const errors = [];
      // A single-file repo answers 404 for the index asked for first (expected, logged by the browser).
      const expected404 = (m) =>
        /status of 404/.test(m.text()) && m.location().url.endsWith('/model.safetensors.index.json');
      page.on(
        'console',
        (m) => m.type() === 'error' && !expected404(m) && errors.push(`${m.text()} ${m.location().url}`),
      );
      page.on('pageerror', (e) => errors.push(e.message));
      await page.addInitScript(() => {
        window.showDirectoryPicker = async () => navigator.storage.getDirectory();
      });
      await page.goto(`${site.url}?endpoint=${encodeURIComponent(hub.endpoint)}`);
      await page.waitForSelector('html[data-ready="true"]');
      return { context, page, errors };
    }

    async function fill(page, c) {
      if (c.files) await page.setInputFiles('#create-base-files', c.files);
      else {
        await page.fill('#create-base-repo', c.repo);
        if (c.revision) await page.fill('#create-base-revision', c.revision);
      }
      const f = c.fields;
      await page.fill('#create-targets', f.targets ?? '');
      for (const key of ['r', 'alpha', 'seed']) if (f[key] !== undefined) await page.fill(`#create-${key}`, f[key]);
      await page.setChecked('#create-rslora', !!f.rslora);
      await page.setChecked('#create-dora', !!f.dora);
      if (f.init) await page.selectOption('#create-init', f.init);
      if (f.dtype) await page.selectOption('#create-dtype', f.dtype);
    }

    async function press(page, button, want) {
      await page.click(button);
      await page.waitForSelector(`#create[data-state="${want}"], #create[data-state="error"]`);
      assert.equal(await page.getAttribute('#create', 'data-state'), want, await page.textContent('#create-error'));
    }

    for (const c of CASES) {
      const want = join(dir, `native-${CASES.indexOf(c)}`);
      const planned = await native(['--base', c.cli, '--dry-run', ...c.args]);
      assert.equal(planned.status, 0, planned.stderr);
      const made = await native(['--base', c.cli, '-o', want, ...c.args]);
      assert.equal(made.status, 0, made.stderr);

      const { context, page, errors } = await openPage();
      await fill(page, c);
      await press(page, '#create-plan-btn', 'planned');
      assert.equal(await page.textContent('#create-text'), planned.stdout, `${c.name}: the plan text`);
      assert.equal(await page.locator('#create-files li').count(), 0);

      await press(page, '#create-btn', 'done');
      // The plan as `create` prints it before the work (its outcome line follows it).
      const told = await page.textContent('#create-text');
      assert.ok(
        told.length > 0 && made.stdout.startsWith(told),
        `${c.name}: ${JSON.stringify(told)} / ${JSON.stringify(made.stdout)}`,
      );
      assert.equal(await page.locator('#create-files li').count(), 2);
      assert.equal(await page.getAttribute('#create-progress', 'hidden'), null);
      assert.equal(await page.evaluate(() => document.getElementById('create-progress').value), 1);
      const saved = await page.evaluate(async (names) => {
        const root = await navigator.storage.getDirectory();
        const out = {};
        for (const name of names)
          out[name] = [...new Uint8Array(await (await (await root.getFileHandle(name)).getFile()).arrayBuffer())];
        return out;
      }, OUTPUTS);
      assert.deepEqual(
        Buffer.from(saved['adapter_model.safetensors']),
        readFileSync(join(want, 'adapter_model.safetensors')),
        `${c.name}: weights differ`,
      );
      // The config too; local files have no path, so the CLI's base_model_name_or_path (the folder) is null here.
      let config = readFileSync(join(want, 'adapter_config.json'), 'utf8');
      if (c.files)
        config = config.replace(
          `"base_model_name_or_path": ${JSON.stringify(c.cli)}`,
          '"base_model_name_or_path": null',
        );
      assert.equal(Buffer.from(saved['adapter_config.json']).toString('utf8'), config, `${c.name}: config differs`);
      assert.deepEqual(errors, []);
      await context.close();
    }

    // A bad option: the core's message (the CLI's, with its code), nothing saved.
    const { context, page, errors } = await openPage();
    for (const [fields, args] of [
      [{ targets: 'q_proj', r: '0' }, ['--target-modules', 'q_proj', '--r', '0']],
      [{ targets: 'nope' }, ['--target-modules', 'nope']],
      [{}, []],
      [{ targets: 'q_proj', seed: 'abc' }, ['--target-modules', 'q_proj', '--seed', 'abc']],
    ]) {
      const refused = await native(['--base', 'hf://test/llama', '--dry-run', ...args]);
      assert.notEqual(refused.status, 0);
      const message = refused.stderr
        .split('\n')[0]
        .replace(/^error: /, '')
        .replace(/^InvalidArgument: /, '');
      await fill(page, { repo: 'test/llama', fields: { r: '', seed: '', ...fields } });
      for (const button of ['#create-plan-btn', '#create-btn']) {
        await press(page, button, 'error');
        assert.equal(await page.textContent('#create-error'), `InvalidArgument: ${message}`);
        assert.equal(await page.isVisible('#create-error'), true);
      }
    }
    // Cancel while the base is read (slowly): the job stops with the signal's reason, nothing is saved.
    hub.faults.push({ type: 'slow', delay: 100, chunk: 256, path: 'test/llama/model.safetensors' });
    await fill(page, { repo: 'test/llama', fields: { targets: 'all-linear', dora: true, r: '', seed: '' } });
    await page.click('#create-btn');
    await page.waitForSelector('#create[data-state="busy"] #create-cancel:not([disabled])');
    await page.click('#create-cancel');
    await page.waitForSelector('#create[data-state="error"]');
    assert.equal(await page.textContent('#create-error'), 'Cancelled');
    assert.equal(await page.isDisabled('#create-cancel'), true);
    hub.faults.length = 0;
    assert.deepEqual(
      await page.evaluate(async () => {
        const names = [];
        for await (const name of (await navigator.storage.getDirectory()).keys()) names.push(name);
        return names;
      }),
      [],
    );
    assert.deepEqual(errors, []);
    await context.close();
  },
);
