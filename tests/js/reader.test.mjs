// readSafetensors(): event shape, chunk-split invariance on every fixture, errors after partial events,
// early exit and abort.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  BAD_FIXTURES,
  countingIterable,
  countingStream,
  fixtureNames,
  pb,
  randomCuts,
  readFixture,
  rng,
  skipWithoutFixtures,
  split,
  makeFile,
} from './helpers/common.mjs';

const { readSafetensors, SafetensorsError } = pb;

/** Events with data spans merged per tensor (spans depend on the chunking, their concatenation does not). */
async function readAll(source, options) {
  const events = [];
  let header = null;
  const data = new Map();
  let error = null;
  try {
    for await (const ev of readSafetensors(source, options)) {
      events.push(ev.type);
      if (ev.type === 'header') header = ev.header;
      if (ev.type === 'data') {
        assert.equal(header.tensors[ev.tensorIndex].name, ev.tensor);
        const prev = data.get(ev.tensorIndex) ?? { parts: [], length: 0 };
        if (ev.offset !== prev.length) assert.equal(ev.offset, prev.length, 'spans arrive in order, without gaps');
        if (ev.bytes.buffer.byteLength !== ev.bytes.length) assert.fail('bytes is a copy of its own, not a heap view');
        prev.parts.push(ev.bytes);
        prev.length += ev.bytes.length;
        data.set(ev.tensorIndex, prev);
      }
    }
  } catch (e) {
    error = e;
  }
  const merged = [...data.entries()].map(([i, { parts }]) => [i, Buffer.concat(parts).toString('hex')]);
  const kinds = events.filter((k, i) => k !== 'data' || events[i - 1] !== 'data');
  return { header, merged, kinds, error: error && { name: error.name, code: error.code, message: error.message } };
}

test('events: header, data spans reassembling the file, end', async (t) => {
  if (skipWithoutFixtures(t)) return;
  for (const name of fixtureNames()) {
    const bytes = readFixture(name);
    const r = await readAll(bytes);
    if (BAD_FIXTURES[name]) {
      assert.equal(r.error.code, BAD_FIXTURES[name]);
      continue;
    }
    assert.equal(r.error, null, name);
    assert.equal(r.kinds[0], 'header');
    assert.equal(r.kinds.at(-1), 'end');
    const start = 8 + r.header.headerSize;
    for (const [i, hexData] of r.merged) {
      const tensor = r.header.tensors[i];
      const expected = Buffer.from(
        bytes.subarray(start + tensor.dataOffsets[0], start + tensor.dataOffsets[1]),
      ).toString('hex');
      assert.equal(hexData, expected, `${name}: ${tensor.name}`);
    }
    const nonEmpty = r.header.tensors.filter((t) => t.byteLength > 0).length;
    assert.equal(r.merged.length, nonEmpty, name);
  }
});

test('chunk-split property: random cuts give the same events for every fixture', async (t) => {
  if (skipWithoutFixtures(t)) return;
  const random = rng(0x5eed);
  for (const name of fixtureNames()) {
    const bytes = readFixture(name);
    const whole = await readAll(bytes);
    const rounds = bytes.length > 1 << 20 ? 2 : 6;
    for (let round = 0; round < rounds; ++round) {
      const count = 1 + Math.floor(random() * Math.min(64, bytes.length));
      const cuts = randomCuts(random, bytes.length, count);
      const viaStream = await readAll(countingStream(split(bytes, cuts)).stream);
      assert.deepEqual(viaStream.kinds, whole.kinds, `${name} cuts ${cuts.slice(0, 8)}`);
      assert.deepEqual(viaStream.merged, whole.merged, name);
      assert.equal(viaStream.error?.code, whole.error?.code, name); // messages say "stream" vs "file"
    }
    // Byte by byte near the start (prefix and header boundaries), as an async iterable.
    const small = [...Array(Math.min(bytes.length, 300)).keys()].slice(1);
    const viaIter = await readAll(countingIterable(split(bytes, small)).iterable);
    assert.deepEqual(viaIter.merged, whole.merged, name);
    assert.equal(viaIter.error?.code, whole.error?.code, name);
    // A tiny heap window forces many pieces per chunk (small files only: one wasm call per 7 bytes).
    if (bytes.length <= 1 << 20) {
      const tiny = await readAll(bytes, { windowSize: 7 });
      assert.deepEqual(tiny.merged, whole.merged, name);
    }
  }
});

const file = makeFile;
const TWO =
  '{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[0],"data_offsets":[4,4]},"c":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}';

test('a truncated stream fails with MetadataIncompleteBuffer after the events it did deliver', async () => {
  const bytes = file(TWO, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]));
  const seen = [];
  await assert.rejects(
    (async () => {
      for await (const ev of readSafetensors(countingStream([bytes.subarray(0, bytes.length - 2)]).stream))
        seen.push(ev.type);
    })(),
    (e) => e instanceof SafetensorsError && e.code === 'MetadataIncompleteBuffer' && e.tensor === 'c',
  );
  assert.deepEqual(seen, ['header', 'data', 'data']);
});

test('trailing bytes in a stream fail after the data', async () => {
  const bytes = file(TWO, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9]));
  const seen = [];
  await assert.rejects(
    (async () => {
      for await (const ev of readSafetensors(countingStream([bytes]).stream)) seen.push(ev.type);
    })(),
    (e) => e.code === 'MetadataIncompleteBuffer' && e.offset === bytes.length - 1,
  );
  assert.deepEqual(seen, ['header', 'data', 'data']);
});

test('leaving the loop early cancels the stream', async () => {
  const bytes = file(TWO, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]));
  const { stream, stats } = countingStream(split(bytes, [bytes.length - 8, bytes.length - 4]));
  for await (const ev of readSafetensors(stream)) if (ev.type === 'header') break;
  assert.equal(stats.cancelled, true);
  assert.equal(stats.pulled, 1);
});

test('an AbortSignal stops the read and cancels the source', async () => {
  const bytes = file(TWO, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]));
  const controller = new AbortController();
  const { stream, stats } = countingStream(split(bytes, [bytes.length - 8, bytes.length - 4]));
  const seen = [];
  await assert.rejects(
    (async () => {
      for await (const ev of readSafetensors(stream, { signal: controller.signal })) {
        seen.push(ev.type);
        if (ev.type === 'header') controller.abort();
      }
    })(),
    (e) => e.name === 'AbortError',
  );
  assert.deepEqual(seen, ['header']);
  assert.equal(stats.cancelled, true);
});

test('an abort while waiting for a chunk rejects at once', async () => {
  const controller = new AbortController();
  const never = new ReadableStream({
    pull() {
      return new Promise(() => {});
    },
  });
  const it = readSafetensors(never, { signal: controller.signal });
  const pending = it.next();
  setTimeout(() => controller.abort(new Error('gave up')), 10);
  await assert.rejects(pending, /gave up/);
});

test('progress reports bytes read', async () => {
  const bytes = file(TWO, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]));
  const seen = [];
  for await (const _ of readSafetensors(new Blob([bytes]), { onProgress: (p) => seen.push(p), readSize: 16 })) void _;
  assert.deepEqual(seen.at(-1), { bytesRead: bytes.length, totalBytes: bytes.length });
  assert.ok(seen.length > 1);
});

test('an abort while a random-access read is pending rejects at once', async () => {
  const bytes = file(TWO, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]));
  const controller = new AbortController();
  const source = { size: bytes.length, read: () => new Promise(() => {}) }; // a read that never completes
  const it = readSafetensors(source, { signal: controller.signal });
  const pending = it.next();
  setTimeout(() => controller.abort(new Error('gave up on the read')), 10);
  const outcome = await Promise.race([
    pending.then(
      () => 'resolved',
      (e) => e.message,
    ),
    new Promise((r) => setTimeout(() => r('still pending'), 2000)),
  ]);
  assert.equal(outcome, 'gave up on the read');
});

test('a failure or abort passes its reason to the stream it cancels', async () => {
  const bytes = file(TWO, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]));
  const controller = new AbortController();
  const { stream, stats } = countingStream(split(bytes, [bytes.length - 8, bytes.length - 4]));
  const reason = new Error('enough');
  await assert.rejects(
    (async () => {
      for await (const ev of readSafetensors(stream, { signal: controller.signal }))
        if (ev.type === 'header') controller.abort(reason);
    })(),
    /enough/,
  );
  assert.equal(stats.cancelled, true);
  assert.equal(stats.reason, reason);
});
