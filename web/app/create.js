// The page's Create section: a fresh LoRA adapter for a base model (a Hub repo read by Range, or local files read by
// Blob.slice), as createAdapter makes it (src/compose in WASM, the bytes `peft-bridge create` writes). Every option
// goes to the core as typed, and the core checks and words it: Plan shows its `create --dry-run` text, Create the
// plan it made and the files saved (made a tensor at a time as they are written).
import { createAdapter } from '../src/index.js';
import { wireJob } from './adapter-job.js';
import { pickedModel } from './model-picker.js';

const $ = (selector) => document.querySelector(selector);

async function request(dryRun) {
  const given = (selector) => ($(selector).value === '' ? undefined : $(selector).value);
  return {
    base: await pickedModel($('.create-model'), 'the base model'),
    targetModules: given('#create-targets'),
    r: given('#create-r'),
    alpha: given('#create-alpha'),
    rslora: $('#create-rslora').checked,
    dora: $('#create-dora').checked,
    init: $('#create-init').value,
    seed: given('#create-seed'),
    dtype: given('#create-dtype'),
    endpoint: $('#endpoint').value.trim() || undefined,
    token: $('#token').value || undefined,
    dryRun,
  };
}

function render({ text }) {
  $('#create-text').textContent = text;
  $('#create-result').hidden = false;
}

wireJob('create', { request, call: createAdapter, render, progressOfSaving: true });
