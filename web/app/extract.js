// The page's Extract section: a base model and its fine-tune (Hub repos read by Range, or local files read by
// Blob.slice) into a LoRA adapter, each module the truncated SVD of its weight delta (extractAdapter: src/compose
// in WASM). Plan shows the modules from the headers alone; Extract reads the weights and shows each module's rank,
// kept energy and relative error; the files are saved as the merge saves them.
import { SafetensorsError, extractAdapter } from '../src/index.js';
import { chooseSink } from './save.js';

const $ = (selector) => document.querySelector(selector);
const OUTPUTS = ['adapter_model.safetensors', 'adapter_config.json'];
let running = null; // the AbortController of the extraction under way

function showError(error) {
  const box = $('#extract-error');
  box.hidden = !error;
  box.textContent = !error ? '' : error instanceof SafetensorsError ? `${error.code}: ${error.message}` : (error.message ?? String(error));
}

/** A model as extractAdapter takes it: local files (a MergeBase over the Files) when chosen, else the Hub repo. */
async function modelOf(which) {
  const box = document.querySelector(`.extract-model[data-model="${which}"]`);
  const files = [...box.querySelector('.extract-files').files];
  if (files.length) {
    const shards = files.filter((f) => /\.safetensors$/i.test(f.name));
    const named = (name) => files.find((f) => f.name === name);
    const bytes = async (f) => (f ? new Uint8Array(await f.arrayBuffer()) : null);
    const index = named('model.safetensors.index.json');
    return {
      index: await bytes(index),
      config: await bytes(named('config.json')),
      // One file is the model whatever its name; the index names its shards (the core checks them).
      open: (name) => {
        const file = index ? named(name) : shards.length === 1 ? shards[0] : null;
        if (!file) throw new Error(index ? `${name} (listed in the index) was not chosen` : 'choose one .safetensors file, or the shards and their index');
        return file;
      },
    };
  }
  const repo = box.querySelector('.extract-repo').value.trim();
  if (!repo) throw new Error(`${which === 'base' ? 'the base model' : 'the fine-tuned model'}: give a repo id or choose files`);
  const revision = box.querySelector('.extract-revision').value.trim();
  return revision ? { repo, revision } : { repo };
}

async function request(dryRun) {
  const number = (selector) => ($(selector).value === '' ? undefined : $(selector).value);
  return {
    base: await modelOf('base'),
    tuned: await modelOf('tuned'),
    rank: number('#extract-rank'),
    energy: number('#extract-energy'),
    maxRank: number('#extract-max-rank'),
    embeddings: $('#extract-embeddings').value,
    dtype: $('#extract-dtype').value || undefined,
    endpoint: $('#endpoint').value.trim() || undefined,
    token: $('#token').value || undefined,
    dryRun,
  };
}

const percent = (x) => (x === undefined ? '' : `${(100 * x).toFixed(4)}%`);
const sci = (x) => (x === undefined ? '' : x === 0 ? '0' : x.toExponential(2));

function render({ summary }, dryRun) {
  const decomposed = summary.modules.filter((m) => m.rank !== undefined);
  const worst = Math.max(0, ...decomposed.map((m) => m.relativeError));
  const entries = [['dtype', summary.dtype], ['embeddings', summary.embeddings], ['modules planned', summary.modules.length]];
  if (!dryRun) entries.push(['r', summary.r], ['decomposed', summary.decomposed], ['saved', summary.saved], ['unchanged (dropped)', summary.unchanged], ['worst relative error', sci(worst)]);
  const dl = $('#extract-summary');
  dl.replaceChildren();
  for (const [k, v] of entries) dl.append(Object.assign(document.createElement('dt'), { textContent: k }), Object.assign(document.createElement('dd'), { textContent: String(v) }));
  const body = $('#extract-table tbody');
  body.replaceChildren();
  for (const m of summary.modules) {
    if (!dryRun && !m.changed) continue;
    const tr = document.createElement('tr');
    const rank = m.rank !== undefined ? String(m.rank) : m.maxRank !== undefined ? `≤ ${m.maxRank}` : '';
    for (const [text, cls] of [[m.path, 'name'], [m.kind], [rank], [percent(m.energyKept), 'num'], [sci(m.relativeError), 'num']]) {
      const td = document.createElement('td');
      td.textContent = text;
      if (cls) td.className = cls;
      tr.append(td);
    }
    body.append(tr);
  }
  const notes = [...summary.notes];
  if (summary.leftOut.length) notes.push(`left out (not decomposed, not read): ${summary.leftOut.join(', ')}`);
  $('#extract-notes').replaceChildren(...notes.map((n) => Object.assign(document.createElement('li'), { textContent: n })));
  $('#extract-result').hidden = false;
}

async function run(dryRun) {
  showError(null);
  const section = $('#extract');
  section.dataset.state = 'busy';
  $('#extract-files').replaceChildren();
  const progress = $('#extract-progress');
  const controller = new AbortController();
  running = controller;
  $('#extract-cancel').disabled = false;
  try {
    const options = await request(dryRun);
    // The picker first: it needs the click's user gesture, which a long await would lose.
    const sink = dryRun ? null : await chooseSink('auto', OUTPUTS);
    if (!dryRun && sink === null) {
      section.dataset.state = 'idle';
      return;
    }
    progress.hidden = dryRun;
    progress.value = 0;
    const result = await extractAdapter({
      ...options,
      signal: controller.signal,
      onProgress: ({ bytesIn, totalIn }) => (progress.value = totalIn ? bytesIn / totalIn : 1),
    });
    render(result, dryRun);
    for (const f of result.files) {
      await sink.write(f.path, f.size, f.stream, controller.signal);
      $('#extract-files').append(Object.assign(document.createElement('li'), { textContent: `${f.path}: ${f.size.toLocaleString('en-US')} bytes` }));
    }
    section.dataset.state = dryRun ? 'planned' : 'done';
  } catch (error) {
    showError(error);
    section.dataset.state = 'error';
  } finally {
    running = null;
    $('#extract-cancel').disabled = true;
  }
}

$('#extract-plan-btn').addEventListener('click', () => run(true));
$('#extract-btn').addEventListener('click', () => run(false));
$('#extract-cancel').addEventListener('click', () => running?.abort(new DOMException('Cancelled', 'AbortError')));
