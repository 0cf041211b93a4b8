#!/usr/bin/env node
// The remote merge's data pass against its Range piece size and the ranges in flight per file: mergeRemote of a
// model served by the local Hub stand-in (tests/hub/server.mjs, in a process of its own) with a delay on every
// answer's head, as a far server's round trip, against a plain fetch of the same files through the same stand-in
// (one request per file, the redirect followed: the floor of the transfer).
//
//   node bench/remote_ranges_bench.mjs MODEL_DIR [--latency MS=20] [--pieces 1,4,16] [--readers 1,2,4,8] [--rounds 2]
//
// MODEL_DIR: a model with model.safetensors.index.json, config.json and adapter/ (bench/make_llama_model.cc writes
// one: `build/native/bench/pb_make_llama_model DIR 1 [--targets q_proj]`). --pieces in MiB. Every setting runs once
// per round, rounds outermost (after one warm-up each of the fetch and the first setting); prints, per (piece,
// readers), the median and least seconds, GB/s of base bytes and the plain fetch's median over the merge's.
import { spawn } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import process from 'node:process';

import { mergeRemote } from '../web/src/node.js';

const args = process.argv.slice(2);
const dir = args[0];
if (!dir || dir.startsWith('--'))
  throw new Error(
    'usage: node bench/remote_ranges_bench.mjs MODEL_DIR [--latency MS] [--pieces MiB,...] [--readers K,...] [--rounds N]',
  );
const flag = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i < 0 ? fallback : args[i + 1];
};
const latency = Number(flag('latency', 20));
const pieces = flag('pieces', '1,4,16').split(',').map(Number);
const readersList = flag('readers', '1,2,4,8').split(',').map(Number);
const rounds = Number(flag('rounds', 2));

const index = JSON.parse(readFileSync(join(dir, 'model.safetensors.index.json'), 'utf8'));
const shards = [...new Set(Object.values(index.weight_map))].sort();
const total = shards.reduce((n, s) => n + statSync(join(dir, s)).size, 0);

// The stand-in in its own process, so that serving does not share this event loop or core with the merge.
const server = spawn(
  process.execPath,
  [
    new URL('../tests/hub/server.mjs', import.meta.url).pathname,
    '--dir',
    `me/base=${dir}`,
    '--dir',
    `me/lora=${join(dir, 'adapter')}`,
    '--latency',
    String(latency),
  ],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
const endpoint = await new Promise((resolve, reject) => {
  server.once('exit', (code) => reject(new Error(`the stand-in exited (${code})`)));
  createInterface({ input: server.stdout }).once('line', resolve);
});

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function drain(stream) {
  const reader = stream.getReader();
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return n;
    n += value.length;
  }
}

/** Seconds for a plain fetch of every base shard (one request each, redirects followed), drained. */
async function plainFetch() {
  const t0 = performance.now();
  for (const s of shards) {
    const response = await fetch(`${endpoint}/me/base/resolve/main/${s}`);
    if (!response.ok) throw new Error(`${s}: HTTP ${response.status}`);
    await drain(response.body);
  }
  return (performance.now() - t0) / 1000;
}

/** Seconds for mergeRemote of the whole model, every output drained. */
async function merge(pieceSize, readers) {
  const t0 = performance.now();
  let bytes = 0;
  for await (const { stream } of mergeRemote({
    base: { repo: 'me/base' },
    adapter: { repo: 'me/lora' },
    endpoint,
    pieceSize,
    readers,
  }))
    bytes += await drain(stream);
  return { seconds: (performance.now() - t0) / 1000, bytes };
}

const min = (xs) => Math.min(...xs);

try {
  console.log(
    `model: ${dir} (${shards.length} shards, ${(total / 1e9).toFixed(3)} GB); latency ${latency} ms per answer; ${rounds} rounds; node ${process.version}`,
  );
  await plainFetch(); // warm-up
  await merge(pieces[0] << 20, readersList[0]); // warm-up: the module compiled, the page cache warm
  // Rounds outermost, every setting once per round: load from elsewhere spreads over all settings alike.
  const settings = [
    ['fetch', 0, 0],
    ...pieces.flatMap((piece) => readersList.map((readers) => ['merge', piece, readers])),
  ];
  const times = new Map(settings.map((s) => [s.join(), []]));
  for (let r = 0; r < rounds; ++r) {
    for (const setting of settings) {
      const [kind, piece, readers] = setting;
      times
        .get(setting.join())
        .push(kind === 'fetch' ? await plainFetch() : (await merge(piece << 20, readers)).seconds);
    }
  }
  const floor = median(times.get('fetch,0,0'));
  console.log(
    `plain fetch of the shards: median ${floor.toFixed(2)} s (min ${min(times.get('fetch,0,0')).toFixed(2)}), ${(total / 1e9 / floor).toFixed(3)} GB/s`,
  );
  console.log('piece MiB | readers | median s | min s | GB/s (median) | plain fetch / merge');
  for (const setting of settings.slice(1)) {
    const [, piece, readers] = setting;
    const t = times.get(setting.join());
    const s = median(t);
    console.log(
      `${piece} | ${readers} | ${s.toFixed(2)} | ${min(t).toFixed(2)} | ${(total / 1e9 / s).toFixed(3)} | ${(floor / s).toFixed(2)}`,
    );
  }
} finally {
  server.kill();
}

async function seq(n, fn) {
  const out = [];
  for (let i = 0; i < n; ++i) out.push(await fn());
  return out;
}
