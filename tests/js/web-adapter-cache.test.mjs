// createAdapterCache in headless Chromium (the package's browser entry), against the local Hub stand-in: register
// with a declared base, one Range request per module, a composition, the same bytes as in Node.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pb, webDir } from './helpers/common.mjs';
import { writeAdapter, writeSingleBase } from './helpers/remote-model.mjs';
import { startHub } from '../hub/server.mjs';

const CHROMIUM = '/usr/bin/chromium';
const Q0 = 'model.layers.0.self_attn.q_proj';

test(
  'Chromium: the adapter cache registers, fetches one Range per module and composes as in Node',
  { timeout: 120000 },
  async (t) => {
    if (!existsSync(CHROMIUM)) return t.skip(`${CHROMIUM} not installed`);
    const { chromium } = await import('playwright-core');
    const { startStatic } = await import(join(webDir, 'app', 'serve.mjs'));
    const dir = mkdtempSync(join(tmpdir(), 'pb-web-cache-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    await writeSingleBase(join(dir, 'base'));
    await writeAdapter(join(dir, 'sql'));
    await writeAdapter(join(dir, 'sql-r4'), { rank: 4 });
    const hub = await startHub({
      files: { 'me/base': join(dir, 'base'), 'me/sql': join(dir, 'sql'), 'me/sql4': join(dir, 'sql-r4') },
    });
    t.after(() => hub.close());
    const site = await startStatic();
    t.after(() => site.close());
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
    t.after(() => browser.close());

    // In Node first.
    const cache = pb.createAdapterCache({ endpoint: hub.endpoint, budgetBytes: 1 << 20, dtype: 'bf16' });
    await cache.register('sql', { repo: 'me/sql', base: { repo: 'me/base' } });
    await cache.register('sql4', { repo: 'me/sql4', base: { repo: 'me/base' } });
    const want = await cache.compose(
      [
        { id: 'sql', scale: 0.5 },
        { id: 'sql4', scale: 2 },
      ],
      Q0,
    );
    const wantModule = await cache.module('sql4', Q0);
    await cache.close();

    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(site.url);
    hub.clearLog();
    const got = await page.evaluate(
      async ({ endpoint, Q0 }) => {
        const { createAdapterCache } = await import('/src/browser.js');
        const cache = createAdapterCache({ endpoint, budgetBytes: 1 << 20, dtype: 'bf16' });
        await cache.register('sql', { repo: 'me/sql', base: { repo: 'me/base' } });
        await cache.register('sql4', { repo: 'me/sql4', base: { repo: 'me/base' } });
        const d = await cache.compose(
          [
            { id: 'sql', scale: 0.5 },
            { id: 'sql4', scale: 2 },
          ],
          Q0,
        );
        const m = await cache.module('sql4', Q0);
        const stats = cache.stats();
        await cache.close();
        return { A: [...d.A], B: [...d.B], rank: d.rank, mA: [...m.A], stats };
      },
      { endpoint: hub.endpoint, Q0 },
    );
    assert.deepEqual(errors, []);
    assert.equal(got.rank, 12);
    assert.deepEqual(Uint8Array.from(got.A), want.A);
    assert.deepEqual(Uint8Array.from(got.B), want.B);
    assert.deepEqual(Uint8Array.from(got.mA), wantModule.A);
    // Two modules in f32 for the composition, one in bf16: three Range requests for tensor bytes.
    assert.equal(got.stats.spanReads, 3);
    assert.ok(got.stats.peakResidentBytes <= 1 << 20);
  },
);
