// The per-layer chart of an adapter's delta norms, drawn on a <canvas>: one group per layer index, one bar per
// module type (q_proj, v_proj…), a y axis with round ticks, axis titles and a legend. No library.

// Okabe-Ito: distinguishable with the common colour-vision deficiencies.
const PALETTE = ['#0072B2', '#E69F00', '#009E73', '#D55E00', '#CC79A7', '#56B4E9', '#F0E442', '#000000'];
export const BACKGROUND = '#ffffff';

/** The layer index and module type of a module path: `model.layers.3.self_attn.q_proj` -> {layer: 3, type: 'q_proj'}. */
export function moduleKey(path) {
  const parts = path.split('.');
  const type = parts[parts.length - 1];
  const i = parts.findIndex((p, k) => /^\d+$/.test(p) && k > 0);
  return { layer: i >= 0 ? Number(parts[i]) : null, type };
}

/** Groups modules ({path, delta_norm}) by layer: {layers: [index|null], types: [name], value(layer, type)}. */
export function groupNorms(modules) {
  const types = [];
  const byLayer = new Map();
  for (const m of modules) {
    const { layer, type } = moduleKey(m.path);
    if (!types.includes(type)) types.push(type);
    if (!byLayer.has(layer)) byLayer.set(layer, new Map());
    const cell = byLayer.get(layer);
    // Two modules of one type in one layer (rare: e.g. two attention blocks) are combined as √(a² + b²).
    cell.set(type, Math.hypot(cell.get(type) ?? 0, m.delta_norm ?? 0));
  }
  const layers = [...byLayer.keys()].sort((a, b) => (a === null ? 1 : b === null ? -1 : a - b));
  return { layers, types, value: (layer, type) => byLayer.get(layer)?.get(type) ?? null };
}

/** A round step for about `count` ticks up to `max`. */
function niceStep(max, count) {
  const raw = max / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  return (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * mag;
}

const formatTick = (v, step) => (step >= 1 ? v.toFixed(0) : v.toFixed(Math.min(6, Math.ceil(-Math.log10(step)))));

/**
 * Draws the chart into `canvas` at its CSS size (sharp on high-DPI screens). Returns a one-sentence summary for
 * the canvas's accessible description.
 * @param {HTMLCanvasElement} canvas
 * @param {{path: string, delta_norm: number}[]} modules
 */
export function drawNormChart(canvas, modules) {
  const { layers, types, value } = groupNorms(modules);
  const dpr = window.devicePixelRatio || 1;
  const width = Math.max(320, canvas.clientWidth);
  const height = Math.max(200, canvas.clientHeight);
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = BACKGROUND;
  ctx.fillRect(0, 0, width, height);
  ctx.font = '12px system-ui, sans-serif';
  ctx.textBaseline = 'middle';

  let max = 0;
  for (const m of modules) max = Math.max(max, m.delta_norm ?? 0);
  if (!modules.length || !(max > 0)) {
    ctx.fillStyle = '#57606a';
    ctx.textAlign = 'center';
    ctx.fillText(modules.length ? 'every delta is zero' : 'no LoRA modules', width / 2, height / 2);
    return modules.length ? 'Every module’s delta is zero.' : 'The adapter has no LoRA modules.';
  }

  // Legend along the top, wrapping as needed.
  const legendRows = [];
  let row = [];
  let x = 0;
  for (const t of types) {
    const w = 18 + ctx.measureText(t).width + 16;
    if (x + w > width - 70 && row.length) {
      legendRows.push(row);
      row = [];
      x = 0;
    }
    row.push({ t, x: x, w });
    x += w;
  }
  legendRows.push(row);
  const legendHeight = legendRows.length * 18 + 6;

  const step = niceStep(max, 5);
  const top = Math.ceil(max / step) * step;
  const left = 14 + 8 + Math.max(...[0, step, top].map((v) => ctx.measureText(formatTick(v, step)).width)) + 8;
  const plot = { x: left, y: 8 + legendHeight, w: width - left - 12, h: height - (8 + legendHeight) - 44 };

  // Legend.
  ctx.textAlign = 'left';
  legendRows.forEach((r, i) => {
    const y = 12 + i * 18;
    const offset = plot.x + plot.w - (r[r.length - 1].x + r[r.length - 1].w);
    for (const { t, x: lx } of r) {
      ctx.fillStyle = PALETTE[types.indexOf(t) % PALETTE.length];
      ctx.fillRect(offset + lx, y - 5, 12, 10);
      ctx.fillStyle = '#1b1f24';
      ctx.fillText(t, offset + lx + 16, y);
    }
  });

  // Y grid, ticks and title.
  ctx.strokeStyle = '#d0d7de';
  ctx.lineWidth = 1;
  ctx.textAlign = 'right';
  for (let v = 0; v <= top + step / 2; v += step) {
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

  // Bars: one group per layer, one slot per type.
  const groupW = plot.w / layers.length;
  const barW = Math.min(40, (groupW * 0.8) / types.length); // thin bars for many layers, at most 40 px wide
  const inner = barW * types.length;
  layers.forEach((layer, g) => {
    const gx = plot.x + g * groupW + (groupW - inner) / 2;
    types.forEach((t, k) => {
      const v = value(layer, t);
      if (v === null) return;
      const h = (v / top) * plot.h;
      ctx.fillStyle = PALETTE[k % PALETTE.length];
      ctx.fillRect(gx + k * barW, plot.y + plot.h - h, Math.max(1, barW - (barW > 4 ? 1 : 0)), h);
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
  const labelW = Math.max(...layers.map((l) => ctx.measureText(l === null ? 'other' : String(l)).width)) + 8;
  const every = Math.max(1, Math.ceil(labelW / groupW));
  layers.forEach((layer, g) => {
    if (g % every) return;
    ctx.fillText(layer === null ? 'other' : String(layer), plot.x + (g + 0.5) * groupW, plot.y + plot.h + 12);
  });
  ctx.fillStyle = '#1b1f24';
  ctx.fillText('layer', plot.x + plot.w / 2, plot.y + plot.h + 32);

  const numbered = layers.filter((l) => l !== null);
  let peak = modules[0];
  for (const m of modules) if ((m.delta_norm ?? 0) > (peak.delta_norm ?? 0)) peak = m;
  return `Bar chart of ‖s·B·A‖F for ${modules.length} modules (${types.join(', ')}) over ${numbered.length} layer(s); ` +
    `the largest is ${peak.path} at ${peak.delta_norm.toPrecision(4)}.`;
}
