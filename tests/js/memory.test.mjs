// Heap exhaustion in the Embind layer: a window or an output buffer that cannot be allocated fails the call
// with a SafetensorsError and never lets JS copy to (or read from) address 0. Its own file, so the process whose
// heap these tests fill runs nothing else.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { makeFile, pb } from './helpers/common.mjs';
import { errorFromHandle } from '../../web/src/errors.js';
import { NativeHandle } from '../../web/src/handles.js';
import { getModule } from '../../web/src/init.js';

const { SafetensorsError } = pb;
const module = await getModule();
const HUGE = 2 ** 32 - 4096; // more than the 4 GiB heap can ever hold next to anything else

test('window(): an allocation failure returns 0 and keeps the old window', () => {
  const reader = new module.Reader(-1);
  try {
    const ptr = reader.window(100);
    assert.ok(ptr > 0);
    assert.equal(reader.window(HUGE), 0);
    assert.equal(reader.window(2 ** 32 - 1), 0, 'sizes whose page rounding would wrap fail too');
    assert.equal(reader.window(100), ptr, 'the old window is still there');
  } finally {
    reader.delete();
  }
});

test('input(): a window that cannot be reserved throws IoError before copying anything', () => {
  const handle = new NativeHandle(module, new module.Reader(-1), 2 ** 33);
  const heap0 = module.HEAPU8.slice(0, 64);
  // Only length and subarray are used before the window is reserved; no 4 GiB array is needed.
  const bytes = { length: HUGE, subarray: () => assert.fail('nothing may be copied') };
  try {
    assert.throws(
      () => handle.input('feed', bytes),
      (e) =>
        e instanceof SafetensorsError &&
        e.code === 'IoError' &&
        e.message === `out of memory: cannot reserve ${HUGE} bytes`,
    );
    assert.deepEqual(module.HEAPU8.slice(0, 64), heap0, 'heap address 0 untouched');
  } finally {
    handle.close();
  }
});

test('converter output that cannot be buffered fails the call with IoError', () => {
  // F16 -> F32 doubles the bytes: the convert job's 4 MiB read needs 8 MiB of output buffer in one supply.
  const n = 4 << 20;
  const header = makeFile(JSON.stringify({ w: { dtype: 'F16', shape: [n], data_offsets: [0, 2 * n] } }));
  const bytes = new Uint8Array(header.length + 2 * n).fill(0x3c);
  bytes.set(header);
  const options = { dtype: 'F32', order: 'input', inputSize: bytes.length };
  const conv = new NativeHandle(module, new module.JobHandle('convert', JSON.stringify(options)), 2 * n);
  const eaters = [];
  try {
    let step = conv.handle.next();
    for (; step.kind !== 'read'; step = conv.handle.next()) {
      if (step.kind !== 'readHeader') continue;
      conv.fillWindow(bytes.subarray(step.begin, step.end));
      assert.ok(conv.handle.supply(step.end - step.begin));
    }
    const piece = bytes.subarray(step.begin, step.end);
    assert.ok(conv.handle.window(piece.length) > 0); // the data's window, reserved before the heap fills
    // Fill the heap, leaving a few MiB: not enough for the converted output.
    const spare = new module.Reader(-1);
    assert.ok(spare.window(6 << 20) > 0);
    for (let size = 1 << 30; size >= 1 << 20; size >>= 1) {
      for (;;) {
        const eater = new module.Reader(-1);
        eaters.push(eater);
        if (eater.window(size) === 0) break;
      }
    }
    spare.delete();
    conv.fillWindow(piece);
    assert.equal(conv.handle.supply(piece.length), false);
    const e = errorFromHandle(conv.handle);
    assert.ok(
      e instanceof SafetensorsError &&
        e.code === 'IoError' &&
        /^out of memory: cannot reserve \d+ bytes$/.test(e.message),
      e.message,
    );
    assert.equal(conv.handle.next(), null, 'the job stays failed');
  } finally {
    conv.close();
    for (const e of eaters) e.delete();
  }
});
