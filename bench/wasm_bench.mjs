#!/usr/bin/env node
// WASM throughput benchmark for the public JS API (web/src/index.js), under Node.
//
//   node bench/wasm_bench.mjs [--mib=256] [--runs=5] [--header-tensors=200000] [--json]
//
// Every figure is compared with a copy baseline measured in the same run (the machine is noisy):
//   baseline   memory.copy inside a WebAssembly memory (a hand-assembled module, bulk memory), 128 MiB,
//              src and dst page-aligned; and Uint8Array.prototype.set between two 128 MiB arrays.
//              copied GB/s = bytes copied / s.
//   read       readSafetensors() over a synthetic file (default 256 MiB of BF16 data in 2,048 tensors)
//              given as 1 MiB Uint8Array chunks; every data event's bytes (a copy out of the heap) are
//              touched. file GB/s = file bytes / s; ratio = file GB/s / memory.copy copied GB/s
//              (1.0 = as fast as copying the file once; the API copies each byte in and out of the heap).
//   convert    convert(chunks, {dtype}) BF16 -> F32 and F32 -> BF16 over the same kind of file, output
//              stream read and discarded. in GB/s = source bytes / s; traffic GB/s = (source + output) / s;
//              ratio = traffic / (2 x memory.copy copied GB/s), the memory-bound ratio the native
//              benchmarks use. Target: >= 1.5 GB/s of input.
//   inspect    inspect() of a 200,000-tensor MoE header (~26 MB of JSON) fed as 1 MiB chunks.
// Memory: peak RSS over each phase (process.memoryUsage.rss() sampled in the loops and by a 5 ms timer)
// minus the RSS before it, and the WebAssembly memory size after it (it only grows). The wasm memory is
// found by wrapping WebAssembly.instantiate before init(); that is measurement only, nothing else is touched.
import { performance } from 'node:perf_hooks';
import process from 'node:process';

// ---- capture the module's WebAssembly.Memory (for its size) ----
let wasmMemory = null;
const realInstantiate = WebAssembly.instantiate;
WebAssembly.instantiate = async function (...args) {
  const result = await realInstantiate.apply(this, args);
  const instance = result instanceof WebAssembly.Instance ? result : result.instance;
  for (const v of Object.values(instance.exports)) if (v instanceof WebAssembly.Memory) wasmMemory = v;
  return result;
};
const api = await import('../web/src/index.js');
await api.init();
WebAssembly.instantiate = realInstantiate;

const args = Object.fromEntries(
  process.argv.slice(2).map((a) => {
    const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
    return m ? [m[1], m[2] ?? true] : [a, true];
  }),
);
const MiB = 1 << 20;
const fileMiB = Number(args.mib ?? 256);
const runs = Number(args.runs ?? 5);
const headerTensors = Number(args['header-tensors'] ?? 200000);
const CHUNK = 1 * MiB;

// ---- memory sampling ----
let peakRss = 0;
const sample = () => {
  const r = process.memoryUsage.rss();
  if (r > peakRss) peakRss = r;
};
const timer = setInterval(sample, 5);
timer.unref();
async function measurePhase(fn) {
  globalThis.gc?.();
  const before = process.memoryUsage.rss();
  peakRss = before;
  const value = await fn();
  sample();
  return { value, rssBefore: before, peakDelta: peakRss - before, wasmBytes: wasmMemory?.buffer.byteLength ?? null };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const gb = (bytes, s) => bytes / s / 1e9;
const fmt = (x, d = 2) => (x === null || x === undefined ? 'n/a' : x.toFixed(d));
const mib = (b) => (b === null ? 'n/a' : (b / MiB).toFixed(1));

// ---- baselines ----
function memoryCopyModule() {
  // (module (memory (export "mem") 4097)
  //   (func (export "copy") (param i32 i32 i32) local.get 0 local.get 1 local.get 2 memory.copy))
  const bytes = new Uint8Array([
    0x00,
    0x61,
    0x73,
    0x6d,
    0x01,
    0x00,
    0x00,
    0x00,
    0x01,
    0x07,
    0x01,
    0x60,
    0x03,
    0x7f,
    0x7f,
    0x7f,
    0x00, // type: (i32 i32 i32) -> ()
    0x03,
    0x02,
    0x01,
    0x00, // function 0 has type 0
    0x05,
    0x04,
    0x01,
    0x00,
    0x81,
    0x20, // memory: min 4097 pages (256 MiB + 64 KiB)
    0x07,
    0x0e,
    0x02,
    0x03,
    0x6d,
    0x65,
    0x6d,
    0x02,
    0x00,
    0x04,
    0x63,
    0x6f,
    0x70,
    0x79,
    0x00,
    0x00, // exports
    0x0a,
    0x0e,
    0x01,
    0x0c,
    0x00,
    0x20,
    0x00,
    0x20,
    0x01,
    0x20,
    0x02,
    0xfc,
    0x0a,
    0x00,
    0x00,
    0x0b, // code
  ]);
  return new WebAssembly.Instance(new WebAssembly.Module(bytes)).exports;
}

function baselines() {
  const n = 128 * MiB;
  const { mem, copy } = memoryCopyModule();
  const heap = new Uint8Array(mem.buffer);
  for (let i = 0; i < 2 * n; i += 4096) heap[i] = i & 255; // commit every page
  copy(n, 0, n); // warm-up
  const reps = 10;
  let t0 = performance.now();
  for (let r = 0; r < reps; ++r) copy(n, 0, n);
  const memCopyS = (performance.now() - t0) / 1e3 / reps;

  const src = new Uint8Array(n);
  const dst = new Uint8Array(n);
  for (let i = 0; i < n; i += 4096) src[i] = i & 255;
  dst.set(src);
  t0 = performance.now();
  for (let r = 0; r < reps; ++r) dst.set(src);
  const setS = (performance.now() - t0) / 1e3 / reps;
  return { memoryCopy: n / memCopyS, typedArraySet: n / setS };
}

// ---- synthetic files (built here in JS, independent of the package's writer) ----
function safetensorsBytes(entries, dataSize, metadata = { format: 'pt' }) {
  const obj = { __metadata__: metadata };
  for (const e of entries) obj[e.name] = { dtype: e.dtype, shape: e.shape, data_offsets: [e.begin, e.end] };
  let json = JSON.stringify(obj);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const head = new TextEncoder().encode(json);
  const file = new Uint8Array(8 + head.length + dataSize);
  new DataView(file.buffer).setBigUint64(0, BigInt(head.length), true);
  file.set(head, 8);
  return { file, dataStart: 8 + head.length };
}

// LoRA-like: `count` tensors of equal size, PEFT names, data filled with weight-like values.
function loraFile(dtype, totalBytes, count = 2048) {
  const elemBytes = dtype === 'BF16' ? 2 : 4;
  const per = totalBytes / count / elemBytes;
  const proj = [
    'self_attn.q_proj',
    'self_attn.k_proj',
    'self_attn.v_proj',
    'self_attn.o_proj',
    'mlp.gate_proj',
    'mlp.up_proj',
    'mlp.down_proj',
    'mlp.extra_proj',
  ];
  const entries = [];
  let off = 0;
  for (let i = 0; entries.length < count; ++i) {
    const base = `base_model.model.model.layers.${Math.floor(i / 8)}.${proj[i % 8]}`;
    for (const [ab, shape] of [
      ['A', [16, per / 16]],
      ['B', [per / 16, 16]],
    ]) {
      if (entries.length >= count) break;
      entries.push({ name: `${base}.lora_${ab}.weight`, dtype, shape, begin: off, end: off + per * elemBytes });
      off += per * elemBytes;
    }
  }
  const { file, dataStart } = safetensorsBytes(entries, off);
  // Weight-like f32 values (|x| in 2^-12 .. 2^4); BF16 keeps the high halves.
  const f32 = new Float32Array(1 << 16);
  for (let i = 0; i < f32.length; ++i) f32[i] = (Math.random() < 0.5 ? -1 : 1) * 2 ** (-12 + Math.random() * 16);
  const u16 = new Uint16Array(f32.buffer);
  const data = file.subarray(dataStart);
  if (dtype === 'F32') {
    const src = new Uint8Array(f32.buffer);
    for (let p = 0; p < data.length; p += src.length)
      data.set(src.subarray(0, Math.min(src.length, data.length - p)), p);
  } else {
    const hi = new Uint16Array(f32.length);
    for (let i = 0; i < f32.length; ++i) hi[i] = u16[2 * i + 1];
    const src = new Uint8Array(hi.buffer);
    for (let p = 0; p < data.length; p += src.length)
      data.set(src.subarray(0, Math.min(src.length, data.length - p)), p);
  }
  return file;
}

// The 200,000-tensor MoE header of bench/synth.cc (same names and shapes), names sorted as the writer does.
function moeHeaderFile(count) {
  const H = 2048,
    I = 768,
    E = 256,
    V = 151936;
  const specs = [];
  const add = (name, shape) => specs.length < count && specs.push({ name, shape });
  add('model.embed_tokens.weight', [V, H]);
  add('lm_head.weight', [V, H]);
  add('model.norm.weight', [H]);
  for (let l = 0; specs.length < count; ++l) {
    const p = `model.layers.${l}.`;
    add(p + 'self_attn.q_proj.weight', [4096, H]);
    add(p + 'self_attn.k_proj.weight', [512, H]);
    add(p + 'self_attn.v_proj.weight', [512, H]);
    add(p + 'self_attn.o_proj.weight', [H, 4096]);
    add(p + 'input_layernorm.weight', [H]);
    add(p + 'post_attention_layernorm.weight', [H]);
    add(p + 'mlp.gate.weight', [E, H]);
    for (let e = 0; e < E; ++e) {
      add(`${p}mlp.experts.${e}.gate_proj.weight`, [I, H]);
      add(`${p}mlp.experts.${e}.up_proj.weight`, [I, H]);
      add(`${p}mlp.experts.${e}.down_proj.weight`, [H, I]);
    }
  }
  specs.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  let off = 0;
  const entries = specs.map((s) => {
    const bytes = s.shape.reduce((x, y) => x * y, 1) * 2;
    const e = { name: s.name, dtype: 'BF16', shape: s.shape, begin: off, end: off + bytes };
    off += bytes;
    return e;
  });
  // Only the prefix and header exist: inspect() stops at the header event.
  return safetensorsBytes(entries, 0).file;
}

function chunksOf(bytes) {
  const out = [];
  for (let p = 0; p < bytes.length; p += CHUNK) out.push(bytes.subarray(p, Math.min(bytes.length, p + CHUNK)));
  return out;
}

// ---- the API paths ----
async function readAll(file) {
  let n = 0;
  let events = 0;
  let x = 0;
  for await (const ev of api.readSafetensors(chunksOf(file))) {
    if (ev.type === 'data') {
      n += ev.bytes.length;
      x ^= ev.bytes[ev.bytes.length - 1]; // touch the copy
      if (++events % 64 === 0) sample();
    }
  }
  if (x === 0x1234) console.log(''); // keep x alive
  return n;
}

async function convertAll(file, dtype) {
  const reader = api.convert(chunksOf(file), { dtype }).getReader();
  let n = 0;
  let k = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.length;
    if (++k % 64 === 0) sample();
  }
  return n;
}

async function timeRuns(fn) {
  const times = [];
  let value;
  for (let r = 0; r < runs; ++r) {
    const t0 = performance.now();
    value = await fn();
    times.push((performance.now() - t0) / 1e3);
  }
  return { median: median(times), best: Math.min(...times), value };
}

// ---- main ----
const results = { node: process.version, date: new Date().toISOString(), fileMiB, runs, chunkBytes: CHUNK };
const base = baselines();
results.baseline = { memoryCopyGBps: base.memoryCopy / 1e9, typedArraySetGBps: base.typedArraySet / 1e9 };
console.log(`node ${process.version}; ${runs} runs per path (median shown, best in brackets); chunks of 1 MiB`);
console.log(
  `baseline  memory.copy 128 MiB: ${fmt(base.memoryCopy / 1e9)} GB/s copied;  Uint8Array.set 128 MiB: ${fmt(base.typedArraySet / 1e9)} GB/s copied`,
);

const bf16 = loraFile('BF16', fileMiB * MiB);
const f32 = loraFile('F32', fileMiB * MiB);

{
  const ph = await measurePhase(() => timeRuns(() => readAll(bf16)));
  const t = ph.value;
  const rate = gb(bf16.length, t.median);
  results.read = {
    fileBytes: bf16.length,
    seconds: t.median,
    fileGBps: rate,
    bestGBps: gb(bf16.length, t.best),
    ratio: (rate * 1e9) / base.memoryCopy,
    peakRssDeltaMiB: ph.peakDelta / MiB,
    wasmMemoryMiB: ph.wasmBytes / MiB,
  };
  console.log(
    `read      readSafetensors ${fileMiB} MiB BF16, 2048 tensors: ${fmt(rate)} GB/s [${fmt(gb(bf16.length, t.best))}], ratio to memory.copy ${fmt(results.read.ratio)}; peak RSS +${mib(ph.peakDelta)} MiB, wasm memory ${mib(ph.wasmBytes)} MiB`,
  );
}
for (const [name, file, dtype] of [
  ['BF16->F32', bf16, 'f32'],
  ['F32->BF16', f32, 'bf16'],
]) {
  const ph = await measurePhase(() => timeRuns(() => convertAll(file, dtype)));
  const t = ph.value;
  const inRate = gb(file.length, t.median);
  const traffic = gb(file.length + t.value, t.median);
  const ratio = (traffic * 1e9) / (2 * base.memoryCopy);
  results[`convert ${name}`] = {
    inBytes: file.length,
    outBytes: t.value,
    seconds: t.median,
    inGBps: inRate,
    bestInGBps: gb(file.length, t.best),
    trafficGBps: traffic,
    ratio,
    targetMet: inRate >= 1.5,
    peakRssDeltaMiB: ph.peakDelta / MiB,
    wasmMemoryMiB: ph.wasmBytes / MiB,
  };
  console.log(
    `convert   ${name} ${fileMiB} MiB: in ${fmt(inRate)} GB/s [${fmt(gb(file.length, t.best))}], traffic ${fmt(traffic)} GB/s, ratio to memory bound ${fmt(ratio)}; target >= 1.5 GB/s ${inRate >= 1.5 ? 'met' : 'MISSED'}; peak RSS +${mib(ph.peakDelta)} MiB, wasm memory ${mib(ph.wasmBytes)} MiB`,
  );
}
{
  const head = moeHeaderFile(headerTensors);
  const ph = await measurePhase(() =>
    timeRuns(async () => {
      const h = await api.inspect(chunksOf(head));
      if (h.tensors.length !== headerTensors) throw new Error('wrong tensor count');
      return h.tensors.length;
    }),
  );
  const t = ph.value;
  results.inspect = {
    tensors: headerTensors,
    jsonBytes: head.length - 8,
    seconds: t.median,
    best: t.best,
    peakRssDeltaMiB: ph.peakDelta / MiB,
    wasmMemoryMiB: ph.wasmBytes / MiB,
  };
  console.log(
    `inspect   ${headerTensors} tensors (${fmt((head.length - 8) / 1e6, 1)} MB JSON): ${fmt(t.median, 3)} s [${fmt(t.best, 3)}]; peak RSS +${mib(ph.peakDelta)} MiB, wasm memory ${mib(ph.wasmBytes)} MiB`,
  );
}
results.finalRssMiB = process.memoryUsage.rss() / MiB;
if (args.json) console.log(JSON.stringify(results, null, 2));
