// The WASM reader against the Rust safetensors crate's recorded verdicts (tests/rust_oracle/README.md):
// every vector of tests/native/data/rust_oracle_vectors.txt through inspect() from bytes (size known: every
// check, coverage included), and every one of them up to 64 KiB again through readSafetensors() from a
// stream cut at random (size unknown: the push path, to the end of the data). Same rules as
// tests/native/rust_oracle_vectors_test.cc.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { countingStream, pb, repoRoot, rng, split } from './helpers/common.mjs';

const { inspect, readSafetensors } = pb;
const DOCUMENTED_REASONS = new Set(['repeated-key', 'serde-form', 'repeated-key+serde-form']);

function decode(encoding) {
  const parts = [];
  for (const token of encoding.split(' ')) {
    if (!token) continue;
    if (token.startsWith('@')) {
      const b = Buffer.alloc(8);
      b.writeBigUInt64LE(BigInt(token.slice(1)));
      parts.push(b);
      continue;
    }
    let text = token;
    let count = 1;
    const star = token.lastIndexOf('*');
    if (star >= 0) {
      count = Number(token.slice(star + 1));
      text = token.slice(0, star);
    }
    const bytes = [];
    for (let i = 0; i < text.length; i++) {
      if (text[i] === '%') {
        bytes.push(parseInt(text.slice(i + 1, i + 3), 16));
        i += 2;
      } else bytes.push(text.charCodeAt(i));
    }
    const piece = Buffer.from(bytes);
    parts.push(count === 1 ? piece : Buffer.alloc(piece.length * count, piece));
  }
  return new Uint8Array(Buffer.concat(parts));
}

const CRC_TABLE = Array.from({ length: 256 }, (_, i) => {
  let c = i;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(bytes) {
  let c = ~0;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (~c >>> 0).toString(16).padStart(8, '0');
}

/** The crate's digest (tests/rust_oracle/src/main.rs `digest`) of our header; null where a number is past 2^53. */
function digest(header) {
  const big = (n) => !Number.isSafeInteger(n);
  if (header.tensors.some((t) => t.shape.some(big) || t.dataOffsets.some(big))) return null;
  const byBytes = (a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
  let text = '';
  for (const t of [...header.tensors].sort((a, b) => byBytes(a.name, b.name)))
    text += `${t.name}\0${t.dtype}\0${t.shape.join(',')}\0${t.dataOffsets[0]},${t.dataOffsets[1]}\n`;
  if (header.metadata !== null) {
    text += '\x01';
    for (const k of Object.keys(header.metadata).sort(byBytes)) text += `${k}\0${header.metadata[k]}\n`;
  }
  let x = 0xcbf29ce484222325n;
  for (const b of Buffer.from(text, 'utf8')) x = ((x ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return x.toString(16).padStart(16, '0');
}

const vectors = readFileSync(join(repoRoot, 'tests/native/data/rust_oracle_vectors.txt'), 'utf8')
  .split('\n')
  .filter((l) => l && !l.startsWith('#'))
  .map((l) => {
    const [id, crate, crateDigest, ours, reason, check, label, encoding] = l.split('\t');
    return { id, crate, crateDigest, ours, reason, check, label, bytes: decode(encoding) };
  });

const allowed = (v) => new Set(v.ours === '=' ? v.crate.split('|') : [v.ours]);

async function verdict(source) {
  try {
    return { verdict: 'ok', header: await inspect(source) };
  } catch (e) {
    if (!e.code) throw e;
    return { verdict: e.code };
  }
}

async function streamVerdict(stream) {
  try {
    for await (const ev of readSafetensors(stream)) void ev;
    return 'ok';
  } catch (e) {
    if (!e.code) throw e;
    return e.code;
  }
}

test('the vectors decode to the generator bytes and list only documented differences', () => {
  assert.ok(vectors.length >= 5000, `${vectors.length} vectors`);
  for (const v of vectors) {
    assert.equal(v.check, `${v.bytes.length}:${crc32(v.bytes)}`, v.id);
    if (v.ours !== '=') assert.ok(DOCUMENTED_REASONS.has(v.reason), `${v.id}: ${v.reason}`);
  }
});

test(`inspect() of every vector from bytes gives the crate's verdict and, accepted, its tensors`, async (t) => {
  const wrong = [];
  let digests = 0;
  let beyondSafeIntegers = 0;
  for (const v of vectors) {
    const r = await verdict(v.bytes);
    if (!allowed(v).has(r.verdict)) {
      wrong.push(`${v.id} (${v.label}): crate ${v.crate}, expected ${v.ours}, ours ${r.verdict}`);
      continue;
    }
    if (r.header && v.crateDigest !== '-') {
      const d = digest(r.header);
      if (d === null) beyondSafeIntegers++;
      else {
        digests++;
        if (d !== v.crateDigest) wrong.push(`${v.id} (${v.label}): accepted, but not the tensors the crate read`);
      }
    }
  }
  assert.deepEqual(wrong.slice(0, 40), []);
  // Dims or offsets past 2^53 cannot be compared as JS numbers (docs/format.md); the native suite compares them.
  assert.ok(beyondSafeIntegers < 50, `${beyondSafeIntegers} headers with numbers past 2^53`);
  assert.ok(digests > 500, `${digests} accepted headers compared`);
  t.diagnostic(
    `${vectors.length} vectors; ${digests} accepted headers compared, ${beyondSafeIntegers} not (past 2^53)`,
  );
});

test(`readSafetensors() of every vector up to 64 KiB from a stream cut at random gives the crate's verdict`, async (t) => {
  const random = rng(11);
  const wrong = [];
  let count = 0;
  for (const v of vectors) {
    if (v.bytes.length > 65536) continue;
    count++;
    const cuts = [];
    for (let i = 1 + Math.floor(random() * 16); i < v.bytes.length; i += 1 + Math.floor(random() * 16)) cuts.push(i);
    const ours = await streamVerdict(countingStream(split(v.bytes, cuts)).stream);
    if (!allowed(v).has(ours)) wrong.push(`${v.id} (${v.label}): crate ${v.crate}, expected ${v.ours}, ours ${ours}`);
  }
  assert.deepEqual(wrong.slice(0, 40), []);
  assert.ok(count > 5000, `${count} vectors streamed`);
  t.diagnostic(`${count} of ${vectors.length} vectors streamed`);
});
