// The page's merge progress in headless Chromium: while a merge runs (the Hub stand-in sends the shards slowly) the
// status shows an ETA in the CLIs' words (progressTime: the time of the core's progress line,
// src/app/progress_text.h); Cancel stops it and resets the progress bar to empty, with no stale ETA. And the
// page's number inputs are styled as its text fields are (font, border, padding, corners).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pb, webDir } from './helpers/common.mjs';
import { writeAdapter, writeShardedBase } from './helpers/remote-model.mjs';
import { startHub } from '../hub/server.mjs';

const CHROMIUM = '/usr/bin/chromium';

test("progressTime is the time of the CLIs' progress line", async () => {
  await pb.init();
  assert.equal(pb.progressTime(0, 100, 0), 'ETA --:--');
  assert.equal(pb.progressTime(25, 100, 5), 'ETA 0:15');
  assert.equal(pb.progressTime(100, 100, 12.2), 'in 0:12');
});

test(
  'web page: an ETA while merging; Cancel resets the progress; number inputs styled as text fields',
  { timeout: 180000 },
  async (t) => {
    if (!existsSync(CHROMIUM)) return t.skip(`${CHROMIUM} not installed`);
    const { chromium } = await import('playwright-core');
    const { startStatic } = await import(join(webDir, 'app', 'serve.mjs'));
    const dir = mkdtempSync(join(tmpdir(), 'pb-web-progress-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const shards = await writeShardedBase(join(dir, 'base'));
    await writeAdapter(join(dir, 'lora'));
    const hub = await startHub({ files: { 'test/base': join(dir, 'base'), 'test/lora': join(dir, 'lora') } });
    t.after(() => hub.close());
    const site = await startStatic();
    t.after(() => site.close());
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
    t.after(() => browser.close());
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.addInitScript(() => {
      window.showDirectoryPicker = async () => navigator.storage.getDirectory();
    });
    await page.goto(`${site.url}?endpoint=${encodeURIComponent(hub.endpoint)}`);
    await page.waitForSelector('html[data-ready="true"]');

    // Number inputs look like the text fields beside them.
    const look = (selector) =>
      page.$eval(selector, (e) => {
        const s = getComputedStyle(e);
        return {
          font: s.fontFamily,
          size: s.fontSize,
          border: `${s.borderTopWidth} ${s.borderTopStyle} ${s.borderTopColor}`,
          radius: s.borderTopLeftRadius,
          padding: `${s.paddingTop} ${s.paddingLeft}`,
        };
      });
    const field = await look('#base-repo');
    for (const n of [
      '#combine-rank',
      '#combine-density',
      '#extract-rank',
      '#create-r',
      '#combine-inputs .combine-weight',
    ])
      assert.deepEqual(await look(n), field, `${n} is styled as the text fields`);

    await page.fill('#base-repo', 'test/base');
    await page.fill('#adapter-repo', 'test/lora');
    await page.click('#inspect-btn');
    await page.waitForSelector('#plan:not([hidden])');
    await page.click('#plan-btn');
    await page.waitForSelector('#plan-result:not([hidden]), #plan-error:not([hidden])');
    assert.equal(await page.isHidden('#plan-error'), true, await page.textContent('#plan-error'));
    await page.selectOption('#save-method', 'picker');

    // The shards' bytes arrive slowly: the merge takes seconds, long enough to read its ETA and to cancel it.
    for (const path of shards) hub.faults.push({ type: 'slow', delay: 40, chunk: 64 * 1024, path });
    await page.click('#merge-btn');
    await page.waitForFunction(
      () => /· ETA \d+:\d\d$/.test(document.querySelector('#merge-status').textContent),
      null,
      { timeout: 60000 },
    );
    const running = await page.evaluate(() => ({
      value: document.querySelector('#merge-progress').value,
      max: document.querySelector('#merge-progress').max,
    }));
    assert.ok(running.value > 0 && running.value < running.max, `mid-merge: ${running.value} of ${running.max}`);

    await page.click('#cancel-btn');
    await page.waitForSelector('#merge[data-state="cancelled"]');
    const after = await page.evaluate(() => ({
      value: document.querySelector('#merge-progress').value,
      max: document.querySelector('#merge-progress').max,
      status: document.querySelector('#merge-status').textContent,
    }));
    assert.deepEqual({ value: after.value, max: after.max }, { value: 0, max: 1 }, 'the bar starts again from empty');
    assert.match(after.status, /^Cancelled/);
    assert.doesNotMatch(after.status, /ETA/);
    // Nothing repaints it afterwards (a frame scheduled before the cancel).
    await page.waitForTimeout(300);
    assert.equal(await page.$eval('#merge-progress', (p) => p.value), 0);
    hub.faults.length = 0;
    assert.deepEqual(errors, []);
    await context.close();
  },
);
