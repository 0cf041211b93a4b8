// The page's Combine section: adapters from the Hub or local files with a weight each, a method, the plan, then the combined
// adapter with every module's relative error against the exact weighted sum, saved as the merge saves (a chosen
// folder, else a streamed download). Everything runs in this tab through combineAdapters (src/compose in WASM).
import { SafetensorsError, combineAdapters } from '../src/index.js';
import { chooseSink } from './save.js';

const $ = (selector) => document.querySelector(selector);
const OUTPUTS = ['adapter_model.safetensors', 'adapter_config.json'];

function showError(error) {
  const box = $('#combine-error');
  box.hidden = !error;
  box.textContent = !error
    ? ''
    : error instanceof SafetensorsError
      ? `${error.code}: ${error.message}`
      : (error.message ?? String(error));
}

/** One input row: repo id and revision, or local files (the adapter's weights and adapter_config.json), and weight. */
function addInputRow(repo = '', weight = 1) {
  const li = document.createElement('li');
  const field = (label, cls, type, value, extra = {}) => {
    const l = document.createElement('label');
    l.textContent = `${label} `;
    const input = document.createElement('input');
    Object.assign(input, { type, className: cls, value, spellcheck: false, ...extra });
    l.append(input);
    return l;
  };
  const remove = document.createElement('button');
  remove.type = 'button';
  remove.textContent = 'Remove';
  remove.className = 'combine-remove';
  remove.addEventListener('click', () => li.remove());
  const files = field('or files', 'combine-files', 'file', '', { multiple: true, accept: '.safetensors,.json' });
  li.append(
    field('Repo id', 'combine-repo', 'text', repo, { placeholder: 'someone/task-lora' }),
    field('Revision', 'combine-revision', 'text', '', { placeholder: 'main' }),
    files,
    field('Weight', 'combine-weight', 'number', String(weight), { step: 'any' }),
    remove,
  );
  $('#combine-inputs').append(li);
}

/**
 * A row's local files: one weights file (read by range, as a Blob) and its adapter_config.json (`configFile`, read
 * by readConfigs once the save picker is open); null when none were chosen.
 */
function localAdapter(row, n) {
  const files = [...row.querySelector('.combine-files').files];
  if (files.length === 0) return null;
  const weights = files.filter((f) => /\.safetensors$/i.test(f.name));
  if (weights.length !== 1)
    throw new Error(
      `adapter ${n}: choose one .safetensors weights file (and adapter_config.json), not ${weights.length}`,
    );
  const config = files.find((f) => f.name === 'adapter_config.json') ?? files.find((f) => /\.json$/i.test(f.name));
  return { weights: weights[0], weightsName: weights[0].name, configFile: config ?? null };
}

/** The inputs as combineAdapters takes them: a local adapter's config read into bytes. */
const readConfigs = (inputs) =>
  Promise.all(
    inputs.map(async ({ configFile, ...input }) =>
      configFile === undefined
        ? input
        : { ...input, config: configFile ? new Uint8Array(await configFile.arrayBuffer()) : null },
    ),
  );

/** The inputs and options as combineAdapters takes them; throws a readable error for a bad field. */
function request(dryRun) {
  const rows = [...document.querySelectorAll('#combine-inputs li')];
  const inputs = [];
  const weights = [];
  for (const [i, row] of rows.entries()) {
    const local = localAdapter(row, i + 1);
    const repo = row.querySelector('.combine-repo').value.trim();
    if (!local && !repo) throw new Error(`adapter ${i + 1}: give a repo id or choose its files`);
    const revision = row.querySelector('.combine-revision').value.trim();
    inputs.push(local ?? (revision ? { repo, revision } : { repo }));
    const weight = Number(row.querySelector('.combine-weight').value);
    if (!Number.isFinite(weight)) throw new Error(`adapter ${i + 1}: the weight is not a number`);
    weights.push(weight);
  }
  if (inputs.length === 0) throw new Error('add at least one adapter');
  const number = (selector) => ($(selector).value === '' ? undefined : Number($(selector).value));
  return {
    inputs,
    options: {
      weights,
      method: $('#combine-method').value,
      rank: number('#combine-rank'),
      density: number('#combine-density'),
      peftCompat: $('#combine-compat').checked,
      endpoint: $('#endpoint').value.trim() || undefined,
      token: $('#token').value || undefined,
      dryRun,
    },
  };
}

const percent = (x) => (x === null ? '' : `${(100 * x).toPrecision(4)}%`);
const sci = (x) => (x === null ? '' : x === 0 ? '0' : x.toExponential(2));

function render(result) {
  const summary = $('#combine-summary');
  summary.replaceChildren();
  const worst = Math.max(...result.modules.map((m) => m.relativeError ?? 0));
  for (const [k, v] of [
    ['method', `${result.method}${result.peftCompat ? ' (PEFT-compatible)' : ''}`],
    ['rank', result.rank],
    ['dtype', result.dtype],
    ['modules', result.modules.length],
    ['largest relative error', result.modules[0]?.relativeError === null ? 'after the combination' : sci(worst)],
  ]) {
    const dt = document.createElement('dt');
    dt.textContent = k;
    const dd = document.createElement('dd');
    dd.textContent = String(v);
    summary.append(dt, dd);
  }
  const body = $('#combine-table tbody');
  body.replaceChildren();
  for (const m of result.modules) {
    const tr = document.createElement('tr');
    for (const [text, cls] of [
      [m.path, 'name'],
      [m.inputs.map((i) => i + 1).join(', ')],
      [`${m.ranks.join('+')} → ${m.rank}`],
      [sci(m.relativeError), 'num'],
      [percent(m.keptEnergy), 'num'],
    ]) {
      const td = document.createElement('td');
      td.textContent = text;
      if (cls) td.className = cls;
      tr.append(td);
    }
    body.append(tr);
  }
  $('#combine-notes').replaceChildren(
    ...result.notes.map((n) => Object.assign(document.createElement('li'), { textContent: n })),
  );
  $('#combine-result').hidden = false;
}

async function run(dryRun) {
  showError(null);
  const section = $('#combine');
  section.dataset.state = 'busy';
  $('#combine-files').replaceChildren();
  try {
    const { inputs, options } = request(dryRun);
    // The picker first: it needs the click's user gesture, which an await would lose.
    const sink = dryRun ? null : await chooseSink('auto', OUTPUTS);
    if (!dryRun && sink === null) {
      section.dataset.state = 'idle';
      return;
    }
    const result = await combineAdapters(await readConfigs(inputs), options);
    render(result);
    for (const f of result.files) {
      await sink.write(f.name, f.bytes.length, new Blob([f.bytes]).stream());
      $('#combine-files').append(
        Object.assign(document.createElement('li'), {
          textContent: `${f.name}: ${f.bytes.length.toLocaleString('en-US')} bytes`,
        }),
      );
    }
    section.dataset.state = dryRun ? 'planned' : 'done';
  } catch (error) {
    showError(error);
    section.dataset.state = 'error';
  }
}

addInputRow();
addInputRow();
$('#combine-add').addEventListener('click', () => addInputRow());
$('#combine-plan-btn').addEventListener('click', () => run(true));
$('#combine-btn').addEventListener('click', () => run(false));
