// The page's Extract section: a base model and its fine-tune (Hub repos read by Range, or local files read by
// Blob.slice) into a LoRA adapter, each module the truncated SVD of its weight delta (extractAdapter: src/compose
// in WASM). Plan shows the modules from the headers alone; Extract reads the weights and shows each module's rank,
// kept energy and relative error; the files are saved as the merge saves them.
import { extractAdapter } from '../src/index.js';
import { wireJob } from './adapter-job.js';
import { pickedModel } from './model-picker.js';

const $ = (selector) => document.querySelector(selector);
const modelOf = (which) =>
  pickedModel($(`.extract-model[data-model="${which}"]`), which === 'base' ? 'the base model' : 'the fine-tuned model');

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
  const entries = [
    ['dtype', summary.dtype],
    ['embeddings', summary.embeddings],
    ['modules planned', summary.modules.length],
  ];
  if (!dryRun)
    entries.push(
      ['r', summary.r],
      ['decomposed', summary.decomposed],
      ['saved', summary.saved],
      ['unchanged (dropped)', summary.unchanged],
      ['worst relative error', sci(worst)],
    );
  const dl = $('#extract-summary');
  dl.replaceChildren();
  for (const [k, v] of entries)
    dl.append(
      Object.assign(document.createElement('dt'), { textContent: k }),
      Object.assign(document.createElement('dd'), { textContent: String(v) }),
    );
  const body = $('#extract-table tbody');
  body.replaceChildren();
  for (const m of summary.modules) {
    if (!dryRun && !m.changed) continue;
    const tr = document.createElement('tr');
    const rank = m.rank !== undefined ? String(m.rank) : m.maxRank !== undefined ? `≤ ${m.maxRank}` : '';
    for (const [text, cls] of [
      [m.path, 'name'],
      [m.kind],
      [rank],
      [percent(m.energyKept), 'num'],
      [sci(m.relativeError), 'num'],
    ]) {
      const td = document.createElement('td');
      td.textContent = text;
      if (cls) td.className = cls;
      tr.append(td);
    }
    body.append(tr);
  }
  const notes = [...summary.notes];
  if (summary.leftOut.length) notes.push(`left out (not decomposed, not read): ${summary.leftOut.join(', ')}`);
  $('#extract-notes').replaceChildren(
    ...notes.map((n) => Object.assign(document.createElement('li'), { textContent: n })),
  );
  $('#extract-result').hidden = false;
}

wireJob('extract', { request, call: extractAdapter, render });
