// The page: choose a base and an adapter (Hub ids or local files), inspect both, plan, chart the delta norms,
// merge and save. Everything runs in this tab through the package's public API.
import {
  SafetensorsError,
  adapterInfo,
  hubUrl,
  init,
  inspect,
  inspectRepo,
  listRepoFiles,
  mergeShards,
  openRemote,
  planMerge,
  progressTime,
} from '../src/index.js';
import { describeChart, drawNormChart, groupNorms, renderLegend } from './chart.js';
import { chooseSink } from './save.js';

const INDEX = 'model.safetensors.index.json';
const ROW_CAP = 500; // tensor table rows rendered at once (filter to see others)

const $ = (selector) => document.querySelector(selector);
const state = {
  files: { base: [], adapter: [] },
  base: null,
  adapter: null,
  chart: null,
  plan: null, // the last successful plan for the current inputs; Merge needs one
  planBlocked: 'Plan the merge first (step 4).', // why Merge is disabled when there is no plan
  busy: false, // a step is running
  generation: 0, // bumped when the inputs change: a step that finishes later must not install stale results
  controller: null, // the running merge's
};

// ---- small helpers ----

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
function bytes(n) {
  let i = 0;
  let v = n;
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024;
    i += 1;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(v < 10 ? 2 : 1)} ${UNITS[i]}`;
}
const exact = (n) => n.toLocaleString('en-US');
function count(n) {
  const s = [
    [1e12, 'T'],
    [1e9, 'B'],
    [1e6, 'M'],
    [1e3, 'K'],
  ].find(([d]) => n >= d);
  return s ? `${(n / s[0]).toPrecision(3)} ${s[1]} (${exact(n)})` : exact(n);
}
const shape = (s) => (s.length ? s.join(' × ') : 'scalar');

/** An element with text content (never HTML: names come from files). */
function el(tag, text, props = {}) {
  const e = Object.assign(document.createElement(tag), props);
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function row(cells) {
  const tr = document.createElement('tr');
  for (const c of cells) tr.append(c instanceof Node ? c : el('td', c));
  return tr;
}
const td = (text, className) => el('td', text, className ? { className } : {});
function fillSummary(dl, entries) {
  dl.replaceChildren(...entries.flatMap(([k, v]) => [el('dt', k), el('dd', v)]));
}

class UserError extends Error {}

/** A failure while writing the output (not while merging): reported next to "Save with". */
class SaveError extends Error {
  constructor(cause) {
    super(errorText(cause));
    this.cause = cause;
  }
}

function errorText(error) {
  if (error instanceof SafetensorsError) return `${error.code}: ${error.message}`;
  if (error?.name === 'AbortError') return 'Cancelled.';
  return error?.message ?? String(error);
}

function setStatus(text) {
  $('#status').textContent = text;
}
/**
 * Each step reports its errors in its own box beside its control (the control's aria-describedby names it):
 * #inspect-error, #plan-error, #merge-error (Merge and Cancel), #save-error ("Save with"). Null clears it.
 */
function showError(box, error) {
  const target = $(box);
  target.hidden = !error;
  target.textContent = error ? errorText(error) : '';
}

/** Enables the buttons for the current state: Merge only with a plan for the current inputs. */
function syncButtons() {
  $('#inspect-btn').disabled = state.busy;
  $('#plan-btn').disabled = state.busy || !state.adapter;
  $('#merge-btn').disabled = state.busy || !state.plan || !!state.controller;
  $('#merge-hint').textContent = state.plan ? '' : state.planBlocked;
}

/** Forgets the plan (Merge is disabled until the next successful one), saying why. */
function dropPlan(why) {
  state.plan = null;
  state.planBlocked = why;
  $('#plan-result').hidden = true;
  syncButtons();
}

/**
 * Runs one step with the buttons disabled and its status shown; its error (cleared as it starts) goes to `box`,
 * a SaveError's to #save-error. A cancellation is not an error. Resolves to true on success.
 */
async function step(label, box, fn) {
  state.busy = true;
  syncButtons();
  showError(box, null);
  setStatus(`${label}…`);
  const started = performance.now();
  try {
    const message = await fn();
    setStatus(message ?? `${label}: done in ${((performance.now() - started) / 1000).toFixed(2)} s.`);
    return true;
  } catch (error) {
    const cancelled = error?.name === 'AbortError' || error?.cause?.name === 'AbortError';
    setStatus(cancelled ? `${label}: cancelled.` : '');
    if (!cancelled) showError(error instanceof SaveError ? '#save-error' : box, error);
    return false;
  } finally {
    state.busy = false;
    syncButtons();
  }
}

// ---- choosing ----

const modeOf = (which) => document.querySelector(`input[name="${which}-mode"]:checked`).value;
function setMode(which, mode) {
  document.querySelector(`input[name="${which}-mode"][value="${mode}"]`).checked = true;
  $(`#${which}-picker`).dataset.mode = mode;
}

function hubSettings() {
  const endpoint = $('#endpoint').value.trim().replace(/\/+$/, '') || 'https://huggingface.co';
  const token = $('#token').value.trim() || undefined;
  return { endpoint, token };
}

/** Forgets what was inspected, and the plan: the inputs changed. */
function invalidate() {
  state.generation += 1;
  state.base = null;
  state.adapter = null;
  state.chart = null;
  for (const id of ['#inspect', '#chart-section', '#plan', '#merge']) $(id).hidden = true;
  for (const box of ['#plan-error', '#merge-error', '#save-error']) showError(box, null); // about inputs now gone
  dropPlan('Plan the merge first (step 4).');
}

function setFiles(which, files) {
  // The base's every file is kept: besides the weights, the merge copies its tokenizer and other files as the CLI
  // does (the core chooses which); of an adapter's, only its weights and config are read.
  const kept = [...files].filter((f) => which === 'base' || /\.(safetensors|json)$/i.test(f.name));
  state.files[which] = kept;
  $(`#${which}-chosen`).textContent = kept.length
    ? kept.map((f) => `${f.name} (${bytes(f.size)})`).join(', ')
    : files.length
      ? 'none of these is a .safetensors or .json file'
      : '';
  if (kept.length) setMode(which, 'local');
  invalidate();
}

/** Files from a drop, one folder level deep (a dropped adapter or model directory). */
async function droppedFiles(transfer) {
  // Entries must be taken during the event; reading them may wait.
  const entries = [...transfer.items]
    .filter((i) => i.kind === 'file')
    .map((i) => i.webkitGetAsEntry?.())
    .filter(Boolean);
  if (!entries.length) return [...transfer.files];
  const out = [];
  const walk = async (entry, depth) => {
    if (entry.isFile) out.push(await new Promise((ok, fail) => entry.file(ok, fail)));
    else if (entry.isDirectory && depth < 1) {
      const reader = entry.createReader();
      for (let batch; (batch = await new Promise((ok, fail) => reader.readEntries(ok, fail))).length;)
        for (const e of batch) await walk(e, depth + 1);
    }
  };
  for (const e of entries) await walk(e, 0);
  return out;
}

// ---- loading ----

/** A small Hub file, whole (configs, the index, adapter weights). Null for a missing optional file. */
async function fetchHub(address, signal, optional = false) {
  const { token, ...rest } = address;
  const res = await fetch(hubUrl(rest), { headers: token ? { Authorization: `Bearer ${token}` } : {}, signal });
  if (optional && res.status === 404) {
    await res.body?.cancel();
    return null;
  }
  if (!res.ok) {
    const detail = res.headers.get('x-error-message');
    await res.body?.cancel();
    throw new UserError(
      `cannot fetch ${address.path} from ${address.repo}: HTTP ${res.status}${detail ? ` (${detail})` : ''}`,
    );
  }
  return new Uint8Array(await res.arrayBuffer());
}

const decode = (b) => new TextDecoder().decode(b);

/**
 * The base: {label, shards: [{path, header, size}], index, config, opener(signal) -> {open(name), close()}}.
 * Remote shards are read by range: inspectRepo reads only their headers.
 */
async function loadBase(signal) {
  if (modeOf('base') === 'hub') {
    const repo = $('#base-repo').value.trim();
    if (!repo) throw new UserError('Enter the base model’s repo id (owner/name), or choose local files.');
    const revision = $('#base-revision').value.trim() || 'main';
    const { endpoint, token } = hubSettings();
    const info = await inspectRepo({ repo, revision, endpoint, token, signal });
    const at = { repo, revision: info.revision, endpoint, token };
    const [index, config, files] = await Promise.all([
      info.index ? fetchHub({ ...at, path: INDEX }, signal) : null,
      fetchHub({ ...at, path: 'config.json' }, signal, true),
      listRepoFiles({ repo, revision: info.revision, endpoint, token }, { signal }), // the other files the merge copies
    ]);
    return {
      label: `${repo} @ ${info.commit ? info.commit.slice(0, 12) : revision}`,
      source: 'hub',
      shards: info.shards.map((s) => ({ ...s, size: s.header.fileSize })),
      index,
      config,
      files,
      opener(opSignal) {
        const open = new Map();
        return {
          open: (name) => {
            if (!open.has(name)) open.set(name, openRemote({ ...at, path: name }, { signal: opSignal }));
            return open.get(name);
          },
          close: async () => {
            for (const file of open.values())
              await file.then(
                (f) => f.close(),
                () => {},
              );
          },
        };
      },
    };
  }
  const files = state.files.base;
  const shardFiles = files.filter((f) => /\.safetensors$/i.test(f.name));
  const indexFile = files.find((f) => f.name.endsWith('.index.json'));
  const configFile = files.find((f) => f.name === 'config.json');
  if (!shardFiles.length) throw new UserError('Choose the base’s .safetensors file(s), or switch to a Hub repo.');
  const byName = new Map();
  let index = null;
  if (indexFile) {
    index = new Uint8Array(await indexFile.arrayBuffer());
    let map;
    try {
      map = JSON.parse(decode(index)).weight_map;
    } catch {
      throw new UserError(`${indexFile.name} is not valid JSON`);
    }
    const names = [...new Set(Object.values(map ?? {}))].sort();
    const missing = names.filter((n) => !shardFiles.some((f) => f.name === n));
    if (missing.length) throw new UserError(`the index lists shards that were not chosen: ${missing.join(', ')}`);
    for (const n of names)
      byName.set(
        n,
        shardFiles.find((f) => f.name === n),
      );
  } else if (shardFiles.length > 1) {
    throw new UserError(
      `${shardFiles.length} .safetensors files were chosen: add ${INDEX} to merge a sharded model, or choose one file`,
    );
  } else {
    byName.set('model.safetensors', shardFiles[0]);
  }
  const shards = [];
  for (const [name, file] of byName) {
    try {
      shards.push({ path: name, file: file.name, header: await inspect(file, { signal }), size: file.size });
    } catch (error) {
      if (error instanceof SafetensorsError) throw new SafetensorsError(error.code, `${file.name}: ${error.message}`);
      throw error;
    }
  }
  return {
    label: shardFiles.length === 1 ? shardFiles[0].name : `${shardFiles.length} local shards`,
    source: 'local',
    shards,
    index,
    config: configFile ? new Uint8Array(await configFile.arrayBuffer()) : null,
    files: files.map((f) => f.name), // the folder the user chose: the merge copies its other files as the CLI does
    // Files are Blobs: the merge reads them by Blob.slice, a piece at a time.
    opener: () => ({ open: (name) => byName.get(name) ?? files.find((f) => f.name === name), close: async () => {} }),
  };
}

/** The adapter: {label, input: {weights, config, weightsName}}. */
async function loadAdapter(signal) {
  if (modeOf('adapter') === 'hub') {
    const repo = $('#adapter-repo').value.trim();
    if (!repo) throw new UserError('Enter the adapter’s repo id (owner/name), or choose local files.');
    const revision = $('#adapter-revision').value.trim() || 'main';
    const at = { repo, revision, ...hubSettings() };
    const [weights, config] = await Promise.all([
      fetchHub({ ...at, path: 'adapter_model.safetensors' }, signal),
      fetchHub({ ...at, path: 'adapter_config.json' }, signal, true),
    ]);
    return { label: `${repo} @ ${revision}`, input: { weights, config, weightsName: 'adapter_model.safetensors' } };
  }
  const files = state.files.adapter;
  const candidates = files.filter((f) => /\.safetensors$/i.test(f.name));
  const weights =
    candidates.find((f) => f.name === 'adapter_model.safetensors') ??
    candidates.find((f) => f.name === 'adapters.safetensors') ??
    candidates[0];
  if (!weights)
    throw new UserError('Choose the adapter’s .safetensors file (and adapter_config.json), or switch to a Hub repo.');
  if (candidates.length > 1) throw new UserError(`choose one adapter weights file, not ${candidates.length}`);
  const configFile = files.find((f) => f.name === 'adapter_config.json') ?? files.find((f) => /\.json$/i.test(f.name));
  const config = configFile ? new Uint8Array(await configFile.arrayBuffer()) : null;
  return { label: weights.name, input: { weights, config, weightsName: weights.name } };
}

// ---- inspect ----

function dtypeRows(tensors) {
  const by = new Map();
  for (const t of tensors) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    const d = by.get(t.dtype) ?? { tensors: 0, params: 0, bytes: 0 };
    d.tensors += 1;
    d.params += n;
    d.bytes += t.byteLength;
    by.set(t.dtype, d);
  }
  return [...by].sort((a, b) => b[1].params - a[1].params);
}

function fillDtypes(table, tensors) {
  table.tBodies[0].replaceChildren(
    ...dtypeRows(tensors).map(([dtype, d]) =>
      row([dtype, td(exact(d.tensors), 'num'), td(count(d.params), 'num'), td(bytes(d.bytes), 'num')]),
    ),
  );
}

function architecture(config) {
  if (!config) return 'no config.json';
  try {
    const c = JSON.parse(decode(config));
    return (
      [c.architectures?.join(', '), c.model_type && `model_type ${c.model_type}`].filter(Boolean).join(' · ') || '—'
    );
  } catch {
    return 'config.json is not valid JSON';
  }
}

function showInspect() {
  const { base, adapter } = state;
  const baseTensors = base.shards.flatMap((s) => s.header.tensors.map((t) => ({ ...t, file: s.path })));
  const params = base.shards.reduce((a, s) => a + s.header.totalParameters, 0);
  fillSummary($('#base-summary'), [
    ['source', base.label],
    [
      'files',
      base.shards.length === 1 ? (base.shards[0].file ?? base.shards[0].path) : `${base.shards.length} shards + index`,
    ],
    ['architecture', architecture(base.config)],
    ['tensors', exact(baseTensors.length)],
    ['parameters', count(params)],
    [
      'size',
      `${bytes(base.shards.reduce((a, s) => a + s.size, 0))} (headers ${bytes(base.shards.reduce((a, s) => a + 8 + s.header.headerSize, 0))})`,
    ],
  ]);
  fillDtypes($('#base-dtypes'), baseTensors);

  const info = adapter.info;
  fillSummary($('#adapter-summary'), [
    ['source', adapter.label],
    ['format', `${info.format}${info.arch ? ` · naming table ${info.arch}` : ''}`],
    ['type', `${info.peftType}${info.taskType ? ` · ${info.taskType}` : ''}`],
    ['trained on', info.baseModel ?? '—'],
    [
      'rank · alpha',
      `r = ${info.r} · lora_alpha = ${info.loraAlpha}${info.useRslora ? ' · rsLoRA' : ''}${info.useDora ? ' · DoRA' : ''}`,
    ],
    ['LoRA modules', exact(info.modules.length)],
    ['parameters', count(info.parameters)],
    ['rejected tensors', exact(info.rejected.length)],
  ]);
  const adapterTensors = adapter.header.tensors.map((t) => ({ ...t, file: adapter.input.weightsName }));
  fillDtypes($('#adapter-dtypes'), adapterTensors);

  state.tables = { base: baseTensors, adapter: adapterTensors };
  renderTable();
  $('#inspect').hidden = false;
}

function renderTable() {
  const which = $('#table-which').value;
  const all = state.tables?.[which] ?? [];
  const needle = $('#table-filter').value.trim().toLowerCase();
  const matching = needle ? all.filter((t) => t.name.toLowerCase().includes(needle)) : all;
  const shown = matching.slice(0, ROW_CAP);
  $('#tensor-caption').textContent = `Tensors of the ${which}`;
  $('#tensor-table').tBodies[0].replaceChildren(
    ...shown.map((t) =>
      row([td(t.name, 'name'), t.dtype, td(shape(t.shape), 'shape'), td(exact(t.byteLength), 'num'), t.file]),
    ),
  );
  $('#table-count').textContent =
    matching.length > shown.length
      ? `showing ${exact(shown.length)} of ${exact(matching.length)} (filter to narrow)`
      : `${exact(matching.length)} tensor${matching.length === 1 ? '' : 's'}${needle ? ` of ${exact(all.length)}` : ''}`;
}

// ---- chart ----

function showChart() {
  const modules = state.adapter.info.modules;
  state.chart = groupNorms(modules);
  $('#chart-section').hidden = false;
  renderLegend($('#chart-legend'), state.chart);
  $('#chart-summary').textContent = describeChart(state.chart, modules);
  drawNormChart($('#chart'), state.chart);
  $('#norm-table').tBodies[0].replaceChildren(
    ...modules.map((m) =>
      row([
        td(m.path, 'name'),
        td(m.rank, 'num'),
        td(+m.scaling.toPrecision(6), 'num'),
        td(m.deltaNorm.toPrecision(6), 'num'),
      ]),
    ),
  );
}

// The canvas is drawn at its CSS size: redraw whenever that changes (a rotated phone, a resized window).
let redraw = 0;
new ResizeObserver(() => {
  if (!state.chart || $('#chart-section').hidden) return;
  cancelAnimationFrame(redraw);
  redraw = requestAnimationFrame(() => drawNormChart($('#chart'), state.chart));
}).observe($('#chart'));

async function onInspect() {
  invalidate();
  const generation = state.generation;
  const controller = new AbortController();
  await step('Inspecting', '#inspect-error', async () => {
    const [base, adapter] = await Promise.all([loadBase(controller.signal), loadAdapter(controller.signal)]);
    const [header, info] = await Promise.all([
      inspect(adapter.input.weights),
      adapterInfo(adapter.input, { baseConfig: base.config }),
    ]);
    if (generation !== state.generation) throw new UserError('The inputs changed while inspecting: inspect again.');
    state.base = base;
    state.adapter = { ...adapter, header, info };
    showInspect();
    showChart();
    $('#plan').hidden = false;
    $('#plan-result').hidden = true;
    $('#merge').hidden = false;
    const requests = base.source === 'hub' ? ' (headers only)' : '';
    return `Inspected ${base.shards.length} base file(s)${requests} and the adapter: ${info.modules.length} LoRA module(s).`;
  });
}

// ---- plan ----

const mergeBase = (base, opener) => ({ open: opener.open, index: base.index, config: base.config, files: base.files });
const dtypeOption = () => $('#merge-dtype').value || undefined;
// `--quantize` / `--scheme`, from the "quantize for deployment" choice (docs/merge.md, Quantize).
const quantizeOptions = () => {
  const v = $('#merge-quantize').value;
  if (!v) return {};
  return v === 'fp8-block' ? { quantize: 'fp8', scheme: 'block' } : { quantize: v };
};

async function onPlan() {
  const { base, adapter } = state;
  if (!base || !adapter) return;
  dropPlan('Planning…');
  const generation = state.generation;
  const dtype = dtypeOption();
  const quantize = $('#merge-quantize').value;
  const ok = await step('Planning', '#plan-error', async () => {
    const opener = base.opener();
    let plan;
    try {
      plan = await planMerge({
        base: mergeBase(base, opener),
        adapter: adapter.input,
        dtype,
        ...quantizeOptions(),
        allowPartial: $('#allow-partial').checked,
      });
    } finally {
      await opener.close();
    }
    if (generation !== state.generation || dtype !== dtypeOption() || quantize !== $('#merge-quantize').value)
      throw new UserError('The inputs changed while planning: plan again.');
    state.plan = plan;
    fillSummary($('#plan-summary'), [
      ['naming table', plan.arch ?? '—'],
      ['modules matched', `${exact(plan.modulesMatched)} of ${exact(adapter.info.modules.length)}`],
      ['base tensors changed', exact(plan.tensorsMerged)],
      ['output', plan.outputs.map((o) => `${o.path} (${bytes(o.size)})`).join(', ')],
      ['base bytes to read', bytes(plan.sourceBytes)],
      ...(plan.quantization
        ? [
            [
              'quantized',
              `${exact(plan.quantization.quantized.length)} weights (${plan.quantization.format}); ` +
                `${exact(plan.quantization.kept.length)} Linear weights kept` +
                (plan.quantization.kept.length
                  ? `: ${plan.quantization.kept
                      .slice(0, 3)
                      .map((k) => `${k.tensor} (${k.reason})`)
                      .join(', ')}` + (plan.quantization.kept.length > 3 ? ', …' : '')
                  : ''),
            ],
          ]
        : []),
    ]);
    $('#plan-matched').textContent = `(${exact(plan.modulesMatched)})`;
    $('#plan-table').tBodies[0].replaceChildren(
      ...plan.tensors.map((t) =>
        row([
          td(t.module ?? '(saved copy)', 'name'),
          td(t.tensor, 'name'),
          t.op,
          td(shape(t.shape), 'shape'),
          t.dtype === t.outDtype ? t.dtype : `${t.dtype} → ${t.outDtype}`,
        ]),
      ),
    );
    const rejected = plan.unmatchedKeys;
    $('#plan-rejected-count').textContent = `(${exact(rejected.length)})`;
    $('#rejected-list').replaceChildren(
      ...(rejected.length
        ? rejected.map((r) => {
            const li = el('li');
            li.append(el('code', r.tensor), `: ${r.reason}`);
            return li;
          })
        : [el('li', 'none: every adapter tensor is applied', { className: 'none' })]),
    );
    $('#plan-notes').replaceChildren(...plan.notes.map((n) => el('li', `note: ${n}`)));
    $('#plan-result').hidden = false;
    return `Plan: ${plan.modulesMatched} module(s) matched, ${rejected.length} key(s) rejected.`;
  });
  if (!ok) dropPlan('The plan failed (see its error under “Plan the merge”): fix the inputs and plan again to merge.');
}

// ---- merge ----

/**
 * `stream` as is, one chunk at a time, noting in `failure.merge` when reading it fails: a write that fails then
 * failed because the merge did (reported under Merge), any other failed write is the save's (under "Save with").
 */
function watchReads(stream, failure) {
  const reader = stream.getReader();
  return new ReadableStream(
    {
      async pull(controller) {
        let chunk;
        try {
          chunk = await reader.read();
        } catch (error) {
          failure.merge = true;
          throw error;
        }
        if (chunk.done) controller.close();
        else controller.enqueue(chunk.value);
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}

async function onMerge() {
  const { base, adapter } = state;
  if (!base || !adapter || !state.plan || state.controller) return;
  const section = $('#merge');
  const progress = $('#merge-progress');
  const status = $('#merge-status');
  const list = $('#merge-files');
  const controller = new AbortController();
  state.controller = controller; // also guards against a second click while the picker is open
  showError('#merge-error', null); // this click retries both the merge and the save
  showError('#save-error', null);
  let sink;
  try {
    // First, while the click still counts as a user gesture: the pickers require one.
    const choosing = chooseSink(
      $('#save-method').value,
      state.plan.outputs.map((o) => o.path),
    ); // the plan's files
    syncButtons();
    sink = await choosing;
  } catch (error) {
    showError('#save-error', error);
  }
  if (!sink) {
    state.controller = null;
    syncButtons();
    if (sink === null) status.textContent = 'Not saved: no destination was chosen.';
    return;
  }
  $('#cancel-btn').disabled = false;
  section.dataset.state = 'running';
  list.replaceChildren();
  progress.value = 0;
  status.textContent = 'Reading the headers and planning…';
  const started = performance.now();
  let frame = 0;
  let last = null;
  const paint = () => {
    frame = 0;
    const p = last;
    progress.max = Math.max(1, p.totalIn);
    progress.value = p.bytesIn;
    const seconds = (performance.now() - started) / 1000;
    // The ETA in the CLIs' words, by their rule (the core's progress line: remaining bytes at the average rate).
    status.textContent =
      `${bytes(p.bytesIn)} of ${bytes(p.totalIn)} read, ${bytes(p.bytesOut)} written` +
      (seconds > 0.5 ? ` · ${bytes(p.bytesIn / seconds)}/s` : '') +
      ` · ${progressTime(p.bytesIn, p.totalIn, seconds)}`;
  };
  let written = 0;
  const failure = { merge: false };
  const ok = await step('Merging', '#merge-error', async () => {
    const opener = base.opener(controller.signal);
    try {
      const files = mergeShards({
        base: mergeBase(base, opener),
        adapter: adapter.input,
        dtype: dtypeOption(),
        ...quantizeOptions(),
        allowPartial: $('#allow-partial').checked,
        signal: controller.signal,
        onProgress: (p) => {
          last = p;
          frame ||= requestAnimationFrame(paint);
        },
      });
      for await (const file of files) {
        const item = el('li', `${file.path} (${bytes(file.size)}) …`);
        list.append(item);
        try {
          await sink.write(file.path, file.size, watchReads(file.stream, failure), controller.signal);
        } catch (error) {
          throw failure.merge || controller.signal.aborted ? error : new SaveError(error);
        }
        item.textContent = `${file.path} (${bytes(file.size)}) ✓`;
        item.className = 'done';
        written += 1;
      }
    } finally {
      await opener.close();
    }
    if (last) paint();
    progress.value = progress.max;
    const seconds = (performance.now() - started) / 1000;
    status.textContent = `Merged in ${seconds.toFixed(2)} s: ${written} file(s) ${sink.describe}.`;
    return `Merge finished: ${written} file(s) ${sink.describe}.`;
  });
  cancelAnimationFrame(frame);
  state.controller = null;
  $('#cancel-btn').disabled = true;
  syncButtons();
  section.dataset.state = ok ? 'done' : controller.signal.aborted ? 'cancelled' : 'error';
  if (!ok && controller.signal.aborted) {
    // Cancelled: nothing is in progress any more, so the bar starts again from empty (no stale fraction or ETA).
    progress.max = 1;
    progress.value = 0;
  }
  if (!ok)
    status.textContent = controller.signal.aborted
      ? 'Cancelled: files not completed were discarded (downloads may show as failed).'
      : $('#save-error').hidden
        ? 'The merge failed: see the error under “Merge and save”.'
        : 'Not saved: see the error under “Save with”.';
}

// ---- wiring ----

function wire() {
  const params = new URLSearchParams(location.search);
  if (params.get('endpoint')) $('#endpoint').value = params.get('endpoint');
  for (const which of ['base', 'adapter']) {
    if (params.get(which)) $(`#${which}-repo`).value = params.get(which);
    if (params.get(`${which}_revision`)) $(`#${which}-revision`).value = params.get(`${which}_revision`);
    setMode(which, 'hub');
    for (const radio of document.querySelectorAll(`input[name="${which}-mode"]`))
      radio.addEventListener('change', () => {
        setMode(which, modeOf(which));
        invalidate();
      });
    for (const id of [`#${which}-repo`, `#${which}-revision`])
      $(id).addEventListener('input', () => {
        setMode(which, 'hub');
        invalidate();
      });
    const input = $(`#${which}-files`);
    input.addEventListener('change', () => setFiles(which, input.files));
    const zone = document.querySelector(`.drop[data-target="${which}"]`);
    zone.addEventListener('dragover', (e) => {
      e.preventDefault();
      e.dataTransfer.dropEffect = 'copy';
      zone.classList.add('over');
    });
    zone.addEventListener('dragleave', () => zone.classList.remove('over'));
    zone.addEventListener('drop', async (e) => {
      e.preventDefault();
      zone.classList.remove('over');
      setFiles(which, await droppedFiles(e.dataTransfer));
    });
  }
  for (const id of ['#endpoint', '#token']) $(id).addEventListener('input', invalidate);
  $('#hub-settings').addEventListener('submit', (e) => e.preventDefault());
  // A file dropped outside a zone must not navigate away from the page.
  for (const type of ['dragover', 'drop'])
    window.addEventListener(type, (e) => e.target.closest?.('.drop') || e.preventDefault());
  $('#inspect-btn').addEventListener('click', onInspect);
  $('#plan-btn').addEventListener('click', onPlan);
  $('#merge-btn').addEventListener('click', onMerge);
  $('#cancel-btn').addEventListener('click', () =>
    state.controller?.abort(new DOMException('Cancelled', 'AbortError')),
  );
  syncButtons();
  $('#table-which').addEventListener('change', renderTable);
  $('#table-filter').addEventListener('input', renderTable);
  // The plan depends on the output dtype (sizes, conversions): a new one needs a new plan.
  $('#merge-dtype').addEventListener('change', () => {
    if (state.plan) dropPlan('The output dtype changed: plan again (step 4) to merge.');
  });
  $('#merge-quantize').addEventListener('change', () => {
    if (state.plan) dropPlan('The quantization changed: plan again (step 4) to merge.');
  });
  $('#allow-partial').addEventListener('change', () => {
    if (state.plan) dropPlan('Whether to merge the rest changed: plan again (step 4) to merge.');
  });
}

wire();
// Load the WebAssembly early so the first click is quick; failures show up as an error there too.
init().then(
  () => (document.documentElement.dataset.ready = 'true'),
  (error) => showError('#inspect-error', error),
);
