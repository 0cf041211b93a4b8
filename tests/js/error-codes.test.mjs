// One table of error codes (PB_ERROR_CODES in src/core/error.h): the published SafetensorsErrorCode union in
// web/src/index.d.ts must list exactly the codes the core can raise, in the same order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { webDir } from './helpers/common.mjs';
import { getModule } from '../../web/src/init.js';

test('the .d.ts SafetensorsErrorCode union equals the core table', async () => {
  const module = await getModule();
  const core = module.errorCodes().trim().split('\n');
  const dts = readFileSync(join(webDir, 'src', 'index.d.ts'), 'utf8');
  const union = dts.match(/export type SafetensorsErrorCode =([^;]*);/);
  assert.ok(union, 'index.d.ts declares SafetensorsErrorCode');
  const names = [...union[1].matchAll(/'([A-Za-z]+)'/g)].map((m) => m[1]);
  assert.deepEqual(names, core);
});

test('an error sent to or from a worker comes back with its class, code, name and message', async () => {
  const { SafetensorsError, errorFromMessage, errorToMessage } = await import(join(webDir, 'src', 'errors.js'));
  const across = (error) => errorFromMessage(structuredClone(errorToMessage(error)));
  for (const Class of [TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError, Error]) {
    const back = across(new Class('what went wrong'));
    assert.equal(Object.getPrototypeOf(back), Class.prototype, Class.name);
    assert.equal(back.name, Class.name);
    assert.equal(back.message, 'what went wrong');
  }
  const aborted = new Error('The operation was aborted');
  aborted.name = 'AbortError';
  const back = across(aborted);
  assert.equal(back.name, 'AbortError');
  assert.ok(back instanceof Error);
  const core = across(new SafetensorsError('ShapeMismatch', 'q_proj: 4 x 4 against 4 x 8', { tensor: 'q_proj' }));
  assert.ok(core instanceof SafetensorsError);
  assert.equal(core.code, 'ShapeMismatch');
  assert.equal(core.tensor, 'q_proj');
});
