// convert(): byte parity with the native CLI, input vs reference order, stream sources, errors, abort, progress.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  BAD_FIXTURES,
  collect,
  countingStream,
  fixtureNames,
  fixturePath,
  makeFile,
  nativeCli,
  pb,
  randomCuts,
  readFixture,
  rng,
  skipWithoutFixtures,
  skipWithoutNativeCli,
  split,
} from './helpers/common.mjs';

const { convert, inspect, readSafetensors, SafetensorsError } = pb;

const f32 = (...v) => new Uint8Array(new Float32Array(v).buffer);
const file = makeFile;

test('convert output equals the native CLI output byte for byte (every fixture, dtype and order)', async (t) => {
  if (skipWithoutFixtures(t)) return;
  if (skipWithoutNativeCli(t)) return;
  const dir = mkdtempSync(join(tmpdir(), 'pb-convert-'));
  try {
    for (const name of fixtureNames()) {
      if (BAD_FIXTURES[name]) continue;
      const bytes = readFixture(name);
      for (const dtype of ['bf16', 'f16', 'f32']) {
        for (const order of ['reference', 'input']) {
          const out = join(dir, 'out.safetensors');
          execFileSync(nativeCli, ['convert', fixturePath(name), out, '--dtype', dtype, '--order', order]);
          const expected = readFileSync(out);
          const got = await collect(convert(bytes, { dtype, order }));
          assert.ok(Buffer.from(got).equals(expected), `${name} ${dtype} ${order}`);
          if (order === 'input') {
            const viaStream = await collect(
              convert(countingStream(split(bytes, [5, 100, 1001])).stream, { dtype, order: 'input' }),
            );
            assert.ok(Buffer.from(viaStream).equals(expected), `${name} ${dtype} stream`);
          }
        }
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('converted values: F32 to BF16 and F16 round to nearest even; other dtypes are copied', async () => {
  const header =
    '{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"i":{"dtype":"I32","shape":[1],"data_offsets":[12,16]}}';
  const bytes = file(header, new Uint8Array([...f32(2.25, 1, 1 + 2 ** -8), 7, 0, 0, 0]));
  const out = await collect(convert(bytes, { dtype: 'bf16', order: 'reference' }));
  const h = await inspect(out);
  assert.deepEqual(
    h.tensors.map((t) => [t.name, t.dtype, ...t.dataOffsets]),
    [
      ['i', 'I32', 0, 4],
      ['a', 'BF16', 4, 10],
    ],
  );
  const data = out.subarray(8 + h.headerSize);
  assert.deepEqual([...data], [7, 0, 0, 0, 0x10, 0x40, 0x80, 0x3f, 0x80, 0x3f]);
  const f16 = await collect(convert(bytes, { dtype: 'F16', order: 'input' }));
  const h16 = await inspect(f16);
  assert.deepEqual([...f16.subarray(8 + h16.headerSize, 8 + h16.headerSize + 6)], [0x80, 0x40, 0x00, 0x3c, 0x04, 0x3c]);
});

test('stream sources convert in input order at any chunking', async (t) => {
  if (skipWithoutFixtures(t)) return;
  const random = rng(7);
  const bytes = readFixture('safetensors-jl-dtypes/model.safetensors');
  const expected = await collect(convert(bytes, { dtype: 'f16', order: 'input' }));
  for (let round = 0; round < 20; ++round) {
    const cuts = randomCuts(random, bytes.length, 1 + Math.floor(random() * 200));
    const got = await collect(convert(countingStream(split(bytes, cuts)).stream, { dtype: 'f16', order: 'input' }));
    assert.ok(Buffer.from(got).equals(Buffer.from(expected)), `cuts ${cuts.slice(0, 5)}`);
  }
  const tiny = await collect(convert(bytes, { dtype: 'f16', order: 'input', windowSize: 3, readSize: 5 }));
  assert.ok(Buffer.from(tiny).equals(Buffer.from(expected)));
});

test('reference order needs a random-access source', async () => {
  const bytes = file('{}', new Uint8Array(0));
  await assert.rejects(collect(convert(countingStream([bytes]).stream, { dtype: 'bf16', order: 'reference' })), (e) => {
    return e instanceof SafetensorsError && e.code === 'InvalidArgument';
  });
  assert.throws(() => convert(bytes, { dtype: 'bf16', order: 'sorted' }), TypeError);
  assert.throws(() => convert(bytes, {}), TypeError);
});

test('invalid input and unsupported targets error the stream with SafetensorsError', async (t) => {
  await assert.rejects(collect(convert(new Uint8Array(3), { dtype: 'bf16' })), (e) => e.code === 'HeaderTooSmall');
  await assert.rejects(
    collect(convert(countingStream([new Uint8Array(3)]).stream, { dtype: 'bf16', order: 'input' })),
    (e) => e.code === 'HeaderTooSmall',
  );
  // A target outside the CLIs' --dtype vocabulary: InvalidArgument, as `peft-bridge convert --dtype i32 --json` says.
  await assert.rejects(
    collect(convert(file('{}', new Uint8Array(0)), { dtype: 'i32' })),
    (e) => e.code === 'InvalidArgument',
  );
  const truncated = file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', f32(1, 2)).subarray(0, 70);
  await assert.rejects(
    collect(convert(countingStream([truncated]).stream, { dtype: 'bf16', order: 'input' })),
    (e) => e.code === 'MetadataIncompleteBuffer',
  );
  await assert.rejects(collect(convert(truncated, { dtype: 'bf16' })), (e) => e.code === 'MetadataIncompleteBuffer');
  if (skipWithoutFixtures(t)) return;
  const abuse = readFixture('syoyo-safetensors-cpp/safetensors_abuse_attempt_1.safetensors');
  await assert.rejects(
    collect(convert(new Blob([abuse]), { dtype: 'f32', order: 'reference' })),
    (e) => e.code === 'InvalidHeaderLength',
  );
});

test('progress and abort', async (t) => {
  if (skipWithoutFixtures(t)) return;
  const bytes = readFixture('peft-gpt2-seqcls-cattn-cproj/adapter_model.safetensors');
  const seen = [];
  const out = await collect(
    convert(new Blob([bytes]), { dtype: 'bf16', order: 'reference', onProgress: (p) => seen.push(p) }),
  );
  const last = seen.at(-1);
  assert.equal(last.bytesWritten, out.length);
  assert.equal(last.outputSize, out.length);
  assert.equal(last.inputSize, bytes.length);
  assert.equal(last.bytesRead, bytes.length);

  const controller = new AbortController();
  const { stream, stats } = countingStream(split(bytes, randomCuts(rng(3), bytes.length, 50)));
  const reader = convert(stream, { dtype: 'bf16', order: 'input', signal: controller.signal }).getReader();
  await reader.read();
  controller.abort();
  await assert.rejects(
    (async () => {
      for (;;) if ((await reader.read()).done) break;
    })(),
    (e) => e.name === 'AbortError',
  );
  assert.equal(stats.cancelled, true);
  assert.ok(stats.pulled < 51);
});

test('cancelling the output cancels the source', async (t) => {
  if (skipWithoutFixtures(t)) return;
  const bytes = readFixture('peft-gpt2-seqcls-cattn-cproj/adapter_model.safetensors');
  const { stream, stats } = countingStream(split(bytes, randomCuts(rng(4), bytes.length, 20)));
  const reader = convert(stream, { dtype: 'f32', order: 'input' }).getReader();
  await reader.read();
  await reader.cancel();
  assert.equal(stats.cancelled, true);
});

test('the converted file streams back through readSafetensors', async (t) => {
  if (skipWithoutFixtures(t)) return;
  const bytes = readFixture('mlx-lm-qwen2.5-0.5b/adapters.safetensors');
  const kinds = new Set();
  for await (const ev of readSafetensors(convert(bytes, { dtype: 'bf16' }))) kinds.add(ev.type);
  assert.deepEqual([...kinds], ['header', 'data', 'end']);
});
