// The web page (web/app/) end to end in headless Chromium: a generated sharded LLaMA-shaped base (BF16) and a
// PEFT adapter (r=4 on q_proj/v_proj of 2 layers, plus a k_proj pair the config does not target) on the local
// Hub stand-in; the page inspects both (base read by Range: headers only), plans (matched modules, rejected
// keys), draws the delta-norm chart, and merges: through a folder picker backed by the origin-private file
// system, and for local files (file input and a synthetic drop) through the service worker's streamed
// download. Every saved file must equal the native CLI's merge of the same inputs, and the page must log no
// console errors. A GPT-2-shaped model at a phone's width (390 px) checks the rest of the page's contract: each
// step's error beside its control, Merge enabled only by a successful plan for the current inputs, one chart
// series per module path without its layer index (`attn.c_proj` and `mlp.c_proj` apart), and no page-wide
// horizontal scrolling. Screenshots (desktop and 390 px) are kept in the system's temp directory.
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

const BASE_EXTRAS = {
  'tokenizer.json': JSON.stringify({ version: '1.0', model: { type: 'BPE', vocab: { a: 0, b: 1 } } }),
  'tokenizer.model': Buffer.from([0x0a, 0x03, 0x3c, 0x73, 0x3e, 0xff, 0x00, 0x7f]),
  'generation_config.json': JSON.stringify({ bos_token_id: 1, eos_token_id: 2 }),
  'chat_template.jinja': "{% for m in messages %}{{ m['content'] }}{% endfor %}",
  '.gitattributes': '*.safetensors filter=lfs\n',
  'pytorch_model.bin': 'not read',
};
const COPIED = ['chat_template.jinja', 'generation_config.json', 'tokenizer.json', 'tokenizer.model'];

const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');
const count = (shape) => shape.reduce((a, b) => a * b, 1);

function bf16(random, n) {
  const u = new Uint16Array(n);
  for (let i = 0; i < n; ++i)
    u[i] = (random() < 0.5 ? 0x8000 : 0) | ((118 + Math.floor(random() * 8)) << 7) | Math.floor(random() * 128);
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
    'model-00002-of-00002.safetensors': [
      ...layer(1),
      t('model.norm.weight', [HIDDEN]),
      t('lm_head.weight', [VOCAB, HIDDEN]),
    ],
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
  writeFileSync(
    join(base, 'model.safetensors.index.json'),
    `${JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 2)}\n`,
  );
  writeFileSync(
    join(base, 'config.json'),
    `${JSON.stringify(
      {
        architectures: ['LlamaForCausalLM'],
        model_type: 'llama',
        hidden_size: HIDDEN,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        num_hidden_layers: LAYERS.length,
        vocab_size: VOCAB,
        torch_dtype: 'bfloat16',
      },
      null,
      2,
    )}\n`,
  );
  // The files a Hub model has beside its weights: the CLI copies them into the merged folder, and so must the page
  // (a binary tokenizer.model too); hidden files and weights of other formats are not copied.
  for (const [name, text] of Object.entries(BASE_EXTRAS)) writeFileSync(join(base, name), text);

  const adapter = join(dir, 'adapter');
  mkdirSync(adapter, { recursive: true });
  const factors = [];
  const lora = (path, out, scale) => {
    const key = `base_model.model.model.layers.${path}`;
    factors.push({
      name: `${key}.lora_A.weight`,
      dtype: 'F32',
      shape: [4, HIDDEN],
      data: f32(random, 4 * HIDDEN, 0.2),
    });
    factors.push({ name: `${key}.lora_B.weight`, dtype: 'F32', shape: [out, 4], data: f32(random, 4 * out, scale) });
  };
  // Different scales per layer and module, so the chart's bars differ.
  for (const l of LAYERS) {
    lora(`${l}.self_attn.q_proj`, HIDDEN, 0.1 * (l + 1));
    lora(`${l}.self_attn.v_proj`, KV, 0.05 * (l + 1));
  }
  lora('0.self_attn.k_proj', KV, 0.1); // not in target_modules: PEFT would ignore it, so it is rejected
  writeFileSync(join(adapter, 'adapter_model.safetensors'), await write(factors));
  writeFileSync(
    join(adapter, 'adapter_config.json'),
    `${JSON.stringify(
      {
        peft_type: 'LORA',
        task_type: 'CAUSAL_LM',
        base_model_name_or_path: 'test/tiny-llama',
        r: 4,
        lora_alpha: 8,
        target_modules: ['q_proj', 'v_proj'],
        lora_dropout: 0,
        bias: 'none',
        fan_in_fan_out: false,
      },
      null,
      2,
    )}\n`,
  );
  return {
    base,
    adapter,
    shardNames: Object.keys(shards),
    tensorCount: Object.values(shards).flat().length,
    adapterTensors: factors.length,
  };
}

/** The expected merge output (name -> bytes): the native CLI's, or the package's own mergeShards without it. */
async function expectedMerge(models, dir, extra = []) {
  const out = join(dir, `native-out${extra.join('')}`);
  if (hasNativeCli) {
    // The adapter carries k_proj factors its config does not target: the CLI merges the rest only when allowed to.
    const r = spawnSync(
      nativeCli,
      ['merge', '--base', models.base, '--adapter', models.adapter, '--out', out, '--allow-partial', ...extra],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 0, r.stderr);
    return Object.fromEntries(
      readdirSync(out)
        .sort()
        .map((n) => [n, new Uint8Array(readFileSync(join(out, n)))]),
    );
  }
  const read = (n) => new Uint8Array(readFileSync(join(models.base, n)));
  const files = {};
  for await (const f of pb.mergeShards({
    base: {
      open: read,
      index: read('model.safetensors.index.json'),
      config: read('config.json'),
      files: readdirSync(models.base),
    },
    adapter: { weights: read('../adapter/adapter_model.safetensors'), config: read('../adapter/adapter_config.json') },
    allowPartial: true,
    ...(extra.length ? { quantize: extra[1] } : {}),
  }))
    files[f.path] = await collect(f.stream);
  return files;
}

/**
 * A GPT-2-shaped model (Conv1D weights stored [in, out], `c_proj` in both attention and MLP) as one F32 file plus
 * config.json, and two adapters (fan_in_fan_out) on c_attn, c_proj and c_fc: a good one, with an untargeted
 * `attn.q_attn` pair it rejects, and a bad one whose layer-1 mlp.c_proj A has the wrong input width, which
 * inspects fine but cannot be planned.
 */
async function makeGpt2(dir) {
  const random = rng(29);
  const H = 32;
  const R = 2;
  const f = (name, shape, scale = 0.1) => ({ name, dtype: 'F32', shape, data: f32(random, count(shape), scale) });
  const base = join(dir, 'gpt2');
  mkdirSync(base, { recursive: true });
  const tensors = [f('transformer.wte.weight', [128, H])];
  for (const l of LAYERS)
    tensors.push(
      f(`transformer.h.${l}.attn.c_attn.weight`, [H, 3 * H]),
      f(`transformer.h.${l}.attn.c_proj.weight`, [H, H]),
      f(`transformer.h.${l}.mlp.c_fc.weight`, [H, 4 * H]),
      f(`transformer.h.${l}.mlp.c_proj.weight`, [4 * H, H]),
    );
  writeFileSync(join(base, 'model.safetensors'), await write(tensors));
  writeFileSync(
    join(base, 'config.json'),
    JSON.stringify({
      architectures: ['GPT2LMHeadModel'],
      model_type: 'gpt2',
      n_embd: H,
      n_layer: LAYERS.length,
      n_head: 2,
      vocab_size: 128,
    }),
  );
  const adapter = async (name, badInput) => {
    const factors = [];
    const lora = (path, inputs, outputs, scale) => {
      const key = `base_model.model.transformer.h.${path}`;
      factors.push(f(`${key}.lora_A.weight`, [R, inputs], 0.3), f(`${key}.lora_B.weight`, [outputs, R], scale));
    };
    for (const l of LAYERS) {
      lora(`${l}.attn.c_attn`, H, 3 * H, 0.05);
      lora(`${l}.attn.c_proj`, H, H, 0.1);
      lora(`${l}.mlp.c_fc`, H, 4 * H, 0.15);
      lora(`${l}.mlp.c_proj`, l === 1 && badInput ? badInput : 4 * H, H, 0.2);
    }
    lora('0.attn.q_attn', H, H, 0.1); // GPT-2 has no cross-attention: not targeted, so rejected
    const out = join(dir, name);
    mkdirSync(out, { recursive: true });
    writeFileSync(join(out, 'adapter_model.safetensors'), await write(factors));
    writeFileSync(
      join(out, 'adapter_config.json'),
      JSON.stringify({
        peft_type: 'LORA',
        task_type: 'CAUSAL_LM',
        base_model_name_or_path: 'test/gpt2',
        r: R,
        lora_alpha: 4,
        target_modules: ['c_attn', 'c_proj', 'c_fc'],
        fan_in_fan_out: true,
        lora_dropout: 0,
        bias: 'none',
      }),
    );
    return out;
  };
  return { base, good: await adapter('gpt2-lora'), bad: await adapter('gpt2-lora-bad', 3 * H) };
}

/** Opens the page with console errors collected; returns {page, errors}. */
async function openPage(browser, url, { initScript, viewport = { width: 1200, height: 900 } } = {}) {
  const context = await browser.newContext({ acceptDownloads: true, viewport });
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

/** The text of every step error box that is showing. */
const shownErrors = (page) => page.locator('.step-error:not([hidden])').allTextContents();

/** Clicks and waits until the step's result or an error appears; fails with the page's error text. */
async function stepAndWait(page, button, ready) {
  await page.click(button);
  const which = await Promise.race([
    page.waitForSelector(ready, { state: 'visible' }).then(() => 'ok'),
    page.waitForSelector('.step-error:not([hidden])').then(() => 'error'),
  ]);
  if (which === 'error') assert.fail(`page error after ${button}: ${(await shownErrors(page)).join(' | ')}`);
}

/**
 * `box` is `control`'s error: an alert the control's aria-describedby names, in the same section, just below
 * the control (within `within` px: a wrapped hint may sit between them on a phone).
 */
async function assertErrorBeside(page, control, box, within = 80) {
  const r = await page.evaluate(
    ([c, b]) => {
      const ctl = document.querySelector(c);
      const err = document.querySelector(b);
      const a = ctl.getBoundingClientRect();
      const e = err.getBoundingClientRect();
      return {
        described: (ctl.getAttribute('aria-describedby') ?? '').split(/\s+/).includes(err.id),
        role: err.getAttribute('role'),
        sameSection: ctl.closest('section') === err.closest('section'),
        gap: e.top - a.bottom,
        visible: !err.hidden && e.height > 0,
      };
    },
    [control, box],
  );
  assert.deepEqual(
    { ...r, gap: undefined },
    { described: true, role: 'alert', sameSection: true, gap: undefined, visible: true },
    `${box} beside ${control}`,
  );
  assert.ok(r.gap >= 0 && r.gap <= within, `${box} is ${r.gap} px below ${control}`);
}

/** The page does not scroll sideways: {scrollWidth, widest element sticking out (outside scroll boxes)}. */
const pageWidth = (page) =>
  page.evaluate(() => {
    const w = document.documentElement.clientWidth;
    const out = [...document.querySelectorAll('body *')]
      .filter((e) => !e.closest('.scroll') && e.getBoundingClientRect().right > w + 0.5)
      .map((e) => `${e.tagName.toLowerCase()}${e.id ? `#${e.id}` : ''}${e.className ? `.${e.className}` : ''}`);
    return { scrollWidth: document.documentElement.scrollWidth, out: out.slice(0, 5) };
  });

/** The canvas's bitmap matches its CSS width (it was drawn at the width it has now). */
const chartAtItsWidth = () => {
  const c = document.querySelector('#chart');
  return c.clientWidth > 0 && c.width === Math.round(c.clientWidth * (window.devicePixelRatio || 1));
};

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
  // The CLI's folder: the merged shards, the index, config.json and the base's other files, copied.
  assert.deepEqual(
    Object.keys(expected).sort(),
    [...models.shardNames, 'config.json', 'model.safetensors.index.json', ...COPIED].sort(),
  );

  const gpt2 = await makeGpt2(dir);
  const hub = await startHub({
    files: {
      'test/tiny-llama': models.base,
      'test/tiny-llama-lora': models.adapter,
      'test/gpt2-lora': gpt2.good,
      'test/gpt2-lora-bad': gpt2.bad,
    },
  });
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
    const { page, context, errors } = await openPage(
      browser,
      `${site.url}?endpoint=${encodeURIComponent(hub.endpoint)}`,
      { initScript },
    );
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
    const shardReads = hub.requests.filter(
      (r) => r.repo === 'test/tiny-llama' && r.path.endsWith('.safetensors') && r.method === 'GET',
    );
    assert.ok(shardReads.length >= 2);
    for (const r of shardReads) {
      const m = /^bytes=(\d+)-(\d+)$/.exec(r.range ?? '');
      assert.ok(m, `a base shard was requested without a range: ${r.url}`);
      assert.ok(Number(m[2]) - Number(m[1]) + 1 <= FIRST_RANGE, r.range);
    }
    const shardSize = Math.min(...models.shardNames.map((n) => readFileSync(join(models.base, n)).length));
    assert.ok(shardSize > FIRST_RANGE, 'each shard is larger than what was read of it');

    // Chart: drawn, not blank; a screenshot is kept as evidence.
    await page.locator('#chart-figure').screenshot({ path: join(evidence, 'delta-norms.png') });
    const { ink, total } = await inkPixels(page);
    assert.ok(ink > 0.02 * total, `the chart is nearly blank: ${ink} of ${total} pixels`);
    assert.deepEqual(await page.locator('#chart-legend li').allTextContents(), [
      'self_attn.q_proj',
      'self_attn.v_proj',
    ]);
    assert.match(
      await page.textContent('#chart-summary'),
      /4 modules in 2 series \(self_attn\.q_proj, self_attn\.v_proj\) over 2 layer/,
    );
    assert.equal(await page.locator('#norm-table tbody tr').count(), 4);

    // Merge waits for a plan.
    assert.equal(await page.isDisabled('#merge-btn'), true);
    assert.match(await page.textContent('#merge-hint'), /Plan the merge first/);

    // Plan: headers only again.
    hub.clearLog();
    // The adapter carries k_proj factors its config does not target: the plan stops on them, listing them, as the
    // CLI does without --allow-partial; merging the rest is the user's explicit choice.
    await page.click('#plan-btn');
    await page.waitForSelector('#plan-error:not([hidden])');
    assert.match(
      await page.textContent('#plan-error'),
      /UnresolvedTensor: merge would drop 2 tensor\(s\)[\s\S]*self_attn\.k_proj\.lora_A\.weight/,
    );
    assert.equal(await page.isDisabled('#merge-btn'), true);
    await page.check('#allow-partial');
    await stepAndWait(page, '#plan-btn', '#plan-result');
    assert.equal(await page.textContent('#plan-matched'), '(4)');
    assert.equal(await page.locator('#plan-table tbody tr').count(), 4);
    const rejected = await page.locator('#rejected-list li').allTextContents();
    assert.equal(rejected.length, 2);
    for (const r of rejected) assert.match(r, /layers\.0\.self_attn\.k_proj\.lora_[AB]\.weight/);
    assert.ok(
      hub.requests.every(
        (r) =>
          !r.path?.endsWith('.safetensors') || r.repo !== 'test/tiny-llama' || /^bytes=0-65535$/.test(r.range ?? ''),
      ),
    );
    assert.equal(await page.isDisabled('#merge-btn'), false);
    assert.equal(await page.textContent('#merge-hint'), '');
    await page.screenshot({ path: join(evidence, 'page-1200.png'), fullPage: true });

    // A merge that fails reading the base (the Hub refuses a shard once): its error is beside Merge and Cancel,
    // the plan stands, and merging again clears it.
    await page.selectOption('#save-method', 'picker');
    hub.faults.push({ type: 'status', status: 403, path: 'model-00002-of-00002.safetensors', times: 1 });
    await page.click('#merge-btn');
    await page.waitForSelector('#merge[data-state="error"], #merge[data-state="done"]');
    assert.equal(await page.getAttribute('#merge', 'data-state'), 'error');
    assert.match(await page.textContent('#merge-error'), /403/);
    await assertErrorBeside(page, '#merge-btn', '#merge-error');
    assert.equal(await page.getAttribute('#cancel-btn', 'aria-describedby'), 'merge-error');
    assert.deepEqual(await shownErrors(page), [await page.textContent('#merge-error')]);
    assert.equal(await page.isDisabled('#merge-btn'), false);
    assert.ok(errors.length >= 1 && errors.every((e) => /status of 403/.test(e)), errors.join('\n'));
    errors.length = 0; // the refused request, logged by the browser

    // Merge into the "chosen folder", then compare every file with the native merge. (The section still shows the
    // failed run's state until the new one starts: wait for that first.)
    await page.click('#merge-btn');
    await page.waitForFunction(() => document.querySelector('#merge').dataset.state !== 'error');
    await page.waitForSelector('#merge[data-state="done"], #merge[data-state="error"]');
    assert.equal(await page.getAttribute('#merge', 'data-state'), 'done', (await shownErrors(page)).join(' | '));
    assert.equal(
      await page.getAttribute('#merge-progress', 'value'),
      await page.getAttribute('#merge-progress', 'max'),
    );
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
    for (const [name, bytes] of Object.entries(expected))
      assert.equal(saved[name], sha256(bytes), `${name} differs from the native merge`);
    assert.equal(await page.isHidden('#merge-error'), true);
    assert.deepEqual(errors, []);
    await context.close();
  });

  await t.test(
    'local files: file input and drop, merge as a streamed download through the service worker',
    async () => {
      const { page, context, errors } = await openPage(browser, site.url);
      // The base through the file input (shards, index, config), the adapter dropped on its zone.
      await page.setInputFiles(
        '#base-files',
        readdirSync(models.base).map((n) => join(models.base, n)),
      );
      assert.equal(await page.isChecked('input[name="base-mode"][value="local"]'), true);
      const files = readdirSync(models.adapter).map((name) => ({
        name,
        b64: readFileSync(join(models.adapter, name)).toString('base64'),
      }));
      const transfer = await page.evaluateHandle((list) => {
        const dt = new DataTransfer();
        for (const { name, b64 } of list)
          dt.items.add(new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], name));
        return dt;
      }, files);
      await page.dispatchEvent('.drop[data-target="adapter"]', 'drop', { dataTransfer: transfer });
      await page.waitForFunction(() =>
        document.querySelector('#adapter-chosen').textContent.includes('adapter_config.json'),
      );
      assert.equal(await page.isChecked('input[name="adapter-mode"][value="local"]'), true);

      await stepAndWait(page, '#inspect-btn', '#inspect');
      assert.equal(await page.locator('#tensor-table tbody tr').count(), models.tensorCount);
      await page.check('#allow-partial');
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
      assert.equal(await page.getAttribute('#merge', 'data-state'), 'done', (await shownErrors(page)).join(' | '));
      assert.equal(downloads.length, Object.keys(expected).length);
      for (const d of downloads) {
        const name = d.suggestedFilename();
        assert.ok(name in expected, name);
        const path = join(dir, `dl-${name}`);
        await d.saveAs(path);
        assert.equal(sha256(readFileSync(path)), sha256(expected[name]), `${name} differs from the native merge`);
      }

      // Quantize for deployment (FP8 per-channel): a new plan, then the native CLI's `--quantize fp8` bytes.
      await page.selectOption('#merge-quantize', 'fp8');
      assert.equal(await page.isDisabled('#merge-btn'), true);
      assert.match(await page.textContent('#merge-hint'), /quantization changed/);
      await stepAndWait(page, '#plan-btn', '#plan-result');
      assert.match(await page.textContent('#plan-summary'), /quantized\s*8 weights \(float-quantized\)/);
      const quantized = expectedMerge(models, dir, ['--quantize', 'fp8']);
      downloads.length = 0;
      await page.click('#merge-btn');
      await page.waitForSelector('#merge[data-state="done"], #merge[data-state="error"]');
      assert.equal(await page.getAttribute('#merge', 'data-state'), 'done', (await shownErrors(page)).join(' | '));
      const want = await quantized;
      assert.equal(downloads.length, Object.keys(want).length);
      for (const d of downloads) {
        const name = d.suggestedFilename();
        const path = join(dir, `dl-q-${name}`);
        await d.saveAs(path);
        assert.equal(
          sha256(readFileSync(path)),
          sha256(want[name]),
          `${name} differs from the native --quantize fp8 merge`,
        );
      }
      assert.deepEqual(errors, []);
      await context.close();
    },
  );

  await t.test(
    'GPT-2 at 390 px: errors beside their step, Merge only after a plan, attn.c_proj and mlp.c_proj apart',
    async () => {
      // A browser without File System Access: choosing "file / folder picker" must fail, beside "Save with".
      const initScript = () => {
        window.showDirectoryPicker = undefined;
        window.showSaveFilePicker = undefined;
      };
      const { page, context, errors } = await openPage(
        browser,
        `${site.url}?endpoint=${encodeURIComponent(hub.endpoint)}`,
        { viewport: { width: 390, height: 844 }, initScript },
      );

      // Inspect with nothing chosen: the error is beside Inspect, and only there.
      await page.click('#inspect-btn');
      await page.waitForSelector('#inspect-error:not([hidden])');
      assert.match(await page.textContent('#inspect-error'), /base model’s repo id/);
      await assertErrorBeside(page, '#inspect-btn', '#inspect-error');
      assert.equal((await shownErrors(page)).length, 1);

      // The base from local files, the adapter whose plan must fail from the Hub; retrying Inspect clears its error.
      await page.setInputFiles(
        '#base-files',
        readdirSync(gpt2.base).map((n) => join(gpt2.base, n)),
      );
      await page.fill('#adapter-repo', 'test/gpt2-lora-bad');
      await stepAndWait(page, '#inspect-btn', '#chart-section');
      assert.equal(await page.isHidden('#inspect-error'), true);
      assert.equal(await page.textContent('#inspect-error'), '');

      // One series per module path without its layer index: c_proj of attention and of the MLP are apart.
      assert.deepEqual(await page.locator('#chart-legend li').allTextContents(), [
        'attn.c_attn',
        'attn.c_proj',
        'mlp.c_fc',
        'mlp.c_proj',
      ]);
      assert.deepEqual(await page.$$eval('#chart-legend li', (items) => items.map((i) => i.dataset.series)), [
        'attn.c_attn',
        'attn.c_proj',
        'mlp.c_fc',
        'mlp.c_proj',
      ]);
      assert.match(
        await page.textContent('#chart-summary'),
        /8 modules in 4 series \(attn\.c_attn, attn\.c_proj, mlp\.c_fc, mlp\.c_proj\) over 2 layer/,
      );
      await page.waitForFunction(chartAtItsWidth);
      assert.ok((await page.$eval('#chart', (c) => c.clientWidth)) < 390);
      assert.ok((await inkPixels(page)).ink > 0);

      // No plan yet: Merge is disabled and says why. The plan fails: its error is beside Plan, Merge stays off.
      assert.equal(await page.isDisabled('#merge-btn'), true);
      assert.match(await page.textContent('#merge-hint'), /Plan the merge first/);
      await page.click('#plan-btn');
      await page.waitForSelector('#plan-error:not([hidden])');
      assert.match(await page.textContent('#plan-error'), /^ShapeMismatch: [^]*transformer\.h\.1\.mlp\.c_proj/);
      await assertErrorBeside(page, '#plan-btn', '#plan-error');
      assert.equal((await shownErrors(page)).length, 1);
      assert.equal(await page.isHidden('#plan-result'), true);
      assert.equal(await page.isDisabled('#merge-btn'), true);
      assert.match(await page.textContent('#merge-hint'), /plan failed/);
      await page.click('#merge-btn', { force: true }); // a click on the disabled button does nothing
      assert.equal(await page.getAttribute('#merge', 'data-state'), null);
      assert.deepEqual(await pageWidth(page), { scrollWidth: 390, out: [] });
      await page.screenshot({ path: join(evidence, 'page-390-failed-plan.png'), fullPage: true });

      // Another adapter: the inputs changed, so everything after them is gone, the plan's error too.
      await page.fill('#adapter-repo', 'test/gpt2-lora');
      assert.equal(await page.isHidden('#plan'), true);
      assert.equal(await page.textContent('#plan-error'), '');
      await stepAndWait(page, '#inspect-btn', '#chart-section');
      assert.equal(await page.isDisabled('#merge-btn'), true);
      await page.check('#allow-partial');
      await stepAndWait(page, '#plan-btn', '#plan-result');
      assert.equal(await page.isHidden('#plan-error'), true);
      assert.equal(await page.textContent('#plan-matched'), '(8)');
      assert.equal(await page.locator('#rejected-list li').count(), 2);
      assert.equal(await page.isDisabled('#merge-btn'), false);
      assert.equal(await page.textContent('#merge-hint'), '');
      await page.evaluate(() => document.querySelectorAll('details').forEach((d) => (d.open = true)));
      assert.deepEqual(await pageWidth(page), { scrollWidth: 390, out: [] });
      await page.screenshot({ path: join(evidence, 'page-390.png'), fullPage: true });
      await page.locator('#chart-figure').screenshot({ path: join(evidence, 'delta-norms-390.png') });

      // Saving fails before anything is merged: the error is the save's, and the plan still stands.
      await page.selectOption('#save-method', 'picker');
      await page.click('#merge-btn');
      await page.waitForSelector('#save-error:not([hidden])');
      assert.match(await page.textContent('#save-error'), /no file or folder picker/);
      await assertErrorBeside(page, '#save-method', '#save-error');
      assert.equal((await shownErrors(page)).length, 1);
      assert.equal(await page.isDisabled('#merge-btn'), false);
      assert.deepEqual(await pageWidth(page), { scrollWidth: 390, out: [] });

      // A new output dtype needs a new plan.
      await page.selectOption('#merge-dtype', 'f16');
      assert.equal(await page.isDisabled('#merge-btn'), true);
      assert.match(await page.textContent('#merge-hint'), /dtype changed/);
      assert.equal(await page.isHidden('#plan-result'), true);

      // The chart follows the page's width both ways.
      await page.setViewportSize({ width: 1200, height: 900 });
      await page.waitForFunction(() => document.querySelector('#chart').clientWidth > 1000);
      await page.waitForFunction(chartAtItsWidth);
      await page.setViewportSize({ width: 390, height: 844 });
      await page.waitForFunction(() => document.querySelector('#chart').clientWidth < 390);
      await page.waitForFunction(chartAtItsWidth);
      assert.deepEqual(errors, []);
      await context.close();
    },
  );

  t.diagnostic(
    `screenshots in ${evidence}: delta-norms.png, page-1200.png, page-390.png, page-390-failed-plan.png, delta-norms-390.png; ` +
      `${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
});
