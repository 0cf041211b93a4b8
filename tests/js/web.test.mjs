// The web page (web/app/) end to end in headless Chromium: a generated sharded LLaMA-shaped base (BF16) and a
// PEFT adapter (r=4 on q_proj/v_proj of 2 layers, plus a k_proj pair the config does not target) on the local
// Hub stand-in; the page inspects both (base read by Range: headers only), plans (matched modules, rejected
// keys), draws the delta-norm chart, and merges: through a folder picker backed by the origin-private file
// system, and for local files (file input and a synthetic drop) through the service worker's streamed
// download. Every saved file must equal the native CLI's merge of the same inputs, and the page must log no
// console errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { collect, hasNativeCli, nativeCli, pb, rng, webDir } from './helpers/common.mjs';
import { startHub } from '../hub/server.mjs';

const CHROMIUM = '/usr/bin/chromium';
const { startStatic } = await import(join(webDir, 'app', 'serve.mjs'));

const FIRST_RANGE = 64 * 1024;
const HIDDEN = 64;
const KV = 32;
const VOCAB = 1024; // embed_tokens and lm_head: 128 KiB each in BF16, so a shard is larger than the first range
const LAYERS = [0, 1];

const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');
const count = (shape) => shape.reduce((a, b) => a * b, 1);

function bf16(random, n) {
  const u = new Uint16Array(n);
  for (let i = 0; i < n; ++i) u[i] = (random() < 0.5 ? 0x8000 : 0) | ((118 + Math.floor(random() * 8)) << 7) | Math.floor(random() * 128);
  return new Uint8Array(u.buffer);
}
function f32(random, n, scale) {
  const f = new Float32Array(n);
  for (let i = 0; i < n; ++i) f[i] = (random() * 2 - 1) * scale;
  return new Uint8Array(f.buffer);
}

/** One safetensors file from [{name, dtype, shape, data}], written by the package's writer. */
const write = (tensors) => collect(pb.writeSafetensors({ tensors, metadata: { format: 'pt' } }));

/** Writes the base (two shards + index + config.json) and the adapter into `dir`; returns their directories. */
async function makeModels(dir) {
  const random = rng(11);
  const t = (name, shape) => ({ name, dtype: 'BF16', shape, data: bf16(random, count(shape)) });
  const layer = (l) => [
    t(`model.layers.${l}.input_layernorm.weight`, [HIDDEN]),
    t(`model.layers.${l}.self_attn.q_proj.weight`, [HIDDEN, HIDDEN]),
    t(`model.layers.${l}.self_attn.k_proj.weight`, [KV, HIDDEN]),
    t(`model.layers.${l}.self_attn.v_proj.weight`, [KV, HIDDEN]),
    t(`model.layers.${l}.self_attn.o_proj.weight`, [HIDDEN, HIDDEN]),
  ];
  const shards = {
    'model-00001-of-00002.safetensors': [t('model.embed_tokens.weight', [VOCAB, HIDDEN]), ...layer(0)],
    'model-00002-of-00002.safetensors': [...layer(1), t('model.norm.weight', [HIDDEN]), t('lm_head.weight', [VOCAB, HIDDEN])],
  };
  const base = join(dir, 'base');
  mkdirSync(base, { recursive: true });
  const weightMap = {};
  let total = 0;
  for (const [name, tensors] of Object.entries(shards)) {
    writeFileSync(join(base, name), await write(tensors));
    for (const x of tensors) {
      weightMap[x.name] = name;
      total += x.data.length;
    }
  }
  writeFileSync(join(base, 'model.safetensors.index.json'), `${JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 2)}\n`);
  writeFileSync(join(base, 'config.json'), `${JSON.stringify({
    architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: HIDDEN, num_attention_heads: 4,
    num_key_value_heads: 2, num_hidden_layers: LAYERS.length, vocab_size: VOCAB, torch_dtype: 'bfloat16',
  }, null, 2)}\n`);

  const adapter = join(dir, 'adapter');
  mkdirSync(adapter, { recursive: true });
  const factors = [];
  const lora = (path, out, scale) => {
    const key = `base_model.model.model.layers.${path}`;
    factors.push({ name: `${key}.lora_A.weight`, dtype: 'F32', shape: [4, HIDDEN], data: f32(random, 4 * HIDDEN, 0.2) });
    factors.push({ name: `${key}.lora_B.weight`, dtype: 'F32', shape: [out, 4], data: f32(random, 4 * out, scale) });
  };
  // Different scales per layer and module, so the chart's bars differ.
  for (const l of LAYERS) {
    lora(`${l}.self_attn.q_proj`, HIDDEN, 0.1 * (l + 1));
    lora(`${l}.self_attn.v_proj`, KV, 0.05 * (l + 1));
  }
  lora('0.self_attn.k_proj', KV, 0.1); // not in target_modules: PEFT would ignore it, so it is rejected
  writeFileSync(join(adapter, 'adapter_model.safetensors'), await write(factors));
  writeFileSync(join(adapter, 'adapter_config.json'), `${JSON.stringify({
    peft_type: 'LORA', task_type: 'CAUSAL_LM', base_model_name_or_path: 'test/tiny-llama', r: 4, lora_alpha: 8,
    target_modules: ['q_proj', 'v_proj'], lora_dropout: 0, bias: 'none', fan_in_fan_out: false,
  }, null, 2)}\n`);
  return { base, adapter, shardNames: Object.keys(shards), tensorCount: Object.values(shards).flat().length, adapterTensors: factors.length };
}

/** The expected merge output (name -> bytes): the native CLI's, or the package's own mergeShards without it. */
async function expectedMerge(models, dir) {
  const out = join(dir, 'native-out');
  if (hasNativeCli) {
    // The adapter carries k_proj factors its config does not target: the CLI merges the rest only when allowed to.
    const r = spawnSync(nativeCli, ['merge', '--base', models.base, '--adapter', models.adapter, '--out', out, '--allow-partial'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return Object.fromEntries(readdirSync(out).sort().map((n) => [n, new Uint8Array(readFileSync(join(out, n)))]));
  }
  const read = (n) => new Uint8Array(readFileSync(join(models.base, n)));
  const files = {};
  for await (const f of pb.mergeShards({
    base: { open: read, index: read('model.safetensors.index.json'), config: read('config.json') },
    adapter: { weights: read('../adapter/adapter_model.safetensors'), config: read('../adapter/adapter_config.json') },
  })) files[f.path] = await collect(f.stream);
  return files;
}

/** Opens the page with console errors collected; returns {page, errors}. */
async function openPage(browser, url, { initScript } = {}) {
  const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1200, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  if (initScript) await page.addInitScript(initScript);
  await page.goto(url);
  await page.waitForSelector('html[data-ready="true"]');
  return { page, context, errors };
}

/** Clicks and waits until the step's status or error appears; fails with the page's error text. */
async function stepAndWait(page, button, ready) {
  await page.click(button);
  const which = await Promise.race([
    page.waitForSelector(ready, { state: 'visible' }).then(() => 'ok'),
    page.waitForSelector('#error:not([hidden])').then(() => 'error'),
  ]);
  if (which === 'error') assert.fail(`page error after ${button}: ${await page.textContent('#error')}`);
}

/** Non-background pixels of the chart canvas (the background is white). */
const inkPixels = (page) =>
  page.evaluate(() => {
    const c = document.querySelector('#chart');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] < 250 || d[i + 1] < 250 || d[i + 2] < 250) n += 1;
    return { ink: n, total: d.length / 4 };
  });

test('web page: Hub and local inputs, inspect, plan, chart, merge = native CLI', { timeout: 120000 }, async (t) => {
  if (!existsSync(CHROMIUM)) return t.skip(`${CHROMIUM} not installed`);
  const { chromium } = await import('playwright-core');
  const started = Date.now();
  const dir = mkdtempSync(join(tmpdir(), 'pb-web-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const evidence = join(tmpdir(), 'peft-bridge-web-test'); // kept after the run: the chart's screenshot
  mkdirSync(evidence, { recursive: true });

  const models = await makeModels(dir);
  const expected = await expectedMerge(models, dir);
  assert.deepEqual(Object.keys(expected).sort(), [...models.shardNames, 'config.json', 'model.safetensors.index.json'].sort());

  const hub = await startHub({ files: { 'test/tiny-llama': models.base, 'test/tiny-llama-lora': models.adapter } });
  t.after(() => hub.close());
  const site = await startStatic();
  t.after(() => site.close());
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  t.after(() => browser.close());

  await t.test('Hub ids: inspect by Range, plan, chart, merge into a chosen folder', async () => {
    // No native picker can be clicked headless: the folder picker answers with the origin-private file system,
    // which has the same handle API (getFileHandle, createWritable).
    const initScript = () => {
      window.showDirectoryPicker = async () => navigator.storage.getDirectory();
    };
    const { page, context, errors } = await openPage(browser, `${site.url}?endpoint=${encodeURIComponent(hub.endpoint)}`, { initScript });
    assert.equal(await page.inputValue('#endpoint'), hub.endpoint);
    await page.fill('#base-repo', 'test/tiny-llama');
    await page.fill('#adapter-repo', 'test/tiny-llama-lora');
    hub.clearLog();

    await stepAndWait(page, '#inspect-btn', '#inspect');
    assert.equal(await page.locator('#tensor-table tbody tr').count(), models.tensorCount);
    assert.match(await page.textContent('#table-count'), new RegExp(`^${models.tensorCount} tensors`));
    const baseSummary = await page.textContent('#base-summary');
    assert.match(baseSummary, /2 shards \+ index/);
    assert.match(baseSummary, /LlamaForCausalLM/);
    const params = 2 * VOCAB * HIDDEN + HIDDEN + LAYERS.length * (HIDDEN + 2 * HIDDEN * HIDDEN + 2 * KV * HIDDEN);
    assert.ok(baseSummary.includes(params.toLocaleString('en-US')), baseSummary);
    assert.match(await page.textContent('#base-dtypes tbody'), /^BF16/);
    assert.match(await page.textContent('#adapter-summary'), /LoRA modules4/);
    assert.match(await page.textContent('#adapter-summary'), /rejected tensors2/);
    await page.selectOption('#table-which', 'adapter');
    assert.equal(await page.locator('#tensor-table tbody tr').count(), models.adapterTensors);
    await page.fill('#table-filter', 'q_proj');
    assert.equal(await page.locator('#tensor-table tbody tr').count(), 4);

    // The base's shards were read by Range only, each request within the first range (headers, never the files).
    const shardReads = hub.requests.filter((r) => r.repo === 'test/tiny-llama' && r.path.endsWith('.safetensors') && r.method === 'GET');
    assert.ok(shardReads.length >= 2);
    for (const r of shardReads) {
      const m = /^bytes=(\d+)-(\d+)$/.exec(r.range ?? '');
      assert.ok(m, `a base shard was requested without a range: ${r.url}`);
      assert.ok(Number(m[2]) - Number(m[1]) + 1 <= FIRST_RANGE, r.range);
    }
    const shardSize = Math.min(...models.shardNames.map((n) => readFileSync(join(models.base, n)).length));
    assert.ok(shardSize > FIRST_RANGE, 'each shard is larger than what was read of it');

    // Chart: drawn, not blank; a screenshot is kept as evidence.
    const chart = page.locator('#chart');
    await chart.screenshot({ path: join(evidence, 'delta-norms.png') });
    const { ink, total } = await inkPixels(page);
    assert.ok(ink > 0.02 * total, `the chart is nearly blank: ${ink} of ${total} pixels`);
    assert.match(await page.textContent('#chart-summary'), /4 modules \(q_proj, v_proj\) over 2 layer/);
    assert.equal(await page.locator('#norm-table tbody tr').count(), 4);

    // Plan: headers only again.
    hub.clearLog();
    await stepAndWait(page, '#plan-btn', '#plan-result');
    assert.equal(await page.textContent('#plan-matched'), '(4)');
    assert.equal(await page.locator('#plan-table tbody tr').count(), 4);
    const rejected = await page.locator('#rejected-list li').allTextContents();
    assert.equal(rejected.length, 2);
    for (const r of rejected) assert.match(r, /layers\.0\.self_attn\.k_proj\.lora_[AB]\.weight/);
    assert.ok(hub.requests.every((r) => !r.path?.endsWith('.safetensors') || r.repo !== 'test/tiny-llama' || /^bytes=0-65535$/.test(r.range ?? '')));

    // Merge into the "chosen folder", then compare every file with the native merge.
    await page.selectOption('#save-method', 'picker');
    await page.click('#merge-btn');
    await page.waitForSelector('#merge[data-state="done"], #merge[data-state="error"]');
    assert.equal(await page.getAttribute('#merge', 'data-state'), 'done', await page.textContent('#error'));
    assert.equal(await page.getAttribute('#merge-progress', 'value'), await page.getAttribute('#merge-progress', 'max'));
    const saved = await page.evaluate(async (names) => {
      const root = await navigator.storage.getDirectory();
      const out = {};
      for (const name of names) {
        const file = await (await root.getFileHandle(name)).getFile();
        const digest = await crypto.subtle.digest('SHA-256', await file.arrayBuffer());
        out[name] = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
      }
      return out;
    }, Object.keys(expected));
    for (const [name, bytes] of Object.entries(expected)) assert.equal(saved[name], sha256(bytes), `${name} differs from the native merge`);
    assert.deepEqual(errors, []);
    await context.close();
  });

  await t.test('local files: file input and drop, merge as a streamed download through the service worker', async () => {
    const { page, context, errors } = await openPage(browser, site.url);
    // The base through the file input (shards, index, config), the adapter dropped on its zone.
    await page.setInputFiles('#base-files', readdirSync(models.base).map((n) => join(models.base, n)));
    assert.equal(await page.isChecked('input[name="base-mode"][value="local"]'), true);
    const files = readdirSync(models.adapter).map((name) => ({ name, b64: readFileSync(join(models.adapter, name)).toString('base64') }));
    const transfer = await page.evaluateHandle((list) => {
      const dt = new DataTransfer();
      for (const { name, b64 } of list) dt.items.add(new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], name));
      return dt;
    }, files);
    await page.dispatchEvent('.drop[data-target="adapter"]', 'drop', { dataTransfer: transfer });
    await page.waitForFunction(() => document.querySelector('#adapter-chosen').textContent.includes('adapter_config.json'));
    assert.equal(await page.isChecked('input[name="adapter-mode"][value="local"]'), true);

    await stepAndWait(page, '#inspect-btn', '#inspect');
    assert.equal(await page.locator('#tensor-table tbody tr').count(), models.tensorCount);
    await stepAndWait(page, '#plan-btn', '#plan-result');
    assert.equal(await page.textContent('#plan-matched'), '(4)');
    assert.equal(await page.locator('#rejected-list li').count(), 2);
    const { ink, total } = await inkPixels(page);
    assert.ok(ink > 0.02 * total);

    const downloads = [];
    page.on('download', (d) => downloads.push(d));
    await page.selectOption('#save-method', 'download');
    await page.click('#merge-btn');
    await page.waitForSelector('#merge[data-state="done"], #merge[data-state="error"]');
    assert.equal(await page.getAttribute('#merge', 'data-state'), 'done', await page.textContent('#error'));
    assert.equal(downloads.length, Object.keys(expected).length);
    for (const d of downloads) {
      const name = d.suggestedFilename();
      assert.ok(name in expected, name);
      const path = join(dir, `dl-${name}`);
      await d.saveAs(path);
      assert.equal(sha256(readFileSync(path)), sha256(expected[name]), `${name} differs from the native merge`);
    }
    assert.deepEqual(errors, []);
    await context.close();
  });

  t.diagnostic(`chart screenshot: ${join(evidence, 'delta-norms.png')}; ${((Date.now() - started) / 1000).toFixed(1)} s`);
});
