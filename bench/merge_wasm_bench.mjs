#!/usr/bin/env node
// The LoRA merge kernel compiled to WebAssembly (SIMD128), under Node, against WASM's own floor and against
// the native kernel measured in the same run.
//
//   node bench/merge_wasm_bench.mjs [--runs=10] [--ranks=8,16,64] [--native=build/native/bench/pb_merge_bench]
//                                   [--json]
//
// Needs web/dist/peft_bridge_wasm.{mjs,wasm} (scripts/build-wasm.sh), which include wasm/bench_bindings.cc.
// Every timing happens inside WebAssembly (no JS <-> heap copies): 4096 x 4096 BF16 -> BF16, one thread.
//   memory.copy   best rate of a 128 MiB memcpy inside the module (memory.copy with -mbulk-memory);
//                 copied GB/s = bytes / s. (Every function is warmed up first so that V8's optimizing tier runs.)
//   peak          best GFLOP/s of f32x4 multiply-then-add chains (SIMD128 has no FMA).
//   merge         best and median ms per merge (oop: separate W'; inplace: W' over W); GFLOP/s = 2 * rows *
//                 cols * rank / best; floor = max(read W + write W' at 2 x memory.copy's copied rate,
//                 flops at the peak); vs_floor = best / floor.
//   native        with a native pb_merge_bench (--native=path, or build/native/bench/pb_merge_bench if it
//                 exists), its best ms for the same merges from the same run, the ratio WASM / native, and
//                 whether the two outputs have the same FNV-1a checksum (bit-identical kernels).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import process from 'node:process';

import { getModule } from '../web/src/init.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = Object.fromEntries(
  process.argv.slice(2).map((a) => {
    const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
    return m ? [m[1], m[2] ?? true] : [a, true];
  }),
);
const runs = Number(args.runs ?? 10);
const ranks = String(args.ranks ?? '8,16,64')
  .split(',')
  .map(Number);
const ROWS = 4096;
const COLS = 4096;
const MiB = 1 << 20;

const mod = await getModule();
if (typeof mod.benchMergeRows !== 'function') {
  console.error('web/dist/peft_bridge_wasm.mjs has no benchMergeRows: rebuild with scripts/build-wasm.sh');
  process.exit(1);
}

// V8 first runs WebAssembly with its baseline compiler (Liftoff) and swaps in optimized (TurboFan) code for
// functions that got hot, from their next call on: the first call of the peak loop ran at a third of the
// speed of the second. Warm every measured function up once before timing.
mod.benchMulAddPeak(1);
mod.benchMergeRows(256, COLS, 16, 3, false);
mod.benchMergeRows(256, COLS, 16, 3, true);
await new Promise((r) => setTimeout(r, 200)); // background compilation

const copyBytes = 128 * MiB;
const copyS = mod.benchMemoryCopy(copyBytes, 10);
const copiedBps = copyBytes / copyS;
const peak = mod.benchMulAddPeak(10) * 1e9;

const wasm = [];
for (const rank of ranks) {
  for (const inPlace of [false, true]) {
    const r = mod.benchMergeRows(ROWS, COLS, rank, runs, inPlace);
    const flops = 2 * ROWS * COLS * rank;
    const bytesS = (2 * ROWS * COLS * 2) / (2 * copiedBps);
    const flopsS = flops / peak;
    const floorS = Math.max(bytesS, flopsS);
    wasm.push({
      name: `r${rank}/${inPlace ? 'inplace' : 'oop'}`,
      rank,
      inPlace,
      bestMs: r.best * 1e3,
      medianMs: r.median * 1e3,
      gflops: flops / r.best / 1e9,
      floorMs: floorS * 1e3,
      bytesMs: bytesS * 1e3,
      flopsMs: flopsS * 1e3,
      vsFloor: r.best / floorS,
      checksum: r.checksum,
    });
  }
}

// ---- native, same run ----
let nativePath =
  typeof args.native === 'string' ? resolve(args.native) : resolve(root, 'build/native/bench/pb_merge_bench');
let native = null;
if (existsSync(nativePath)) {
  const filter = `^(memcpy|peak)/[^/]*(/256MiB)?/threads:1/|^merge/bf16/4096x4096/r(${ranks.join('|')})/threads:1/`;
  const out = execFileSync(nativePath, [`--benchmark_filter=${filter}`, '--benchmark_format=json'], {
    maxBuffer: 64 * MiB,
  });
  native = { path: nativePath, byName: {} };
  // Google Benchmark writes inf as a bare Infinity, which is not JSON.
  for (const b of JSON.parse(out.toString().replace(/: (-?)(inf|Infinity|nan|NaN)\b/gi, ': null')).benchmarks) {
    native.byName[b.name.replace('/manual_time', '')] = b;
    if (b.name.startsWith('memcpy/')) native.copiedGBps = b['best_copied_GB/s'];
    if (b.name.startsWith('peak/mul+add')) native.peakMulAdd = b['best_GFLOP/s'];
    if (b.name.startsWith('peak/fma')) native.peakFma = b['best_GFLOP/s'];
  }
  for (const w of wasm) {
    const b = native.byName[`merge/bf16/4096x4096/r${w.rank}/threads:1/${w.inPlace ? 'inplace' : 'oop'}`];
    if (!b) continue;
    w.nativeBestMs = b.best_ms;
    w.nativeVsFloor = b.best_vs_floor;
    w.wasmOverNative = w.bestMs / b.best_ms;
    w.sameBits = b.label === `checksum=${w.checksum}`;
  }
} else {
  nativePath = null;
}

if (args.json) {
  console.log(JSON.stringify({ copiedGBps: copiedBps / 1e9, peakGflops: peak / 1e9, wasm, native }, null, 2));
} else {
  const f = (x, d = 2) => (x === undefined || x === null ? 'n/a' : x.toFixed(d));
  console.log(
    `WASM (Node ${process.versions.node}, V8 ${process.versions.v8}), ${ROWS}x${COLS} BF16 -> BF16, 1 thread, best of ${runs}`,
  );
  console.log(`  memory.copy ${f(copiedBps / 1e9)} GB/s copied; mul+add peak ${f(peak / 1e9, 1)} GFLOP/s`);
  if (native) {
    console.log(
      `native (${native.path}): memcpy ${f(native.copiedGBps)} GB/s copied; mul+add peak ${f(native.peakMulAdd, 1)} GFLOP/s, FMA peak ${f(native.peakFma, 1)} GFLOP/s`,
    );
  }
  console.log(
    'merge          best_ms  median_ms  GFLOP/s  floor_ms (bytes, flops)  vs_floor | native_ms  native_vs_floor  wasm/native  same_bits',
  );
  for (const w of wasm) {
    console.log(
      `${w.name.padEnd(14)} ${f(w.bestMs).padStart(7)}  ${f(w.medianMs).padStart(9)}  ${f(w.gflops, 1).padStart(7)}  ` +
        `${f(w.floorMs).padStart(8)} (${f(w.bytesMs)}, ${f(w.flopsMs)})  ${f(w.vsFloor).padStart(8)} | ` +
        `${f(w.nativeBestMs).padStart(9)}  ${f(w.nativeVsFloor).padStart(15)}  ${f(w.wasmOverNative).padStart(11)}  ${w.sameBits ?? 'n/a'}`,
    );
  }
}
