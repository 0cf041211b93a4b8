// inspect(): every fixture through every source type; streams read only as far as the header; error codes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  BAD_FIXTURES,
  countingIterable,
  countingStream,
  fixtureNames,
  fixturePath,
  makeFile,
  nativeCli,
  pb,
  readFixture,
  rejectsWith,
  skipWithoutFixtures,
  skipWithoutNativeCli,
  split,
} from './helpers/common.mjs';

const { inspect } = pb;

const file = makeFile;

test('every fixture inspects cleanly from Uint8Array, ArrayBuffer, Blob, stream and async iterable', async (t) => {
  if (skipWithoutFixtures(t)) return;
  for (const name of fixtureNames()) {
    const bytes = readFixture(name);
    if (BAD_FIXTURES[name]) {
      for (const source of [bytes, new Blob([bytes]), countingStream([bytes]).stream])
        await rejectsWith(inspect(source), BAD_FIXTURES[name]);
      continue;
    }
    const header = await inspect(bytes);
    assert.equal(header.fileSize, bytes.length, name);
    assert.equal(header.fileSize, 8 + header.headerSize + header.dataSize, name);
    for (const tensor of header.tensors) {
      assert.equal(typeof tensor.name, 'string');
      assert.equal(tensor.byteLength, tensor.dataOffsets[1] - tensor.dataOffsets[0]);
    }
    assert.deepEqual(
      await inspect(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length)),
      header,
      name,
    );
    assert.deepEqual(await inspect(new Blob([bytes])), header, name);
    assert.deepEqual(await inspect(countingStream(split(bytes, [3, 11])).stream), header, name);
    assert.deepEqual(await inspect(countingIterable([bytes]).iterable), header, name);
    assert.deepEqual(await inspect({ size: bytes.length, read: (o, n) => bytes.subarray(o, o + n) }), header, name);
  }
});

test('the abuse fixture fails with InvalidHeaderLength at offset 0', async (t) => {
  if (skipWithoutFixtures(t)) return;
  const bytes = readFixture('syoyo-safetensors-cpp/safetensors_abuse_attempt_1.safetensors');
  await assert.rejects(inspect(bytes), (e) => e.code === 'InvalidHeaderLength' && e.offset === 0 && e.tensor === null);
});

test('inspect matches the native CLI --json header', async (t) => {
  if (skipWithoutFixtures(t)) return;
  if (skipWithoutNativeCli(t)) return;
  for (const name of fixtureNames()) {
    if (BAD_FIXTURES[name]) continue;
    const native = JSON.parse(execFileSync(nativeCli, ['inspect', fixturePath(name), '--json'], { encoding: 'utf8' }));
    const header = await inspect(readFixture(name));
    for (const key of ['headerSize', 'dataSize', 'fileSize', 'metadata', 'tensors', 'parameters', 'totalParameters'])
      assert.deepEqual(header[key], native[key], `${name}: ${key}`);
  }
});

test('a stream is read only as far as the header, then cancelled', async () => {
  const header =
    '{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}';
  const bytes = file(header, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]));
  const headerEnd = bytes.length - 8;
  // One chunk per 8 bytes: the header ends inside chunk ceil(headerEnd / 8); nothing after it may be pulled.
  const cuts = [];
  for (let c = 8; c < bytes.length; c += 8) cuts.push(c);
  const { stream, stats } = countingStream(split(bytes, cuts));
  const h = await inspect(stream);
  assert.equal(h.tensors.length, 2);
  assert.equal(stats.pulled, Math.ceil(headerEnd / 8));
  assert.equal(stats.cancelled, true);

  const it = countingIterable(split(bytes, cuts));
  await inspect(it.iterable);
  assert.equal(it.stats.pulled, Math.ceil(headerEnd / 8));
  assert.equal(it.stats.returned, true);
});

test('a stream source is not checked for coverage; a sized source is', async () => {
  const bytes = file('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', new Uint8Array([1, 2, 3]));
  await rejectsWith(inspect(bytes), 'MetadataIncompleteBuffer');
  await rejectsWith(inspect(new Blob([bytes])), 'MetadataIncompleteBuffer');
  const h = await inspect(countingStream([bytes]).stream);
  assert.equal(h.dataSize, 2);
});

test('error codes, tensors and offsets', async () => {
  await rejectsWith(inspect(new Uint8Array(5)), 'HeaderTooSmall');
  await rejectsWith(inspect(countingStream([new Uint8Array(5)]).stream), 'HeaderTooSmall');
  const big = new Uint8Array(16);
  new DataView(big.buffer).setBigUint64(0, 100000001n, true);
  await rejectsWith(inspect(big), 'HeaderTooLarge');
  await rejectsWith(inspect(file('{"a":1}')), 'InvalidHeaderDeserialization');
  await rejectsWith(inspect(file('[]')), 'InvalidHeaderDeserialization');
  const utf8 = file('{}');
  utf8[9] = 0xff;
  await rejectsWith(inspect(utf8), 'InvalidHeader');
  await assert.rejects(
    inspect(file('{"a":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}', new Uint8Array(3))),
    (e) => e.code === 'InvalidOffset' && e.tensor === 'a',
  );
  await rejectsWith(
    inspect(file('{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}', new Uint8Array(2))),
    'MisalignedSlice',
  );
  await rejectsWith(
    inspect(file('{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,2]}}', new Uint8Array(2))),
    'TensorInvalidInfo',
  );
  await rejectsWith(
    inspect(file('{"a":{"dtype":"U8","shape":[18446744073709551615,2,0],"data_offsets":[0,0]}}')),
    'ValidationOverflow',
  );
  await rejectsWith(
    inspect(file('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', new Uint8Array(1))),
    'MetadataIncompleteBuffer',
  );
  // A stream that ends inside the header.
  await rejectsWith(inspect(countingStream([file('{}').subarray(0, 12)]).stream), 'InvalidHeaderLength');
});

test('metadata and empty files', async () => {
  const h = await inspect(file('{"__metadata__":{"format":"pt"}}'));
  assert.deepEqual(h.metadata, { format: 'pt' });
  assert.deepEqual(h.tensors, []);
  const empty = await inspect(file('{}'));
  assert.equal(empty.metadata, null);
  assert.equal(empty.fileSize, 16);
});

test('bad source types throw TypeError; an aborted signal rejects', async () => {
  await assert.rejects(inspect(42), TypeError);
  await assert.rejects(inspect(countingStream(['nope']).stream), TypeError);
  const controller = new AbortController();
  controller.abort(new Error('stop'));
  await assert.rejects(inspect(file('{}'), { signal: controller.signal }), /stop/);
});

test('the header built from the compact table equals the JSON rendering: escapes, non-ASCII names, uint64 dims, scalars', async () => {
  const { inspectRendered, headerFromJson } = await import('../../web/src/ops/inspect.js');
  const json = JSON.stringify({
    __metadata__: { format: 'pt', 'ключ': 'значение \u00e9' },
    'plain.weight': { dtype: 'BF16', shape: [2, 3], data_offsets: [0, 12] },
    'esc\\"aped\n\u0001name': { dtype: 'F32', shape: [1], data_offsets: [12, 16] },
    'ünïcödé.名前.🙂': { dtype: 'I8', shape: [], data_offsets: [16, 17] },
    'zero.huge': { dtype: 'F64', shape: [0, 'BIG1', 'BIG2'], data_offsets: [17, 17] },
    'bools': { dtype: 'BOOL', shape: [3], data_offsets: [17, 20] },
  })
    .replace('"BIG1"', '18446744073709551615')
    .replace('"BIG2"', '9007199254740993'); // uint64 text JS numbers cannot spell
  const bytes = file(json, new Uint8Array(20));
  const viaTable = await inspect(bytes);
  const viaJson = headerFromJson((await inspectRendered(bytes, { render: 'json' })).json);
  assert.deepEqual(viaTable, viaJson);
  assert.deepEqual(
    viaTable.tensors.map((t) => t.name).sort(),
    ['bools', 'esc\\"aped\n\u0001name', 'plain.weight', 'zero.huge', 'ünïcödé.名前.🙂'].sort(),
  );
  assert.deepEqual(
    viaTable.tensors.find((t) => t.name === 'zero.huge').shape,
    [0, 18446744073709551615, 9007199254740993],
  );
  assert.deepEqual(viaTable.tensors.find((t) => t.name.startsWith('ü')).shape, []);
  assert.deepEqual(viaTable.metadata, { format: 'pt', 'ключ': 'значение \u00e9' });
});

test('an all-ASCII header: names cut from its decoded text, escaped ones (\\u00e9, \\") decoded apart, as the JSON rendering', async () => {
  const { inspectRendered, headerFromJson } = await import('../../web/src/ops/inspect.js');
  // JSON.stringify keeps é as is; written as \u00e9 the header's bytes are all ASCII while the name is not.
  const json = JSON.stringify({
    'model.layers.0.self_attn.q_proj.weight': { dtype: 'BF16', shape: [2, 3], data_offsets: [0, 12] },
    'caf\u00e9.weight': { dtype: 'F32', shape: [1], data_offsets: [12, 16] },
    'quote"d': { dtype: 'I8', shape: [4], data_offsets: [16, 20] },
    'b': { dtype: 'U8', shape: [1], data_offsets: [20, 21] },
  }).replace('\u00e9', '\\u00e9');
  assert.ok(/^[\x20-\x7e]*$/.test(json), 'the header is ASCII');
  const bytes = file(json, new Uint8Array(21));
  const viaTable = await inspect(bytes);
  assert.deepEqual(viaTable, headerFromJson((await inspectRendered(bytes, { render: 'json' })).json));
  assert.deepEqual(
    viaTable.tensors.map((t) => t.name),
    ['model.layers.0.self_attn.q_proj.weight', 'caf\u00e9.weight', 'quote"d', 'b'],
  );
});
