// mergeInWorkers in real Web Workers: headless Chromium loads the package's browser entry, the base's shards and the
// adapter come from a file input (Files, as a user picks them), and the default worker (src/ops/merge-worker.js,
// resolved against the module's URL) merges them, two at once, the streams read concurrently. Every output file
// must be mergeShards' bytes computed here in Node, and the page must have started real dedicated workers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { collect, pb, repoRoot, webDir } from './helpers/common.mjs';
import { NAMES, makeShardedModel } from './helpers/sharded-model.mjs';

const CHROMIUM = '/usr/bin/chromium';
const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

test(
  'Chromium: mergeInWorkers with Files, two Web Workers, every file = mergeShards',
  { timeout: 120000 },
  async (t) => {
    if (!existsSync(CHROMIUM)) return t.skip(`${CHROMIUM} not installed`);
    const model = await makeShardedModel();
    const dir = mkdtempSync(join(tmpdir(), 'pb-web-workers-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const paths = [];
    for (const name of NAMES) {
      paths.push(join(dir, name));
      writeFileSync(paths.at(-1), new Uint8Array(await model.files[name].arrayBuffer()));
    }
    paths.push(join(dir, 'adapter_model.safetensors'));
    writeFileSync(paths.at(-1), new Uint8Array(await model.adapter.weights.arrayBuffer()));
    const expected = [];
    for await (const f of pb.mergeShards(model))
      expected.push({ path: f.path, size: f.size, sha: sha256(await collect(f.stream)) });

    const { chromium } = await import('playwright-core');
    const { startStatic } = await import(join(webDir, 'app', 'serve.mjs'));
    const site = await startStatic({ root: repoRoot });
    t.after(() => site.close());
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
    t.after(() => browser.close());
    const page = await browser.newPage();
    await page.goto(`${site.origin}/web/`); // any page of the origin (a 404 here)
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    // The browser's own favicon request is no error of the page's.
    page.on(
      'console',
      (m) =>
        m.type() === 'error' &&
        !m.location().url.endsWith('/favicon.ico') &&
        errors.push(`${m.text()} (${m.location().url})`),
    );
    const workers = [];
    page.on('worker', (w) => workers.push(w.url()));
    await page.setContent('<!doctype html><input type="file" id="files" multiple>');
    await page.setInputFiles('#files', paths);
    const got = await page.evaluate(
      async ({ index, config, adapterConfig }) => {
        const { mergeInWorkers } = await import('/web/src/browser.js');
        const byName = Object.fromEntries([...document.querySelector('#files').files].map((f) => [f.name, f]));
        const files = await mergeInWorkers({
          base: { index, config, open: (name) => byName[name] },
          adapter: { weights: byName['adapter_model.safetensors'], config: adapterConfig },
          workers: 2,
        });
        const hex = (buf) => [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, '0')).join('');
        return Promise.all(
          files.map(async ({ path, size, stream }) => {
            const bytes = new Uint8Array(await new Response(stream).arrayBuffer());
            return { path, size, length: bytes.length, sha: hex(await crypto.subtle.digest('SHA-256', bytes)) };
          }),
        );
      },
      { index: model.base.index, config: model.base.config, adapterConfig: model.adapter.config },
    );
    assert.deepEqual(errors, []);
    assert.deepEqual(
      got.map(({ path, size, sha }) => ({ path, size, sha })),
      expected,
    );
    for (const f of got) assert.equal(f.length, f.size, f.path);
    assert.equal(workers.length, 2, `two dedicated workers: ${workers.join(', ')}`);
    for (const url of workers) assert.equal(url, `${site.origin}/web/src/ops/merge-worker.js`);
  },
);
