// WASM inspect of a header-heavy file: the API's path (the compact table, web/src/ops/inspect.js
// headerFromHandle) against the JSON path it replaced (RenderInspectJson, then JSON.parse: what the CLI's
// --json still renders), each run in a fresh Node process so that the WASM heap's high-water mark is the run's
// own. Prints the median wall time of RUNS runs and the peak WASM heap of each path.
//   python3 bench/make_header_file.py /tmp/200k.safetensors
//   node bench/inspect_wasm_bench.mjs /tmp/200k.safetensors [RUNS=5]
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const [file, runsText = '5', child] = process.argv.slice(2);
const web = new URL('../web/src/', import.meta.url);

if (child) {
  const pb = await import(new URL('node.js', web));
  const { getModule } = await import(new URL('init.js', web));
  const { inspectRendered, headerFromJson } = await import(new URL('ops/inspect.js', web));
  await pb.init();
  const module = await getModule();
  const bytes = readFileSync(file);
  const t0 = performance.now();
  const header =
    child === 'table'
      ? await pb.inspect(bytes)
      : headerFromJson((await inspectRendered(bytes, { render: 'json' })).json);
  const seconds = (performance.now() - t0) / 1000;
  console.log(JSON.stringify({ seconds, heap: module.heapSize(), tensors: header.tensors.length }));
  process.exit(0);
}

const runs = Number(runsText);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const path of ['table', 'json']) {
  const results = [];
  for (let i = 0; i < runs; ++i) {
    const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), file, '1', path], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(r.stderr);
    results.push(JSON.parse(r.stdout));
  }
  const label = path === 'table' ? 'inspect() (compact table)' : 'JSON render + JSON.parse (before)';
  console.log(
    `${label}: ${results[0].tensors} tensors, median ${median(results.map((r) => r.seconds)).toFixed(3)} s of ${runs}, WASM heap ${(Math.max(...results.map((r) => r.heap)) / 2 ** 20).toFixed(1)} MiB`,
  );
}
