// The examples deploy as their READMEs say: `wrangler deploy --dry-run` (real wrangler, pinned) bundles each
// worker with its wrangler.toml, resolving `peft-bridge` by the "workerd" export condition and the .wasm import as a
// module compiled at deploy time, without a warning, and lists the bindings the worker reads.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from './helpers/common.mjs';

const wrangler = join(repoRoot, 'node_modules', '.bin', 'wrangler');
const skip = existsSync(wrangler) ? false : 'wrangler is not installed (npm ci)';

function dryRun(t, example) {
  const out = mkdtempSync(join(tmpdir(), `pb-wrangler-${example}-`));
  t.after(() => rmSync(out, { recursive: true, force: true }));
  const r = spawnSync(wrangler, ['deploy', '--dry-run', '--outdir', out], {
    cwd: join(repoRoot, 'examples', example),
    encoding: 'utf8',
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true', NO_COLOR: '1', FORCE_COLOR: '0' },
    timeout: 120_000,
  });
  const log = `${r.stdout}\n${r.stderr}`;
  assert.equal(r.status, 0, log);
  // The one warning allowed is wrangler's own "out-of-date" notice (the pin is the last release for Node 20).
  const warnings = log.split('\n').filter((l) => /WARNING/.test(l) && !/out-of-date/.test(l));
  assert.deepEqual(warnings, [], log);
  const files = readdirSync(out);
  assert.ok(files.includes('worker.js'), files.join(', '));
  assert.ok(
    files.some((f) => f.endsWith('peft_bridge_wasm.wasm')),
    `the .wasm is a module of its own: ${files.join(', ')}`,
  );
  return log;
}

test('wrangler deploy --dry-run: examples/edge-worker', { skip }, (t) => {
  const log = dryRun(t, 'edge-worker');
  assert.match(log, /HF_ENDPOINT: "https:\/\/huggingface\.co"/);
});

test('wrangler deploy --dry-run: examples/adapter-router (the SQLite Durable Object registry)', { skip }, (t) => {
  const log = dryRun(t, 'adapter-router');
  assert.match(log, /REGISTRY: AdapterRegistry/);
  assert.match(log, /CACHE_BUDGET_MB: "64"/);
});
