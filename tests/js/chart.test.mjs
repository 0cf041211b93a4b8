// The web page's chart maths (web/app/chart.js), in Node: series are module paths without their layer index,
// layerless paths form an "other" group, and the y axis covers exactly the values drawn. Importing chart.js must
// not need a browser (it touches the DOM only when drawing).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { describeChart, groupNorms, niceStep, seriesKey, seriesLabels, yAxis } from '../../web/app/chart.js';

const norms = (entries) => entries.map(([path, deltaNorm]) => ({ path, deltaNorm }));
const labels = (chart) => chart.series.map((s) => s.label);

test('seriesKey: the layer index segment is removed, with what comes before it', () => {
  assert.deepEqual(seriesKey('model.layers.3.self_attn.q_proj'), {
    layer: 3,
    prefix: 'model.layers',
    name: 'self_attn.q_proj',
  });
  assert.deepEqual(seriesKey('transformer.h.0.attn.c_proj'), {
    layer: 0,
    prefix: 'transformer.h',
    name: 'attn.c_proj',
  });
  assert.deepEqual(seriesKey('transformer.h.11.mlp.c_proj'), {
    layer: 11,
    prefix: 'transformer.h',
    name: 'mlp.c_proj',
  });
  // Later indices (MoE experts) become a wildcard: one series per layer, not one per expert.
  assert.deepEqual(seriesKey('model.layers.2.block_sparse_moe.experts.7.w1'), {
    layer: 2,
    prefix: 'model.layers',
    name: 'block_sparse_moe.experts.*.w1',
  });
  // No layer index (or only a trailing one, or a leading one): the whole path, layerless.
  for (const path of ['lm_head', 'model.embed_tokens', 'model.mlp.0', '0.weight_like'])
    assert.deepEqual(seriesKey(path), { layer: null, prefix: '', name: path });
});

test('GPT-2: attn.c_proj and mlp.c_proj are two series, one bar per layer each', () => {
  const modules = norms([
    ['transformer.h.0.attn.c_attn', 1],
    ['transformer.h.0.attn.c_proj', 2],
    ['transformer.h.0.mlp.c_fc', 3],
    ['transformer.h.0.mlp.c_proj', 4],
    ['transformer.h.1.attn.c_attn', 5],
    ['transformer.h.1.attn.c_proj', 6],
    ['transformer.h.1.mlp.c_fc', 7],
    ['transformer.h.1.mlp.c_proj', 8],
  ]);
  const chart = groupNorms(modules);
  assert.deepEqual(labels(chart), ['attn.c_attn', 'attn.c_proj', 'mlp.c_fc', 'mlp.c_proj']);
  assert.deepEqual(chart.layers, [0, 1]);
  assert.deepEqual(chart.slots(0), [0, 1, 2, 3]);
  assert.equal(chart.value(0, 1), 2);
  assert.equal(chart.value(0, 3), 4);
  assert.equal(chart.value(1, 3), 8);
  assert.equal(chart.max, 8);
  assert.match(
    describeChart(chart, modules),
    /8 modules in 4 series \(attn\.c_attn, attn\.c_proj, mlp\.c_fc, mlp\.c_proj\) over 2 layer\(s\); the largest is transformer\.h\.1\.mlp\.c_proj at 8\.000/,
  );
});

test('layerless paths are their own series in an "other" group, after the layers', () => {
  const modules = norms([
    ['lm_head', 0.5],
    ['model.layers.1.self_attn.q_proj', 1],
    ['model.layers.0.self_attn.q_proj', 2],
    ['model.embed_tokens', 0.25],
  ]);
  const chart = groupNorms(modules);
  assert.deepEqual(labels(chart), ['lm_head', 'self_attn.q_proj', 'model.embed_tokens']);
  assert.deepEqual(chart.layers, [0, 1, null]);
  assert.deepEqual(chart.slots(0), [1]); // the layer groups hold the layered series only
  assert.deepEqual(chart.slots(null), [0, 2]);
  assert.equal(chart.value(null, 0), 0.5);
  assert.equal(chart.value(null, 1), null);
  assert.equal(chart.value(0, 1), 2);
  assert.match(describeChart(chart, modules), /over 2 layer\(s\) and an “other” group/);
});

test('the y axis covers the combined values the bars show, not the raw modules', () => {
  // Eight experts of 3 in one layer: the bar is √(8·9) ≈ 8.49, above any single module.
  const modules = norms(Array.from({ length: 8 }, (_, e) => [`model.layers.0.mlp.experts.${e}.w1`, 3]));
  modules.push({ path: 'model.layers.1.mlp.experts.0.w1', deltaNorm: 1 });
  const chart = groupNorms(modules);
  assert.deepEqual(labels(chart), ['mlp.experts.*.w1']);
  assert.ok(Math.abs(chart.value(0, 0) - Math.sqrt(72)) < 1e-12);
  assert.equal(chart.max, chart.value(0, 0));
  const axis = yAxis(chart.max);
  assert.ok(axis.top >= chart.max, `${axis.top} < ${chart.max}`);
  assert.ok(axis.top - axis.step < chart.max, 'the top is the first tick at or above the largest bar');
  assert.deepEqual(axis, { step: 2, top: 10, ticks: [0, 2, 4, 6, 8, 10] });
});

test('stacks sharing a series name keep the part of the prefix that tells them apart', () => {
  const modules = norms([
    ['encoder.block.0.layer.0.SelfAttention.q', 1],
    ['decoder.block.0.layer.0.SelfAttention.q', 2],
    ['decoder.block.0.layer.1.EncDecAttention.q', 3],
    ['model.vision.layers.0.q', 1],
    ['model.text.layers.0.q', 1],
  ]);
  assert.deepEqual(labels(groupNorms(modules)), [
    'encoder.block.layer.*.SelfAttention.q',
    'decoder.block.layer.*.SelfAttention.q',
    'layer.*.EncDecAttention.q',
    'vision.layers.q',
    'text.layers.q',
  ]);
  // A layerless path equal to a layered label is marked, so two legend entries never read the same.
  assert.deepEqual(
    seriesLabels([
      { prefix: 'model.layers', name: 'mlp', layered: true },
      { prefix: '', name: 'mlp', layered: false },
    ]),
    ['mlp', 'mlp (other)'],
  );
});

test('yAxis: round steps, tops that fit, no floating-point fuzz', () => {
  assert.equal(niceStep(1, 5), 0.2);
  assert.equal(niceStep(0.37, 5), 0.1);
  assert.equal(niceStep(730, 5), 200);
  assert.deepEqual(yAxis(0.3), { step: 0.1, top: 0.3, ticks: [0, 0.1, 0.2, 0.3] });
  assert.deepEqual(yAxis(0.9377), { step: 0.2, top: 1, ticks: [0, 0.2, 0.4, 0.6, 0.8, 1] });
  for (const max of [1e-7, 0.0123, 0.5, 1, 7.3, 42, 999, 1234567]) {
    const { step, top, ticks } = yAxis(max);
    assert.ok(top >= max && top - step < max * (1 + 1e-9), `max ${max}: top ${top}, step ${step}`);
    assert.equal(ticks[0], 0);
    assert.equal(ticks.at(-1), top);
    assert.ok(ticks.length >= 2 && ticks.length <= 11, `${ticks.length} ticks for ${max}`);
  }
});

test('empty and all-zero adapters', () => {
  assert.equal(describeChart(groupNorms([]), []), 'The adapter has no LoRA modules.');
  const zero = norms([['model.layers.0.q_proj', 0]]);
  const chart = groupNorms(zero);
  assert.equal(chart.max, 0);
  assert.equal(describeChart(chart, zero), 'Every module’s delta is zero.');
});
