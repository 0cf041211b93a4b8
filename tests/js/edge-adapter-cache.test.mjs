// createAdapterCache in real workerd (the package's `peft-bridge/edge` entry under the "workerd" condition: no init(),
// the module compiled at deploy time; the `fetch` global), against the local Hub stand-in: one cache kept across
// requests, registration checked against a base, modules served by Range, a composition whose bytes equal Node's,
// the cache's hits on a second request.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pb } from './helpers/common.mjs';
import { writeAdapter, writeSingleBase } from './helpers/remote-model.mjs';
import { hasWorkerd, startWorkerd } from './helpers/workerd.mjs';
import { startHub } from '../hub/server.mjs';

const skip = !hasWorkerd ? 'workerd is not installed (npm ci)' : false;
const Q0 = 'model.layers.0.self_attn.q_proj';

const WORKER = `import { createAdapterCache } from 'peft-bridge/edge';
let cache = null;
export default {
  async fetch(request, env) {
    try {
      if (!cache) {
        cache = createAdapterCache({ endpoint: env.HF_ENDPOINT, budgetBytes: 1 << 20, dtype: 'bf16' });
        await cache.register('sql', { repo: 'me/sql', base: { repo: 'me/base' } });
        await cache.register('sql4', { repo: 'me/sql4', base: { repo: 'me/base' } });
      }
      const d = await cache.compose([{ id: 'sql', scale: 0.5 }, { id: 'sql4', scale: 2 }], '${Q0}');
      const m = await cache.module('sql4', '${Q0}');
      const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
      return Response.json({ A: hex(d.A), B: hex(d.B), mA: hex(m.A), rank: d.rank, stats: cache.stats() });
    } catch (e) {
      return new Response(String(e && e.stack || e), { status: 500 });
    }
  },
};
`;

test(
  'workerd: the adapter cache serves modules and compositions across requests',
  { skip, timeout: 120000 },
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'pb-edge-cache-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    await writeSingleBase(join(dir, 'base'));
    await writeAdapter(join(dir, 'sql'));
    await writeAdapter(join(dir, 'sql-r4'), { rank: 4 });
    const hub = await startHub({
      files: { 'me/base': join(dir, 'base'), 'me/sql': join(dir, 'sql'), 'me/sql4': join(dir, 'sql-r4') },
    });
    t.after(() => hub.close());

    const cache = pb.createAdapterCache({ endpoint: hub.endpoint, budgetBytes: 1 << 20, dtype: 'bf16' });
    await cache.register('sql', { repo: 'me/sql', base: { repo: 'me/base' } });
    await cache.register('sql4', { repo: 'me/sql4', base: { repo: 'me/base' } });
    const want = await cache.compose(
      [
        { id: 'sql', scale: 0.5 },
        { id: 'sql4', scale: 2 },
      ],
      Q0,
    );
    const wantModule = await cache.module('sql4', Q0);
    await cache.close();

    const workerPath = join(dir, 'cache-worker.mjs');
    writeFileSync(workerPath, WORKER);
    // startWorkerd's own first request (to see it is up) already makes the worker register and compose.
    const worker = await startWorkerd(t, { worker: workerPath, dir, bindings: { HF_ENDPOINT: hub.endpoint } });
    const first = await fetch(`${worker.url}/`);
    const hex = (b) => Buffer.from(b).toString('hex');
    const a = await first.text();
    assert.equal(first.status, 200, a);
    const one = JSON.parse(a);
    assert.equal(one.rank, 12);
    assert.equal(one.A, hex(want.A));
    assert.equal(one.B, hex(want.B));
    assert.equal(one.mA, hex(wantModule.A));
    assert.equal(one.stats.spanReads, 3);
    // Another request is served from the cache: no new Range request.
    const two = await (await fetch(`${worker.url}/`)).json();
    assert.equal(two.A, one.A);
    assert.equal(two.stats.spanReads, 3);
    assert.ok(two.stats.hits >= 3);
  },
);
