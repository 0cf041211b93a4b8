// The JS job driver (web/src/job-driver.js) over the one job handle: what it gives a sink, what it tells, and that
// an abort mid-run leaves nothing behind.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { collect, makeFile, pb } from './helpers/common.mjs';
import { openJob, run } from '../../web/src/job-driver.js';
import { openSource } from '../../web/src/io/sources.js';
import { OutputTransaction } from '../../web/src/cli/output.js';
import { getModule } from '../../web/src/init.js';

const module = await getModule();

// An F32 tensor of n values (converted), an I32 one (forwarded).
function file(n) {
  const f32 = new Float32Array(n).map((_, i) => (i % 1000) / 7);
  const i32 = new Int32Array([1, 2, 3, 4]);
  const json = JSON.stringify({
    w: { dtype: 'F32', shape: [n], data_offsets: [0, 4 * n] },
    ids: { dtype: 'I32', shape: [4], data_offsets: [4 * n, 4 * n + 16] },
  });
  const data = new Uint8Array(4 * n + 16);
  data.set(new Uint8Array(f32.buffer));
  data.set(new Uint8Array(i32.buffer), 4 * n);
  return makeFile(json, data);
}

// A sink that keeps what it is given, in one buffer, and checks the writes arrive in order.
function memorySink() {
  const parts = [];
  let size = 0;
  const kinds = [];
  return {
    kinds,
    write(output, at, bytes) {
      assert.equal(output, 0);
      assert.equal(at, size, 'writes come in order of offset');
      parts.push(bytes.slice());
      size += bytes.length;
    },
    commit: () => kinds.push('commit'),
    abort: () => kinds.push('abort'),
    bytes: () => Buffer.concat(parts),
  };
}

test('run() gives the sink the bytes convert() streams, and commits once', async () => {
  const bytes = file(3 << 20); // 12 MiB: several reads of the job's bounded size
  const job = await openJob('convert', { dtype: 'BF16', order: 'reference', inputSize: bytes.length });
  const sink = memorySink();
  const progress = [];
  try {
    await run(job, [await openSource(bytes)], sink, { onProgress: (p) => progress.push(p) });
  } finally {
    job.close();
  }
  const expected = Buffer.from(await collect(pb.convert(bytes, { dtype: 'bf16' })));
  assert.ok(sink.bytes().equals(expected));
  assert.deepEqual(sink.kinds, ['commit']);
  assert.equal(progress.at(-1).done, bytes.length);
  assert.equal(progress.at(-1).total, bytes.length);
  assert.ok(progress.length > 3, 'progress after every piece');
});

test("a CLI's job tells its plan before the first write and summarises under --json", async () => {
  const bytes = file(16);
  const line = (...args) =>
    JSON.parse(module.parseCommandLine(JSON.stringify(['convert', 'in.safetensors', 'out.safetensors', ...args])));
  const events = [];
  const sink = { write: (o, at) => events.push(`write ${at}`) };
  let job = await openJob('convert', { line: line('--dtype', 'f16'), inputSize: bytes.length });
  try {
    await run(job, [await openSource(bytes)], sink, { onMessage: (text) => events.push(text) });
    assert.equal(events[0], 'convert 1 of 2 tensors; output 176 B\n');
    assert.equal(events[1], 'write 0');
    assert.equal(job.handle.summary(), '');
  } finally {
    job.close();
  }
  events.length = 0;
  job = await openJob('convert', { line: line('--dtype', 'f16', '--json'), inputSize: bytes.length });
  try {
    await run(job, [await openSource(bytes)], sink, { onMessage: (text) => events.push(text) });
    assert.ok(events.every((e) => e.startsWith('write ')));
    assert.deepEqual(JSON.parse(job.handle.summary()), {
      ok: true,
      tensors: 2,
      converted: 1,
      inputSize: bytes.length,
      outputSize: 176,
    });
  } finally {
    job.close();
  }
});

test('an abort mid-run leaves nothing: no output file, no temporary file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pb-job-driver-'));
  const bytes = file(3 << 20);
  const job = await openJob('convert', { dtype: 'F16', order: 'reference', inputSize: bytes.length });
  const output = OutputTransaction.forFile(join(dir, 'out.safetensors'), {
    commit: ['out.safetensors'],
    replace: [],
    remove: [],
    stale: [],
  });
  const controller = new AbortController();
  let target = null;
  let writes = 0;
  const sink = {
    async write(_output, at, b) {
      target ??= await output.add('out.safetensors');
      await output.writeAt(target, at, b);
      if (++writes === 2) controller.abort();
    },
    commit: () => output.commit(),
    abort: () => output.close(),
  };
  try {
    await assert.rejects(
      run(job, [await openSource(bytes)], sink, { signal: controller.signal }),
      (e) => e.name === 'AbortError',
    );
    assert.equal(writes, 2, 'nothing ran after the abort');
    assert.deepEqual(readdirSync(dir), []);
  } finally {
    job.close();
    await output.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a job refuses options it cannot run, and a stream read backwards', async () => {
  await assert.rejects(openJob('convert', { dtype: 'X7', order: 'input' }), (e) => e.code === 'InvalidArgument');
  await assert.rejects(openJob('frobnicate', {}), (e) => e.code === 'InvalidArgument');
  // Reference order (by name here) reads the tensors out of file order: a stream cannot serve it.
  const bytes = makeFile(
    JSON.stringify({
      b: { dtype: 'F32', shape: [1], data_offsets: [0, 4] },
      a: { dtype: 'F32', shape: [1], data_offsets: [4, 8] },
    }),
    new Uint8Array(8),
  );
  const stream = new ReadableStream({ start: (c) => (c.enqueue(bytes), c.close()) });
  const job = await openJob('convert', { dtype: 'BF16', order: 'reference', inputSize: null });
  try {
    await assert.rejects(
      run(job, [await openSource(stream)], memorySink()),
      (e) => e.code === 'InvalidArgument' && /cannot be read again/.test(e.message),
    );
  } finally {
    job.close();
  }
});
