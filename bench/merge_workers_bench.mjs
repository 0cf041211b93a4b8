#!/usr/bin/env node
// The browser's whole-model merge in headless Chromium: mergeShards on the page's thread against mergeInWorkers
// with 1 and 2 Web Workers, the shards and the adapter given as Files (a file input, as a user picks them), every
// output stream read to a sink that counts the bytes (concurrently for the workers' files). The floor in the same
// run: the same Files read through File.stream(), one after another and at once.
//
//   node bench/merge_workers_bench.mjs MODEL_DIR [ROUNDS=5]
//
// MODEL_DIR: a sharded model with model.safetensors.index.json, config.json and adapter/ (`build/native/bench/
// pb_make_llama_model DIR 3`). Prints the median seconds and GB/s of base bytes over ROUNDS after one warm-up,
// the rounds interleaved.
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';
import { chromium } from 'playwright-core';
import { startStatic } from '../web/app/serve.mjs';

const dir = process.argv[2];
const rounds = Number(process.argv[3] ?? 5);
if (!dir) throw new Error('usage: node bench/merge_workers_bench.mjs MODEL_DIR [ROUNDS]');
const index = readFileSync(join(dir, 'model.safetensors.index.json'), 'utf8');
const shards = [...new Set(Object.values(JSON.parse(index).weight_map))].sort();
const paths = [...shards.map((s) => join(dir, s)), join(dir, 'adapter', 'adapter_model.safetensors')];
const total = shards.reduce((a, s) => a + statSync(join(dir, s)).size, 0);
const inputs = {
  index,
  config: readFileSync(join(dir, 'config.json'), 'utf8'),
  adapterConfig: readFileSync(join(dir, 'adapter', 'adapter_config.json'), 'utf8'),
};

const site = await startStatic({ root: new URL('..', import.meta.url).pathname });
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox'] });
try {
  const page = await browser.newPage();
  page.on('pageerror', (e) => console.error('page error:', e.message));
  await page.goto(`${site.origin}/web/`);
  await page.setContent('<!doctype html><input type="file" id="files" multiple>');
  await page.setInputFiles('#files', paths);
  await page.evaluate(async (inputs) => {
    const pb = await import('/web/src/browser.js');
    const byName = Object.fromEntries([...document.querySelector('#files').files].map((f) => [f.name, f]));
    const options = () => ({
      base: { index: inputs.index, config: inputs.config, open: (name) => byName[name] },
      adapter: { weights: byName['adapter_model.safetensors'], config: inputs.adapterConfig },
    });
    const drain = async (stream) => {
      const reader = stream.getReader();
      let n = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return n;
        n += value.length;
      }
    };
    const shardFiles = Object.values(byName).filter((f) => f.name !== 'adapter_model.safetensors');
    globalThis.jobs = {
      'read only, in turn': async () => {
        for (const f of shardFiles) await drain(f.stream());
      },
      'read only, at once': () => Promise.all(shardFiles.map((f) => drain(f.stream()))),
      'mergeShards (page thread)': async () => {
        for await (const f of pb.mergeShards(options())) await drain(f.stream);
      },
      'mergeInWorkers, 1 worker': async () =>
        Promise.all((await pb.mergeInWorkers({ ...options(), workers: 1 })).map((f) => drain(f.stream))),
      'mergeInWorkers, 2 workers': async () =>
        Promise.all((await pb.mergeInWorkers({ ...options(), workers: 2 })).map((f) => drain(f.stream))),
    };
    await pb.init();
  }, inputs);
  const names = await page.evaluate(() => Object.keys(globalThis.jobs));
  const times = Object.fromEntries(names.map((n) => [n, []]));
  for (let round = 0; round <= rounds; ++round) {
    for (const name of names) {
      const s = await page.evaluate(async (name) => {
        const t0 = performance.now();
        await globalThis.jobs[name]();
        return (performance.now() - t0) / 1000;
      }, name);
      if (round > 0) times[name].push(s); // round 0 warms up
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(
    `${shards.length} shards, ${(total / 1e9).toFixed(2)} GB, ${rounds} rounds, load ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
  );
  for (const name of names) {
    const m = median(times[name]);
    console.log(
      `${name.padEnd(28)} median ${m.toFixed(3)} s  ${(total / m / 1e9).toFixed(2)} GB/s  runs ${times[name].map((x) => x.toFixed(2)).join(' ')}`,
    );
  }
} finally {
  await browser.close();
  await site.close();
}
