// The web page's Combine section in headless Chromium: two PEFT adapters of the golden corpus on the local Hub
// stand-in, combined in the tab (combineAdapters over WASM) with weights and a method; the plan lists every
// module, the result shows each module's relative error, and the saved files (a "chosen folder": the
// origin-private file system) equal the native CLI's combine of the same adapters, byte for byte - from Hub ids,
// and from local files (each row's file input: the weights and adapter_config.json, read by range as Blobs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nativeCli, repoRoot, skipWithoutNativeCli, webDir } from './helpers/common.mjs';
import { startHub } from '../hub/server.mjs';

const CHROMIUM = '/usr/bin/chromium';
const corpus = join(repoRoot, 'tests', 'golden', 'corpus');
const A = join(corpus, 'llama_lora_f32', 'adapter');
const RS = join(corpus, 'llama_rslora', 'adapter');
const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

test(
  'web page: combine two adapters (Hub ids, local files), see the errors, save = native CLI',
  { timeout: 120000 },
  async (t) => {
    if (!existsSync(CHROMIUM)) return t.skip(`${CHROMIUM} not installed`);
    if (skipWithoutNativeCli(t)) return;
    const { chromium } = await import('playwright-core');
    const { startStatic } = await import(join(webDir, 'app', 'serve.mjs'));
    const dir = mkdtempSync(join(tmpdir(), 'pb-web-combine-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const hub = await startHub({ files: { 'test/a-lora': A, 'test/rs-lora': RS } });
    t.after(() => hub.close());
    const site = await startStatic();
    t.after(() => site.close());
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
    t.after(() => browser.close());

    for (const [method, extra, source] of [
      ['cat', [], 'hub'],
      ['svd', ['--rank', '6'], 'hub'],
      ['cat', [], 'local'],
    ]) {
      const want = join(dir, `native-${method}-${source}`);
      const native = spawnSync(nativeCli, [
        'combine',
        A,
        RS,
        '--weights',
        '0.75,-0.5',
        '--method',
        method,
        ...extra,
        '-o',
        want,
        '-q',
      ]);
      assert.equal(native.status, 0, native.stderr.toString());

      const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
      const page = await context.newPage();
      const errors = [];
      page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
      page.on('pageerror', (e) => errors.push(e.message));
      await page.addInitScript(() => {
        window.showDirectoryPicker = async () => navigator.storage.getDirectory();
      });
      await page.goto(`${site.url}?endpoint=${encodeURIComponent(hub.endpoint)}`);
      await page.waitForSelector('html[data-ready="true"]');
      const rows = page.locator('#combine-inputs li');
      assert.equal(await rows.count(), 2);
      if (source === 'hub') {
        await rows.nth(0).locator('.combine-repo').fill('test/a-lora');
        await rows.nth(1).locator('.combine-repo').fill('test/rs-lora');
      } else {
        // Local files: each adapter's folder through its row's file input, no repo id.
        await rows
          .nth(0)
          .locator('.combine-files')
          .setInputFiles(readdirSync(A).map((n) => join(A, n)));
        await rows
          .nth(1)
          .locator('.combine-files')
          .setInputFiles(readdirSync(RS).map((n) => join(RS, n)));
      }
      await rows.nth(0).locator('.combine-weight').fill('0.75');
      await rows.nth(1).locator('.combine-weight').fill('-0.5');
      hub.clearLog();
      await page.selectOption('#combine-method', method);
      if (method === 'svd') await page.fill('#combine-rank', '6');

      await page.click('#combine-plan-btn');
      await page.waitForSelector('#combine[data-state="planned"], #combine[data-state="error"]');
      assert.equal(
        await page.getAttribute('#combine', 'data-state'),
        'planned',
        await page.textContent('#combine-error'),
      );
      const modules = await page.locator('#combine-table tbody tr').count();
      assert.ok(modules >= 8, `${modules} modules planned`);
      assert.match(await page.textContent('#combine-summary'), /largest relative errorafter the combination/);

      await page.click('#combine-btn');
      await page.waitForSelector('#combine[data-state="done"], #combine[data-state="error"]');
      assert.equal(await page.getAttribute('#combine', 'data-state'), 'done', await page.textContent('#combine-error'));
      const worst = Number((await page.textContent('#combine-summary')).match(/largest relative error([0-9.e+-]+)/)[1]);
      if (method === 'cat') assert.ok(worst < 1e-6, `cat is exact (${worst})`);
      else assert.ok(worst > 1e-3 && worst < 1, `svd to rank 6 of a rank-24 sum is approximate (${worst})`);
      const saved = await page.evaluate(async () => {
        const root = await navigator.storage.getDirectory();
        const out = {};
        for (const name of ['adapter_model.safetensors', 'adapter_config.json']) {
          const bytes = await (await (await root.getFileHandle(name)).getFile()).arrayBuffer();
          const digest = await crypto.subtle.digest('SHA-256', bytes);
          out[name] = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
        }
        return out;
      });
      for (const name of ['adapter_model.safetensors', 'adapter_config.json'])
        assert.equal(
          saved[name],
          sha256(readFileSync(join(want, name))),
          `${method} (${source}): ${name} differs from the native CLI's`,
        );
      if (source === 'local') assert.deepEqual(hub.requests, [], 'local files: nothing asked of the Hub');
      assert.deepEqual(errors, []);
      await context.close();
    }
  },
);
