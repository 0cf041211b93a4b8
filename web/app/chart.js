// The per-layer chart of an adapter's delta norms: one group of bars per layer index, one bar per series, where a
// series is a module path with its layer index removed (`transformer.h.0.attn.c_proj` and
// `transformer.h.0.mlp.c_proj` are the series `attn.c_proj` and `mlp.c_proj`). Paths without a layer index are
// series of their own, drawn in an "other" group. The bars and axes are drawn on a <canvas>; the legend is an
// HTML list, so it wraps on a narrow screen and its text can be read and searched. No library.
//
// The grouping and axis maths are pure functions (exported for tests); only drawNormChart and renderLegend touch
// the DOM, and only when called.

// Okabe-Ito: distinguishable with the common colour-vision deficiencies.
const PALETTE = ['#0072B2', '#E69F00', '#009E73', '#D55E00', '#CC79A7', '#56B4E9', '#F0E442', '#000000'];
export const BACKGROUND = '#ffffff';
export const seriesColor = (i) => PALETTE[i % PALETTE.length];

const isIndex = (segment) => /^\d+$/.test(segment);

/**
 * Where a module path sits in the chart: `model.layers.3.self_attn.q_proj` ->
 * {layer: 3, prefix: 'model.layers', name: 'self_attn.q_proj'}. The layer index is the first all-digit segment
 * after the first; later all-digit segments become `*` (MoE experts `mlp.experts.*.w1` form one series, combined
 * per layer). A path without a layer index is {layer: null, prefix: '', name: path}.
 */
export function seriesKey(path) {
  const parts = path.split('.');
  const i = parts.findIndex((p, k) => k > 0 && isIndex(p));
  if (i < 0 || i === parts.length - 1) return { layer: null, prefix: '', name: path };
  return {
    layer: Number(parts[i]),
    prefix: parts.slice(0, i).join('.'),
    name: parts
      .slice(i + 1)
      .map((p) => (isIndex(p) ? '*' : p))
      .join('.'),
  };
}

/**
 * Legend labels for series [{prefix, name, layered}]: the name alone where it is unique; where layer stacks with
 * different prefixes share a name (an encoder's and a decoder's `SelfAttention.q`), the part of the prefix that
 * tells them apart is kept in front of it. A layerless path that equals a layered series' label gets " (other)".
 */
export function seriesLabels(series) {
  const byName = new Map();
  for (const s of series) if (s.layered) byName.set(s.name, [...(byName.get(s.name) ?? []), s.prefix]);
  const labels = series.map((s) => {
    const prefixes = s.layered ? byName.get(s.name) : [];
    if (prefixes.length < 2) return s.name;
    const split = prefixes.map((p) => p.split('.'));
    let common = 0;
    while (split.every((p) => common < p.length - 1 && p[common] === split[0][common])) common += 1;
    return [...s.prefix.split('.').slice(common), s.name].join('.');
  });
  const layeredLabels = new Set(labels.filter((_, i) => series[i].layered));
  return labels.map((l, i) => (!series[i].layered && layeredLabels.has(l) ? `${l} (other)` : l));
}

/**
 * Groups modules ({path, deltaNorm}) for the chart: {layers: [index...] ascending, then null for "other" if any,
 * series: [{label, layered}] in order of first appearance, value(layer, seriesIndex) -> number | null,
 * slots(layer) -> the series indices drawn in that layer's group, max: the largest value drawn, modules: count}.
 * Two modules of one series in one layer (MoE experts, or two stacks sharing a label) are combined as √(a² + b²),
 * the Frobenius norm of their deltas taken together.
 */
export function groupNorms(modules) {
  const keys = new Map(); // prefix + name -> series index
  const series = [];
  const cells = new Map(); // layer -> Map(series index -> value)
  for (const m of modules) {
    const { layer, prefix, name } = seriesKey(m.path);
    const id = `${layer === null ? 'other' : 'layer'}\u0000${prefix}\u0000${name}`;
    if (!keys.has(id)) {
      keys.set(id, series.length);
      series.push({ prefix, name, layered: layer !== null });
    }
    const k = keys.get(id);
    if (!cells.has(layer)) cells.set(layer, new Map());
    const cell = cells.get(layer);
    cell.set(k, Math.hypot(cell.get(k) ?? 0, Number.isFinite(m.deltaNorm) ? m.deltaNorm : 0));
  }
  const labels = seriesLabels(series);
  // Series with one label are drawn as one bar: combine their cells.
  const labelIndex = new Map();
  const merged = [];
  const remap = series.map((s, i) => {
    if (!labelIndex.has(labels[i])) {
      labelIndex.set(labels[i], merged.length);
      merged.push({ label: labels[i], layered: s.layered });
    }
    return labelIndex.get(labels[i]);
  });
  const values = new Map();
  let max = 0;
  for (const [layer, cell] of cells) {
    const out = new Map();
    for (const [k, v] of cell) out.set(remap[k], Math.hypot(out.get(remap[k]) ?? 0, v));
    for (const v of out.values()) max = Math.max(max, v);
    values.set(layer, out);
  }
  const layers = [...cells.keys()].sort((a, b) => (a === null ? 1 : b === null ? -1 : a - b));
  const layered = merged.flatMap((s, i) => (s.layered ? [i] : []));
  const other = merged.flatMap((s, i) => (s.layered ? [] : [i]));
  return {
    layers,
    series: merged,
    value: (layer, k) => values.get(layer)?.get(k) ?? null,
    slots: (layer) => (layer === null ? other : layered),
    max,
    modules: modules.length,
  };
}

/** A round step (1, 2 or 5 × 10^n) for about `count` ticks from 0 up to `max` (> 0). */
export function niceStep(max, count = 5) {
  const raw = max / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  return (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * mag;
}

/** The y axis for values up to `max` (> 0): {step, top, ticks}, top the first round tick at or above max. */
export function yAxis(max, count = 5) {
  const step = niceStep(max, count);
  const round = (v) => Number(v.toPrecision(12)); // 3 × 0.1 is 0.30000000000000004
  const n = Math.max(1, Math.ceil(round(max / step)));
  const ticks = Array.from({ length: n + 1 }, (_, i) => round(i * step));
  return { step, top: ticks[n], ticks };
}

export const formatTick = (v, step) =>
  step >= 1 ? v.toFixed(0) : v.toFixed(Math.min(6, Math.ceil(-Math.log10(step))));

/** One sentence for the canvas's accessible description. */
export function describeChart(chart, modules) {
  if (!modules.length) return 'The adapter has no LoRA modules.';
  if (!(chart.max > 0)) return 'Every module’s delta is zero.';
  let peak = modules[0];
  for (const m of modules) if ((m.deltaNorm ?? 0) > (peak.deltaNorm ?? 0)) peak = m;
  const numbered = chart.layers.filter((l) => l !== null).length;
  const other = chart.layers.includes(null) ? ' and an “other” group for modules without a layer index' : '';
  const names = chart.series.map((s) => s.label).join(', ');
  return (
    `Bar chart of ‖s·B·A‖F for ${modules.length} modules in ${chart.series.length} series (${names}) over ` +
    `${numbered} layer(s)${other}; the largest is ${peak.path} at ${peak.deltaNorm.toPrecision(4)}.`
  );
}

/** Fills `list` (a <ul>) with one item per series: a colour swatch and the label. */
export function renderLegend(list, chart) {
  list.replaceChildren(
    ...chart.series.map((s, i) => {
      const item = document.createElement('li');
      item.dataset.series = s.label;
      const swatch = document.createElement('span');
      swatch.className = 'swatch';
      swatch.style.background = seriesColor(i);
      item.append(swatch, s.label);
      return item;
    }),
  );
}

/**
 * Draws `chart` (groupNorms's result) into `canvas` at its CSS size (sharp on high-DPI screens), so calling it
 * again after a resize redraws it at the new width.
 * @param {HTMLCanvasElement} canvas
 */
export function drawNormChart(canvas, chart) {
  const dpr = window.devicePixelRatio || 1;
  const width = Math.max(160, canvas.clientWidth);
  const height = Math.max(160, canvas.clientHeight);
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = BACKGROUND;
  ctx.fillRect(0, 0, width, height);
  ctx.font = '12px system-ui, sans-serif';
  ctx.textBaseline = 'middle';

  const { layers, value, slots, max } = chart;
  if (!(max > 0)) {
    ctx.fillStyle = '#57606a';
    ctx.textAlign = 'center';
    ctx.fillText(chart.modules ? 'every delta is zero' : 'no LoRA modules', width / 2, height / 2);
    return;
  }

  const { step, top, ticks } = yAxis(max, height < 240 ? 4 : 5);
  const left = 14 + 8 + Math.max(...ticks.map((v) => ctx.measureText(formatTick(v, step)).width)) + 8;
  const plot = { x: left, y: 10, w: width - left - 10, h: height - 10 - 44 };

  // Y grid, ticks and title.
  ctx.strokeStyle = '#d0d7de';
  ctx.lineWidth = 1;
  ctx.textAlign = 'right';
  for (const v of ticks) {
    const y = Math.round(plot.y + plot.h - (v / top) * plot.h) + 0.5;
    ctx.beginPath();
    ctx.moveTo(plot.x, y);
    ctx.lineTo(plot.x + plot.w, y);
    ctx.stroke();
    ctx.fillStyle = '#57606a';
    ctx.fillText(formatTick(v, step), plot.x - 6, y);
  }
  ctx.save();
  ctx.translate(12, plot.y + plot.h / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.fillStyle = '#1b1f24';
  const title = '‖s·B·A‖';
  const titleW = ctx.measureText(title).width;
  ctx.textAlign = 'left';
  ctx.fillText(title, -(titleW + 6) / 2, 0);
  ctx.font = '9px system-ui, sans-serif';
  ctx.fillText('F', (titleW - 6) / 2, 4); // the subscript
  ctx.restore();
  ctx.font = '12px system-ui, sans-serif';

  // Bars: one group per layer, one slot per series drawn there (the "other" group has its own series).
  const groupW = plot.w / layers.length;
  const widest = Math.max(...layers.map((l) => slots(l).length));
  const barW = Math.min(40, (groupW * 0.8) / widest); // thin bars for many layers, at most 40 px wide
  layers.forEach((layer, g) => {
    const own = slots(layer);
    const gx = plot.x + g * groupW + (groupW - barW * own.length) / 2;
    own.forEach((k, slot) => {
      const v = value(layer, k);
      if (v === null) return;
      const h = (v / top) * plot.h;
      ctx.fillStyle = seriesColor(k);
      ctx.fillRect(gx + slot * barW, plot.y + plot.h - h, Math.max(1, barW - (barW > 4 ? 1 : 0)), h);
    });
  });

  // X axis: the baseline, layer labels (thinned to fit) and title.
  ctx.strokeStyle = '#57606a';
  ctx.beginPath();
  ctx.moveTo(plot.x, plot.y + plot.h + 0.5);
  ctx.lineTo(plot.x + plot.w, plot.y + plot.h + 0.5);
  ctx.stroke();
  ctx.textAlign = 'center';
  ctx.fillStyle = '#57606a';
  const label = (l) => (l === null ? 'other' : String(l));
  const labelW = Math.max(...layers.map((l) => ctx.measureText(label(l)).width)) + 8;
  const every = Math.max(1, Math.ceil(labelW / groupW));
  const last = layers.length - 1;
  const hasOther = layers[last] === null; // always labelled, so the numbered labels keep clear of it
  layers.forEach((layer, g) => {
    if (layer !== null && (g % every || (hasOther && last - g < every))) return;
    ctx.fillText(label(layer), plot.x + (g + 0.5) * groupW, plot.y + plot.h + 12);
  });
  ctx.fillStyle = '#1b1f24';
  ctx.fillText('layer', plot.x + plot.w / 2, plot.y + plot.h + 32);
}
