// Writing: the reference serializer's byte vectors, re-serializing Python-written fixtures, push and pull
// writers, errors, abort and disposal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { collect, countingStream, hex, pb, readFixture, skipWithoutFixtures } from './helpers/common.mjs';

const { createWriter, writeSafetensors, inspect, readSafetensors, SafetensorsError } = pb;
const dispose = Symbol.dispose ?? Symbol.for('Symbol.dispose');

const f32 = (...v) => new Uint8Array(new Float32Array(v).buffer);
const headerLength = (bytes) => Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
const headerText = (bytes) => new TextDecoder().decode(bytes.subarray(8, 8 + headerLength(bytes)));

async function writeAll(spec) {
  return collect(writeSafetensors(spec));
}

test('reference vector: F32 attn.0 [1,2,3] is 96 bytes with N=64 and no padding', async () => {
  const out = await writeAll({
    tensors: [{ name: 'attn.0', dtype: 'F32', shape: [1, 2, 3], data: f32(0, 1, 2, 3, 4, 5) }],
  });
  assert.equal(out.length, 96);
  assert.equal(headerLength(out), 64);
  assert.equal(headerText(out), '{"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}');
  assert.deepEqual(out.subarray(72), f32(0, 1, 2, 3, 4, 5));
});

test('reference vector: no tensors, no metadata is 16 bytes', async () => {
  const out = await writeAll({ tensors: [] });
  assert.equal(hex(out), '0800000000000000' + hex(new TextEncoder().encode('{}      ')));
});

test('reference vector: BF16 [2,2] 2.25,1,1,1', async () => {
  const data = new Uint8Array([0x10, 0x40, 0x80, 0x3f, 0x80, 0x3f, 0x80, 0x3f]);
  const out = await writeAll({ tensors: [{ name: 'test', dtype: 'BF16', shape: [2, 2], data }] });
  assert.equal(headerLength(out), 64);
  assert.equal(headerText(out), '{"test":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}}    ');
  assert.equal(hex(out.subarray(72)), '1040803f803f803f');
});

test('reference vectors: metadata, ordering, padding, sub-byte dtypes', async () => {
  let out = await writeAll({ tensors: [], metadata: { framework: 'pt' } });
  assert.equal(headerLength(out), 40);
  assert.equal(headerText(out), '{"__metadata__":{"framework":"pt"}}     ');

  out = await writeAll({ tensors: [{ name: 'test', dtype: 'I32', shape: [2, 2], data: new Uint8Array(16) }] });
  assert.equal(headerLength(out), 64);
  assert.equal(out.length, 8 + 64 + 16);

  out = await writeAll({
    tensors: [{ name: 'attn0', dtype: 'F32', shape: [1, 1, 2, 3], data: f32(0, 1, 2, 3, 4, 5) }],
  });
  assert.equal(headerLength(out), 72);

  out = await writeAll({ tensors: [{ name: 'attn.0', dtype: 'F4', shape: [1, 2], data: new Uint8Array([0x21]) }] });
  assert.equal(headerLength(out), 64);
  assert.equal(out.length, 73);

  // Reference order: I32 before F16 whatever the input order.
  out = await writeAll({
    tensors: [
      { name: 'test2', dtype: 'F16', shape: [2, 2], data: new Uint8Array(8).fill(2) },
      { name: 'test1', dtype: 'I32', shape: [2, 2], data: new Uint8Array(16).fill(1) },
    ],
  });
  assert.equal(headerLength(out), 128);
  const h = await inspect(out);
  assert.deepEqual(
    h.tensors.map((t) => [t.name, ...t.dataOffsets]),
    [
      ['test1', 0, 16],
      ['test2', 16, 24],
    ],
  );
  assert.deepEqual(out.subarray(136, 152), new Uint8Array(16).fill(1));

  out = await writeAll({
    tensors: [{ name: 'test1', dtype: 'I32', shape: [2, 2], data: new Uint8Array(16) }],
    metadata: { framework: 'pt' },
  });
  assert.equal(headerLength(out), 96);
});

test('input order keeps the given order', async () => {
  const w = await createWriter({
    tensors: [
      { name: 'b', dtype: 'F16', shape: [1] },
      { name: 'a', dtype: 'F32', shape: [1] },
    ],
    order: 'input',
  });
  assert.deepEqual(
    w.layout.tensors.map((t) => [t.name, t.index, ...t.dataOffsets]),
    [
      ['b', 0, 0, 2],
      ['a', 1, 2, 6],
    ],
  );
  w.abort();
});

async function reserialize(bytes) {
  const header = await inspect(bytes);
  const start = 8 + header.headerSize;
  return writeAll({
    metadata: header.metadata,
    tensors: header.tensors.map((t) => ({
      name: t.name,
      dtype: t.dtype,
      shape: t.shape,
      data: bytes.subarray(start + t.dataOffsets[0], start + t.dataOffsets[1]),
    })),
  });
}

test('re-serializing files written by Python safetensors gives identical bytes', async (t) => {
  if (skipWithoutFixtures(t)) return;
  for (const name of [
    'peft-gpt2-seqcls-cattn-cproj/adapter_model.safetensors',
    'safetensors-jl-dtypes/model.safetensors',
  ]) {
    const bytes = readFixture(name);
    const out = await reserialize(bytes);
    assert.equal(out.length, bytes.length, name);
    assert.ok(Buffer.from(out).equals(Buffer.from(bytes)), name);
  }
});

test('a written file reads back with the same tensors and bytes', async () => {
  const spec = {
    metadata: { format: 'pt', 'quote"key': 'line\nbreak' },
    tensors: [
      { name: 'w', dtype: 'F32', shape: [2, 3], data: f32(1, 2, 3, 4, 5, 6) },
      { name: 'é/\u0001', dtype: 'U8', shape: [3], data: new Uint8Array([7, 8, 9]) },
      { name: 'empty', dtype: 'F16', shape: [0, 4] },
    ],
  };
  const out = await writeAll(spec);
  const h = await inspect(out);
  assert.deepEqual(h.metadata, spec.metadata);
  const got = {};
  for await (const ev of readSafetensors(out))
    if (ev.type === 'data') got[ev.tensor] = [...(got[ev.tensor] ?? []), ...ev.bytes];
  assert.deepEqual(got, { w: [...f32(1, 2, 3, 4, 5, 6)], 'é/\u0001': [7, 8, 9] });
});

test('writeSafetensors takes data as Blob, ReadableStream, async iterable, ArrayBuffer', async () => {
  const bytes = f32(1, 2, 3, 4);
  async function* gen() {
    yield bytes.subarray(0, 3);
    yield bytes.subarray(3);
  }
  const sources = [
    new Blob([bytes]),
    countingStream([bytes.subarray(0, 5), bytes.subarray(5)]).stream,
    gen(),
    bytes.slice().buffer,
  ];
  const expected = await writeAll({ tensors: [{ name: 'x', dtype: 'F32', shape: [4], data: bytes }] });
  for (const data of sources) {
    const out = await writeAll({ tensors: [{ name: 'x', dtype: 'F32', shape: [4], data }] });
    assert.deepEqual(out, expected);
  }
});

test('writeSafetensors rejects data of the wrong length', async () => {
  for (const data of [new Uint8Array(15), new Uint8Array(17), undefined]) {
    await assert.rejects(writeAll({ tensors: [{ name: 'x', dtype: 'F32', shape: [4], data }] }), (e) => {
      return e instanceof SafetensorsError && e.code === 'InvalidArgument' && e.tensor === 'x';
    });
  }
});

test('planning errors: repeated name, reserved name, unknown dtype, bad metadata, overflow', async () => {
  const cases = [
    [
      {
        tensors: [
          { name: 'a', dtype: 'F32', shape: [1] },
          { name: 'a', dtype: 'F16', shape: [1] },
        ],
      },
      'InvalidArgument',
    ],
    [{ tensors: [{ name: '__metadata__', dtype: 'F32', shape: [1] }] }, 'InvalidArgument'],
    [{ tensors: [{ name: 'a', dtype: 'f32', shape: [1] }] }, 'UnsupportedDtype'],
    [{ tensors: [{ name: 'a', dtype: 'F32', shape: [-1] }] }, 'InvalidArgument'],
    [{ tensors: [{ name: 'a', dtype: 'F32', shape: [1.5] }] }, 'InvalidArgument'],
    [{ tensors: [], metadata: { a: 1 } }, 'InvalidArgument'],
    [{ tensors: [], order: 'sorted' }, 'InvalidArgument'],
    [{ tensors: [{ name: 'a', dtype: 'F4', shape: [3] }] }, 'MisalignedSlice'],
    [{ tensors: [{ name: 'a', dtype: 'U64', shape: [2 ** 40, 2 ** 40] }] }, 'ValidationOverflow'],
  ];
  for (const [spec, code] of cases) {
    await assert.rejects(
      createWriter(spec),
      (e) => e instanceof SafetensorsError && e.code === code,
      JSON.stringify(spec),
    );
    await assert.rejects(writeAll(spec), (e) => e.code === code);
  }
});

test('createWriter: header at once, data pushed in chunks, close checks the count', async () => {
  const w = await createWriter({
    tensors: [
      { name: 'a', dtype: 'U8', shape: [3] },
      { name: 'b', dtype: 'U16', shape: [2] },
    ],
  });
  assert.deepEqual(
    w.layout.tensors.map((t) => t.name),
    ['b', 'a'],
  );
  assert.equal(w.layout.totalSize, 8 + w.layout.headerSize + 7);
  const result = collect(w.readable);
  await w.write(new Uint8Array([1, 0, 2]));
  await w.write(new Uint8Array([0, 9, 9, 9]));
  assert.equal(w.bytesWritten, 7);
  await w.close();
  const out = await result;
  assert.equal(out.length, w.layout.totalSize);
  assert.deepEqual([...out.subarray(out.length - 7)], [1, 0, 2, 0, 9, 9, 9]);
});

test('createWriter: too many bytes or too few fail with InvalidArgument', async () => {
  let w = await createWriter({ tensors: [{ name: 'a', dtype: 'U8', shape: [2] }] });
  let result = collect(w.readable).catch((e) => e);
  await assert.rejects(w.write(new Uint8Array(3)), (e) => e.code === 'InvalidArgument');
  assert.equal((await result).code, 'InvalidArgument');
  await assert.rejects(w.write(new Uint8Array(1)), (e) => e.code === 'InvalidArgument', 'errors are sticky');

  w = await createWriter({ tensors: [{ name: 'a', dtype: 'U8', shape: [2] }] });
  result = collect(w.readable).catch((e) => e);
  await w.write(new Uint8Array(1));
  await assert.rejects(w.close(), (e) => e.code === 'InvalidArgument');
  assert.equal((await result).code, 'InvalidArgument');
});

test('createWriter: write() waits for the consumer (backpressure)', async () => {
  const size = 40 << 20;
  const w = await createWriter({ tensors: [{ name: 'a', dtype: 'U8', shape: [size] }] });
  const reader = w.readable.getReader();
  let resolved = false;
  const pending = w.write(new Uint8Array(size)).then(() => (resolved = true));
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(resolved, false, 'write stays pending while 40 MiB sit unread');
  let total = 0;
  while (!resolved) {
    const { value } = await reader.read();
    total += value.length;
    await new Promise((r) => setTimeout(r, 0));
  }
  await pending;
  const closing = w.close();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
  }
  await closing;
  assert.equal(total, w.layout.totalSize);
});

test('dispose and abort error the readable; an AbortSignal stops writeSafetensors', async () => {
  const w = await createWriter({ tensors: [{ name: 'a', dtype: 'U8', shape: [2] }] });
  const result = collect(w.readable).catch((e) => e);
  w[dispose]();
  assert.match(String((await result).message), /disposed/);

  const controller = new AbortController();
  const stream = writeSafetensors({
    signal: controller.signal,
    tensors: [
      {
        name: 'a',
        dtype: 'U8',
        shape: [4],
        data: new ReadableStream({
          pull() {
            return new Promise(() => {});
          },
        }),
      },
    ],
  });
  const reader = stream.getReader();
  const first = await reader.read(); // the header
  assert.ok(first.value.length > 8);
  setTimeout(() => controller.abort(new Error('stop writing')), 10);
  await assert.rejects(reader.read(), /stop writing/);
});

test('fixtures (when present) re-serialize in input order to a file that inspects identically', async (t) => {
  if (skipWithoutFixtures(t)) return;
  const bytes = readFixture('safetensors-jl-dtypes/model.with_metadata.safetensors');
  const header = await inspect(bytes);
  const start = 8 + header.headerSize;
  const out = await writeAll({
    order: 'input',
    metadata: header.metadata,
    tensors: header.tensors.map((t) => ({
      ...t,
      data: bytes.subarray(start + t.dataOffsets[0], start + t.dataOffsets[1]),
    })),
  });
  const again = await inspect(out);
  assert.deepEqual(again.tensors, header.tensors);
  assert.deepEqual(again.metadata, header.metadata);
});

const settledWithin = (promise, ms) =>
  Promise.race([
    promise.then(
      () => 'resolved',
      (e) => `rejected: ${e?.message ?? e}`,
    ),
    new Promise((r) => setTimeout(() => r('pending'), ms)),
  ]);

test('createWriter: concurrent writes all resolve as the consumer drains', async () => {
  const size = 20 << 20;
  const w = await createWriter({ tensors: [{ name: 'a', dtype: 'U8', shape: [3 * size] }] });
  const writes = [w.write(new Uint8Array(size)), w.write(new Uint8Array(size)), w.write(new Uint8Array(size))];
  const drained = collect(w.readable);
  assert.deepEqual(await Promise.all(writes.map((p) => settledWithin(p, 2000))), ['resolved', 'resolved', 'resolved']);
  await w.close();
  assert.equal((await drained).length, w.layout.totalSize);
});

test('createWriter: a write pending at close() resolves; pending writes reject on abort and on cancel', async () => {
  const size = 20 << 20;
  const w = await createWriter({ tensors: [{ name: 'a', dtype: 'U8', shape: [size] }] });
  const pending = w.write(new Uint8Array(size));
  const closing = w.close();
  const drained = collect(w.readable);
  assert.equal(await settledWithin(closing, 2000), 'resolved');
  assert.equal(await settledWithin(pending, 2000), 'resolved');
  assert.equal((await drained).length, w.layout.totalSize);

  const a = await createWriter({ tensors: [{ name: 'a', dtype: 'U8', shape: [2 * size] }] });
  a.readable.getReader(); // never read: both writes wait for room
  const waits = [a.write(new Uint8Array(size)), a.write(new Uint8Array(size))];
  a.abort(new Error('given up'));
  assert.deepEqual(await Promise.all(waits.map((p) => settledWithin(p, 2000))), [
    'rejected: given up',
    'rejected: given up',
  ]);

  const c = await createWriter({ tensors: [{ name: 'a', dtype: 'U8', shape: [2 * size] }] });
  const waits2 = [c.write(new Uint8Array(size)), c.write(new Uint8Array(size))];
  await c.readable.cancel(new Error('consumer left'));
  assert.deepEqual(await Promise.all(waits2.map((p) => settledWithin(p, 2000))), [
    'rejected: consumer left',
    'rejected: consumer left',
  ]);
});

test('bytesWritten keeps the real count after abort, failure and close', async () => {
  const w = await createWriter({ tensors: [{ name: 'a', dtype: 'U8', shape: [100] }] });
  collect(w.readable).catch(() => {});
  await w.write(new Uint8Array(10));
  assert.equal(w.bytesWritten, 10);
  w.abort(new Error('x'));
  assert.equal(w.bytesWritten, 10);

  const f = await createWriter({ tensors: [{ name: 'a', dtype: 'U8', shape: [100] }] });
  collect(f.readable).catch(() => {});
  await f.write(new Uint8Array(30));
  await assert.rejects(f.write(new Uint8Array(71)), (e) => e.code === 'InvalidArgument');
  assert.equal(f.bytesWritten, 30);

  const d = await createWriter({ tensors: [{ name: 'a', dtype: 'U8', shape: [100] }] });
  collect(d.readable).catch(() => {});
  await d.write(new Uint8Array(7));
  d[dispose]();
  assert.equal(d.bytesWritten, 7);

  const c = await createWriter({ tensors: [{ name: 'a', dtype: 'U8', shape: [100] }] });
  const drained = collect(c.readable);
  await c.write(new Uint8Array(100));
  await c.close();
  await drained;
  assert.equal(c.bytesWritten, 100);
});

test('writeSafetensors cancels the data sources of tensors it never reached, with the reason', async () => {
  const spec = (sources) => ({
    order: 'input',
    tensors: sources.map((data, i) => ({ name: `t${i}`, dtype: 'U8', shape: [4], data })),
  });
  const { countingIterable, countingStream } = await import('./helpers/common.mjs');

  // A length error on the first tensor: the later stream and iterator are cancelled with that error.
  let later = countingStream([new Uint8Array(4)]);
  let iter = countingIterable([new Uint8Array(4)]);
  await assert.rejects(
    collect(writeSafetensors(spec([new Uint8Array(3), later.stream, iter.iterable]))),
    (e) => e.code === 'InvalidArgument',
  );
  assert.equal(later.stats.cancelled, true);
  assert.equal(later.stats.reason?.code, 'InvalidArgument');
  assert.equal(later.stats.pulled, 0);
  assert.equal(iter.stats.returned, true);

  // The consumer cancels after the header: the open source and the unopened one both get the reason.
  const first = countingStream([new Uint8Array(1), new Uint8Array(1), new Uint8Array(1), new Uint8Array(1)]);
  later = countingStream([new Uint8Array(4)]);
  const reader = writeSafetensors(spec([first.stream, later.stream])).getReader();
  await reader.read();
  await reader.cancel('consumer stop');
  assert.equal(later.stats.cancelled, true);
  assert.equal(later.stats.reason, 'consumer stop');

  // An AbortSignal while the first source hangs.
  const controller = new AbortController();
  later = countingStream([new Uint8Array(4)]);
  let hungReason;
  const hung = new ReadableStream({
    pull() {
      return new Promise(() => {});
    },
    cancel(r) {
      hungReason = r;
    },
  });
  const r2 = writeSafetensors({ ...spec([hung, later.stream]), signal: controller.signal }).getReader();
  await r2.read();
  const stop = new Error('stop writing');
  setTimeout(() => controller.abort(stop), 10);
  await assert.rejects(r2.read(), /stop writing/);
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(hungReason, stop);
  assert.equal(later.stats.reason, stop);

  // A planning error: nothing is read, every stream is cancelled.
  later = countingStream([new Uint8Array(4)]);
  const bad = spec([new Uint8Array(4), later.stream]);
  bad.tensors[1].name = 't0';
  await assert.rejects(collect(writeSafetensors(bad)), (e) => e.code === 'InvalidArgument');
  assert.equal(later.stats.cancelled, true);
  assert.equal(later.stats.pulled, 0);
});
