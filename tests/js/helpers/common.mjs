// Shared test helpers: the package under test, fixtures, the native CLI, stream builders.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

export const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
export const webDir = join(repoRoot, 'web');
export const cliPath = join(webDir, 'bin', 'peft-bridge.mjs');
export const wasmPath = join(webDir, 'dist', 'peft_bridge_wasm.wasm');
// The third-party fixtures: vendored in tests/fixtures (PROVENANCE.md there), else ../shared/fixtures next to
// the repository (PB_FIXTURES=dir names another). Tests skip when there is none, except under
// PB_REQUIRE_FIXTURES=1 (.ci/run): then they fail.
const fixtureCandidates = process.env.PB_FIXTURES
  ? [process.env.PB_FIXTURES]
  : [join(repoRoot, 'tests', 'fixtures'), fileURLToPath(new URL('../../../../shared/fixtures', import.meta.url))];
export const fixturesDir = fixtureCandidates.find((d) => existsSync(d)) ?? fixtureCandidates[0];
export const requireFixtures = process.env.PB_REQUIRE_FIXTURES === '1';
export const nativeCli = process.env.PB_NATIVE_CLI ?? join(repoRoot, 'build', 'native', 'peft-bridge');

if (!existsSync(wasmPath)) {
  throw new Error(`web/dist/peft_bridge_wasm.wasm is missing: run scripts/build-wasm.sh first`);
}

export const pb = await import(join(webDir, 'src', 'index.js'));

/** Awaits `promise`'s rejection with a SafetensorsError of `code` (and a message matching `pattern`, if given). */
export async function rejectsWith(promise, code, pattern) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof pb.SafetensorsError, `expected SafetensorsError, got ${e?.stack ?? e}`);
    assert.equal(e.name, 'SafetensorsError');
    assert.equal(e.code, code, e.message);
    if (pattern) assert.match(e.message, pattern);
    return true;
  });
}
const { concat } = await import(join(webDir, 'src', 'handles.js'));

export const hasFixtures = existsSync(fixturesDir);
export const hasNativeCli = existsSync(nativeCli);

/** Every *.safetensors under the fixtures directory, sorted, as paths relative to it. */
export function fixtureNames() {
  if (!hasFixtures) return [];
  const out = [];
  const walk = (dir, rel) => {
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      const r = rel ? `${rel}/${name}` : name;
      if (statSync(p).isDirectory()) walk(p, r);
      else if (name.endsWith('.safetensors')) out.push(r);
    }
  };
  walk(fixturesDir, '');
  return out;
}

export const BAD_FIXTURES = { 'syoyo-safetensors-cpp/safetensors_abuse_attempt_1.safetensors': 'InvalidHeaderLength' };

export function fixturePath(name) {
  return join(fixturesDir, name);
}

export function readFixture(name) {
  return new Uint8Array(readFileSync(fixturePath(name)));
}

/** Skips `t` where the native CLI the two-CLI tests compare against is not built; under PB_REQUIRE_FIXTURES=1
 *  (.ci/run) that is a failure instead. Returns true if it skipped. */
export function skipWithoutNativeCli(t) {
  if (hasNativeCli) return false;
  if (requireFixtures) throw new Error(`${nativeCli} is not built and PB_REQUIRE_FIXTURES=1`);
  t.skip(`${nativeCli} not built`);
  return true;
}

/** Skips the test when the fixtures are absent (returns true if it did); fails it under PB_REQUIRE_FIXTURES=1. */
export function skipWithoutFixtures(t) {
  if (hasFixtures) return false;
  if (requireFixtures)
    throw new Error(`fixtures not found (${fixtureCandidates.join(', ')}) and PB_REQUIRE_FIXTURES=1`);
  t.skip(`fixtures not found at ${fixturesDir}`);
  return true;
}

/** A deterministic PRNG (mulberry32). */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `bytes` split at the given sorted cut positions. */
export function split(bytes, cuts) {
  const parts = [];
  let prev = 0;
  for (const c of [...cuts, bytes.length]) {
    parts.push(bytes.slice(prev, c));
    prev = c;
  }
  return parts;
}

/** `count` random cut positions in [1, length). */
export function randomCuts(random, length, count) {
  const cuts = new Set();
  for (let i = 0; i < count && length > 1; ++i) cuts.add(1 + Math.floor(random() * (length - 1)));
  return [...cuts].sort((a, b) => a - b);
}

/** A ReadableStream over `parts` that records how many chunks were pulled and whether it was cancelled. */
export function countingStream(parts) {
  const stats = { pulled: 0, cancelled: false, reason: undefined };
  let i = 0;
  const stream = new ReadableStream(
    {
      pull(controller) {
        if (i >= parts.length) return controller.close();
        stats.pulled += 1;
        controller.enqueue(parts[i++]);
      },
      cancel(reason) {
        stats.cancelled = true;
        stats.reason = reason;
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, stats };
}

/** An async iterable over `parts` that records pulls and return(). */
export function countingIterable(parts) {
  const stats = { pulled: 0, returned: false };
  const iterable = {
    [Symbol.asyncIterator]() {
      let i = 0;
      return {
        async next() {
          if (i >= parts.length) return { done: true, value: undefined };
          stats.pulled += 1;
          return { done: false, value: parts[i++] };
        },
        async return() {
          stats.returned = true;
          return { done: true, value: undefined };
        },
      };
    },
  };
  return { iterable, stats };
}

/** Reads a ReadableStream<Uint8Array> to one Uint8Array. */
/** Reads a stream to the end and joins its chunks (with the package's own concat). */
export async function collect(stream) {
  const parts = [];
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
  }
  return concat(parts) ?? new Uint8Array(0);
}

export function hex(bytes) {
  return Buffer.from(bytes).toString('hex');
}

/** A safetensors file from header JSON text and data bytes (header padded with spaces to 8 unless pad is false). */
export function makeFile(json, data = new Uint8Array(0), { pad = true } = {}) {
  let text = json;
  if (pad) while (text.length % 8) text += ' ';
  const body = new TextEncoder().encode(text);
  const out = new Uint8Array(8 + body.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(body.length), true);
  out.set(body, 8);
  out.set(data, 8 + body.length);
  return out;
}

/** `n` float32 values, all `value`, as bytes. */
export function f32Bytes(n, value) {
  const data = new Uint8Array(4 * n);
  new Float32Array(data.buffer).fill(value);
  return data;
}

/** A PEFT adapter's safetensors bytes: rank-2 lora_A/lora_B factors (for `features` x `features` layers), all
 * 0.25, per module path. */
export function peftAdapterBytes(modules, features = 4) {
  const header = {};
  let offset = 0;
  const size = 4 * 2 * features;
  for (const m of modules) {
    for (const [role, shape] of [
      ['lora_A', [2, features]],
      ['lora_B', [features, 2]],
    ]) {
      header[`base_model.model.${m}.${role}.weight`] = { dtype: 'F32', shape, data_offsets: [offset, offset + size] };
      offset += size;
    }
  }
  return makeFile(JSON.stringify(header), f32Bytes(offset / 4, 0.25));
}

/** A PEFT adapter folder in `dir`: peftAdapterBytes(modules, features) and a config with r 2, lora_alpha 4 and
 * `targets` as target_modules. Returns `dir`. */
export function writePeftAdapterDir(dir, modules, targets, features = 4) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'adapter_model.safetensors'), peftAdapterBytes(modules, features));
  writeFileSync(
    join(dir, 'adapter_config.json'),
    JSON.stringify({ peft_type: 'LORA', r: 2, lora_alpha: 4, target_modules: targets }),
  );
  return dir;
}
