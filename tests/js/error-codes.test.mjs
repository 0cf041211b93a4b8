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
