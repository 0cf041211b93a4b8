#!/usr/bin/env node
// The JS API's whole-model merge (mergeShards) from the page cache to a sink that counts the bytes, against the
// plain read of the same files through the same kind of source in the same run (the floor: no merge at all).
//
//   node bench/merge_shards_bench.mjs MODEL_DIR [ROUNDS=5]
//
// MODEL_DIR: a model with model.safetensors.index.json, config.json and adapter/ (bench/make_llama_model.cc writes
// one: `build/native/bench/pb_make_llama_model DIR 3`). Sources: local paths (random access, read by range) and
// ReadableStreams (Readable.toWeb(createReadStream(path)), asked for twice: header, then data). Prints GB/s of base
// bytes, medians over ROUNDS after one warm-up, and the WASM heap's size (its high-water mark).
import { createReadStream, readFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import process from 'node:process';

import { mergeShards } from '../web/src/node.js';
import { getModule } from '../web/src/init.js';

const dir = process.argv[2];
const rounds = Number(process.argv[3] ?? 5);
if (!dir) throw new Error('usage: node bench/merge_shards_bench.mjs MODEL_DIR [ROUNDS]');
const index = readFileSync(join(dir, 'model.safetensors.index.json'), 'utf8');
const shards = [...new Set(Object.values(JSON.parse(index).weight_map))].sort();
const adapter = {
  weights: join(dir, 'adapter', 'adapter_model.safetensors'),
  config: readFileSync(join(dir, 'adapter', 'adapter_config.json')),
};
let total = 0;
for (const s of shards) {
  const f = await open(join(dir, s));
  total += (await f.stat()).size;
  await f.close();
}

async function drain(stream) {
  let n = 0;
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return n;
    n += value.length;
  }
}

const opens = {
  paths: (name) => join(dir, name),
  streams: (name) => Readable.toWeb(createReadStream(join(dir, name), { highWaterMark: 4 << 20 })),
};
const jobs = {
  'read only, paths (4 MiB reads)': async () => {
    for (const s of shards) {
      const f = await open(join(dir, s));
      const size = (await f.stat()).size;
      for (let pos = 0; pos < size; pos += 4 << 20)
        await f.read(new Uint8Array(Math.min(4 << 20, size - pos)), 0, Math.min(4 << 20, size - pos), pos);
      await f.close();
    }
  },
  'read only, streams': async () => {
    for (const s of shards) await drain(opens.streams(s));
  },
};
for (const [kind, openShard] of Object.entries(opens))
  jobs[`mergeShards, ${kind}`] = async () => {
    let out = 0;
    for await (const f of mergeShards({
      base: { open: openShard, index, config: readFileSync(join(dir, 'config.json')) },
      adapter,
    }))
      out += await drain(f.stream);
    return out;
  };

const times = Object.fromEntries(Object.keys(jobs).map((k) => [k, []]));
for (let r = 0; r <= rounds; ++r)
  for (const [name, job] of Object.entries(jobs)) {
    const t0 = performance.now();
    await job();
    const s = (performance.now() - t0) / 1000;
    if (r > 0) times[name].push(s);
  }
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor((a.length - 1) / 2)];
console.log(
  `${(total / 1e9).toFixed(2)} GB of base in ${shards.length} shards; ${rounds} rounds after a warm-up; load ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
);
for (const [name, t] of Object.entries(times))
  console.log(
    `${name.padEnd(34)} median ${median(t).toFixed(3)} s  ${(total / median(t) / 1e9).toFixed(2)} GB/s  (${t.map((x) => x.toFixed(2)).join(' ')})`,
  );
const heap = (await getModule()).HEAPU8.length;
console.log(
  `WASM heap: ${(heap / 2 ** 20).toFixed(1)} MiB; peak RSS ${(process.resourceUsage().maxRSS / 1024).toFixed(1)} MiB`,
);
