// The web page's Extract section in headless Chromium: a golden base and its fine-tune on the local Hub stand-in
// (read by Range in the tab), and the same pair as local files; Plan lists the modules from the headers, Extract
// shows each module's rank and relative error, and the saved files (a "chosen folder": the origin-private file
// system) equal the native CLI's extract of the same models, byte for byte.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nativeCli, repoRoot, skipWithoutNativeCli, webDir } from './helpers/common.mjs';
import { startHub } from '../hub/server.mjs';

const CHROMIUM = '/usr/bin/chromium';
const corpus = join(repoRoot, 'tests', 'golden', 'corpus', 'llama_lora_f32');
const BASE = join(corpus, 'base');
const TUNED = join(corpus, 'peft_merged');
const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');
const OUTPUTS = ['adapter_model.safetensors', 'adapter_config.json'];

test(
  'web page: extract a LoRA from two Hub repos or local files, see the report, save = native CLI',
  { timeout: 120000 },
  async (t) => {
    if (!existsSync(CHROMIUM)) return t.skip(`${CHROMIUM} not installed`);
    if (skipWithoutNativeCli(t)) return;
    const { chromium } = await import('playwright-core');
    const { startStatic } = await import(join(webDir, 'app', 'serve.mjs'));
    const dir = mkdtempSync(join(tmpdir(), 'pb-web-extract-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const hub = await startHub({ files: { 'test/base': BASE, 'test/tuned': TUNED } });
    t.after(() => hub.close());
    const site = await startStatic();
    t.after(() => site.close());
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
    t.after(() => browser.close());

    for (const source of ['hub', 'local']) {
      const want = join(dir, `native-${source}`);
      const base = source === 'hub' ? 'hf://test/base' : BASE;
      const env = { ...process.env, HF_ENDPOINT: hub.endpoint, HF_TOKEN: '', HF_HOME: join(dir, 'home') };
      // Asynchronous: the stand-in Hub answers from this process.
      const native = await new Promise((resolve) =>
        execFile(
          nativeCli,
          [
            'extract',
            '--base',
            base,
            '--tuned',
            source === 'hub' ? 'hf://test/tuned' : TUNED,
            '--energy',
            '0.99',
            '-o',
            want,
            '-q',
          ],
          { env },
          (error, stdout, stderr) => resolve({ status: error ? error.code : 0, stderr }),
        ),
      );
      assert.equal(native.status, 0, native.stderr);

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
      if (source === 'hub') {
        await page.fill('#extract-base-repo', 'test/base');
        await page.fill('#extract-tuned-repo', 'test/tuned');
      } else {
        await page.setInputFiles('#extract-base-files', [join(BASE, 'model.safetensors'), join(BASE, 'config.json')]);
        await page.setInputFiles('#extract-tuned-files', [
          join(TUNED, 'model.safetensors'),
          join(TUNED, 'config.json'),
        ]);
      }
      await page.fill('#extract-energy', '0.99');

      await page.click('#extract-plan-btn');
      await page.waitForSelector('#extract[data-state="planned"], #extract[data-state="error"]');
      assert.equal(
        await page.getAttribute('#extract', 'data-state'),
        'planned',
        await page.textContent('#extract-error'),
      );
      assert.equal(await page.locator('#extract-table tbody tr').count(), 21);

      await page.click('#extract-btn');
      await page.waitForSelector('#extract[data-state="done"], #extract[data-state="error"]');
      assert.equal(await page.getAttribute('#extract', 'data-state'), 'done', await page.textContent('#extract-error'));
      assert.equal(await page.locator('#extract-table tbody tr').count(), 8); // the changed modules
      assert.match(await page.textContent('#extract-summary'), /decomposed8/);
      const worst = Number((await page.textContent('#extract-summary')).match(/worst relative error([0-9.e+-]+)/)[1]);
      assert.ok(worst < 0.2, `worst relative error ${worst}`);
      const saved = await page.evaluate(async (names) => {
        const root = await navigator.storage.getDirectory();
        const out = {};
        for (const name of names) {
          const bytes = await (await (await root.getFileHandle(name)).getFile()).arrayBuffer();
          const digest = await crypto.subtle.digest('SHA-256', bytes);
          out[name] = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
        }
        return out;
      }, OUTPUTS);
      // The weights are the native CLI's; so is the config, but for the base's name (a local path there, none here).
      assert.equal(
        saved['adapter_model.safetensors'],
        sha256(readFileSync(join(want, 'adapter_model.safetensors'))),
        `${source}: weights differ`,
      );
      if (source === 'hub')
        assert.equal(
          saved['adapter_config.json'],
          sha256(readFileSync(join(want, 'adapter_config.json'))),
          'config differs',
        );
      assert.deepEqual(errors, []);
      await context.close();
    }
  },
);
