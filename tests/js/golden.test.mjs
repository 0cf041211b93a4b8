// The npm CLI's `merge` and the JS API's mergeShards against PEFT's own merge_and_unload() on the golden corpus
// (tests/golden): every tensor of PEFT's merged model, per case, bit for bit or within the manifest's tolerance
// for that tensor (tests/golden/README.md). The API must also give the npm CLI's bytes. No Python needed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, collect, nativeCli, pb, repoRoot, skipWithoutNativeCli } from './helpers/common.mjs';

const goldenDir = join(repoRoot, 'tests', 'golden');
const node = await import(join(repoRoot, 'web', 'src', 'node.js')); // the entry that reads folders by path
const manifest = JSON.parse(readFileSync(join(goldenDir, 'MANIFEST.json'), 'utf8'));

/** Every tensor of one .safetensors file into `out`: name -> { dtype, shape, bytes }. */
function readFile(path, out) {
  const data = new Uint8Array(readFileSync(path));
  const n = Number(new DataView(data.buffer, data.byteOffset).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(data.subarray(8, 8 + n)));
  for (const [key, info] of Object.entries(header)) {
    if (key === '__metadata__') continue;
    const [b, e] = info.data_offsets;
    out.set(key, { dtype: info.dtype, shape: info.shape, bytes: data.subarray(8 + n + b, 8 + n + e) });
  }
  return data;
}

/** Every tensor of every .safetensors file in `dir` (and each file's bytes as `file:<name>`). */
function readFolder(dir) {
  const out = new Map();
  for (const name of readdirSync(dir)
    .filter((n) => n.endsWith('.safetensors'))
    .sort())
    out.set(`file:${name}`, readFile(join(dir, name), out));
  return out;
}

const WIDTH = { F32: 4, BF16: 2, F16: 2 };

/** Element i as an integer ordered like the float (differences count ulps) and as a number. */
function element(t, i) {
  const view = new DataView(t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength);
  if (t.dtype === 'F32') {
    const bits = view.getInt32(4 * i, true);
    return { ordered: bits < 0 ? -(bits & 0x7fffffff) : bits, value: view.getFloat32(4 * i, true) };
  }
  const h = view.getUint16(2 * i, true);
  const ordered = h & 0x8000 ? -(h & 0x7fff) : h;
  let value;
  if (t.dtype === 'BF16') {
    value = new Float32Array(new Uint32Array([h << 16]).buffer)[0];
  } else {
    const exp = (h >> 10) & 0x1f;
    const man = h & 0x3ff;
    value = exp === 0 ? man * 2 ** -24 : exp === 31 ? Infinity : (man + 1024) * 2 ** (exp - 25);
    if (h & 0x8000) value = -value;
  }
  return { ordered, value };
}

/**
 * Compares the tensors of our folder `gotDir` to PEFT's `want` (name -> tensor): bit-identical, or within the
 * manifest's tolerance for the tensors changed_tensors lists. Returns { problems, identical, total, worst }.
 */
function compare(
  item,
  gotDir,
  want = readFolder(join(goldenDir, 'corpus', item.name, 'peft_merged')),
  tolerances = item.changed_tensors,
) {
  const got = readFolder(gotDir);
  const problems = [];
  let identical = 0;
  let total = 0;
  let worst = 0;
  const names = (m) => [...m.keys()].filter((k) => !k.startsWith('file:'));
  for (const name of names(got)) if (!want.has(name)) problems.push(`extra tensor ${name}`);
  for (const name of names(want)) {
    const w = want.get(name);
    const g = got.get(name);
    if (!g) {
      problems.push(`missing tensor ${name}`);
      continue;
    }
    if (g.dtype !== w.dtype || JSON.stringify(g.shape) !== JSON.stringify(w.shape)) {
      problems.push(`${name}: ${g.dtype}${JSON.stringify(g.shape)} vs PEFT's ${w.dtype}${JSON.stringify(w.shape)}`);
      continue;
    }
    const { max_ulp: maxUlp = 0, abs_tol: absTol = 0 } = tolerances[name] ?? {};
    const width = WIDTH[w.dtype];
    const count = width ? w.bytes.length / width : w.bytes.length;
    let bad = 0;
    let tensorWorst = 0;
    for (let i = 0; i < count; ++i) {
      ++total;
      if (!width) {
        if (g.bytes[i] === w.bytes[i]) ++identical;
        else ++bad;
        continue;
      }
      const a = element(g, i);
      const b = element(w, i);
      const ulp = Math.abs(a.ordered - b.ordered);
      if (ulp === 0) {
        ++identical;
        continue;
      }
      tensorWorst = Math.max(tensorWorst, ulp);
      if (ulp > maxUlp && Math.abs(a.value - b.value) > absTol) ++bad;
    }
    worst = Math.max(worst, tensorWorst);
    if (bad) problems.push(`${name}: ${bad} of ${count} elements beyond ${maxUlp} ulp (worst ${tensorWorst})`);
  }
  return { problems, identical, total, worst };
}

function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-golden-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The JS API's mergeShards over a corpus folder, written as name -> bytes. */
async function apiMerge(baseDir, adapterDir, options = {}) {
  const indexPath = join(baseDir, 'model.safetensors.index.json');
  const base = {
    index: existsSync(indexPath) ? readFileSync(indexPath, 'utf8') : null,
    config: new Uint8Array(readFileSync(join(baseDir, 'config.json'))),
    open: (name) => new Uint8Array(readFileSync(join(baseDir, name))),
  };
  const adapter = {
    weights: new Uint8Array(readFileSync(join(adapterDir, 'adapter_model.safetensors'))),
    config: new Uint8Array(readFileSync(join(adapterDir, 'adapter_config.json'))),
  };
  const files = {};
  for await (const { path, stream } of pb.mergeShards({ base, adapter, ...options }))
    files[path] = await collect(stream);
  return files;
}

test('the golden corpus has cases and every case folder', () => {
  assert.ok(manifest.cases.length >= 20, `${manifest.cases.length} cases`);
  for (const item of manifest.cases)
    for (const part of ['base', 'adapter', 'peft_merged', 'logits.safetensors'])
      assert.ok(existsSync(join(goldenDir, 'corpus', item.name, part)), `${item.name}/${part}`);
});

for (const item of manifest.cases) {
  test(`golden ${item.name} (${item.dtype}): npm CLI merge and mergeShards equal PEFT's merge_and_unload`, async (t) => {
    const dir = tempDir(t);
    const caseDir = join(goldenDir, 'corpus', item.name);
    const out = join(dir, 'merged');
    const r = spawnSync(
      process.execPath,
      [cliPath, 'merge', '--base', join(caseDir, 'base'), '--adapter', join(caseDir, 'adapter'), '--out', out],
      { encoding: 'utf8', timeout: 120000 },
    );
    let verdict;
    let stats = { identical: 0, total: 0, worst: 0 };
    if (r.status !== 0) {
      verdict = `merge refused (exit ${r.status}): ${r.stderr.trim()}`;
    } else {
      stats = compare(item, out);
      verdict = stats.problems.join('; ');
      // The API streams the same files the npm CLI writes, byte for byte.
      const files = await apiMerge(join(caseDir, 'base'), join(caseDir, 'adapter'));
      for (const [name, bytes] of Object.entries(files))
        assert.deepEqual(bytes, new Uint8Array(readFileSync(join(out, name))), `mergeShards ${name}`);
      assert.deepEqual(Object.keys(files).sort(), readdirSync(out).sort());
    }
    t.diagnostic(
      `${item.name}: ${verdict ? `${verdict} - ` : ''}${stats.identical}/${stats.total} identical to PEFT, worst ${stats.worst} ulp`,
    );
    if (item.known_failure) {
      assert.ok(verdict, `listed as a known failure but now agrees with PEFT: ${JSON.stringify(item.known_failure)}`);
    } else {
      assert.equal(verdict, '', verdict);
    }
  });
}

// `unmerge` of our merge against PEFT's unmerge (merge_adapter() then unmerge_adapter()): the tensors PEFT's merge
// changed equal peft_unmerged.safetensors within the manifest's unmerge tolerance for them, the others are the base's bit for
// bit; mergeShards({ unmerge: true }) gives the npm CLI's bytes. Where the manifest says unmerge is refused (DoRA,
// copies, trainable tokens), the npm CLI refuses it.
for (const item of manifest.cases) {
  test(`golden ${item.name}: npm CLI unmerge of our merge equals PEFT's unmerge`, async (t) => {
    assert.ok(item.unmerge, 'generate.py --unmerged has not recorded this case');
    const dir = tempDir(t);
    const caseDir = join(goldenDir, 'corpus', item.name);
    const adapterDir = join(caseDir, 'adapter');
    const unmerge = (base, out) =>
      spawnSync(process.execPath, [cliPath, 'unmerge', '--base', base, '--adapter', adapterDir, '--out', out], {
        encoding: 'utf8',
        timeout: 120000,
      });
    if (item.unmerge.refused) {
      const r = unmerge(join(caseDir, 'peft_merged'), join(dir, 'unmerged'));
      assert.notEqual(r.status, 0, `unmerge must be refused: ${item.unmerge.refused}`);
      assert.equal(existsSync(join(dir, 'unmerged')), false);
      return;
    }
    // Our merge (the API's bytes are the npm CLI's: the merge test above), written as a folder.
    const merged = join(dir, 'merged');
    mkdirSync(merged);
    for (const [name, bytes] of Object.entries(await apiMerge(join(caseDir, 'base'), adapterDir)))
      writeFileSync(join(merged, name), bytes);
    const out = join(dir, 'unmerged');
    const r = unmerge(merged, out);
    assert.equal(r.status, 0, r.stderr);
    const want = readFolder(join(caseDir, 'base'));
    const changed = new Map();
    readFile(join(caseDir, 'peft_unmerged.safetensors'), changed);
    assert.equal(changed.size, item.unmerge.tensors);
    for (const [name, tensor] of changed) want.set(name, tensor);
    const stats = compare(item, out, want, item.unmerge.changed_tensors);
    t.diagnostic(
      `${item.name} unmerge: ${stats.problems.length ? `${stats.problems.join('; ')} - ` : ''}` +
        `${stats.identical}/${stats.total} identical to PEFT's unmerge, worst ${stats.worst} ulp`,
    );
    assert.deepEqual(stats.problems, []);
    const files = await apiMerge(merged, adapterDir, { unmerge: true });
    assert.deepEqual(Object.keys(files).sort(), readdirSync(out).sort());
    for (const [name, bytes] of Object.entries(files))
      assert.deepEqual(bytes, new Uint8Array(readFileSync(join(out, name))), `mergeShards({ unmerge }) ${name}`);
  });
}

// Every architecture case: `translate --to F` then back `--to peft` through the JS API (translateAdapter: the
// WASM core the npm CLI runs, in process) gives PEFT's own adapter tensors bit for bit for each format the naming
// table can spell, and refuses the others (the manifest's `translate`, derived from the table by
// tests/golden/generate.py); every file it writes is the native CLI's byte for byte (GoldenTranslate checks the
// native CLI's round trips against PEFT too). The npm CLI's own file handling of `translate` is compared with
// the native CLI's in cli.test.mjs; spawning it here for all 76 cases x 6 steps took 6 minutes of the suite.
for (const item of manifest.cases.filter((c) => c.translate)) {
  test(`golden ${item.name}: translate round trips equal PEFT's adapter, and the native CLI's bytes`, async (t) => {
    if (skipWithoutNativeCli(t)) return;
    const dir = tempDir(t);
    const caseDir = join(goldenDir, 'corpus', item.name);
    const baseConfig = join(caseDir, 'base', 'config.json');
    /** translateAdapter of folder `from` into folder `to`; also the native CLI into `to`-native, compared. */
    const translate = async (from, to, format) => {
      const native = spawnSync(
        nativeCli,
        ['translate', from, `${to}-native`, '--to', format, '--base-config', baseConfig, '-q'],
        { encoding: 'utf8', timeout: 120000 },
      );
      let result;
      try {
        result = await node.translateAdapter(from, { to: format, baseConfig: readFileSync(baseConfig) });
      } catch (e) {
        assert.notEqual(native.status, 0, `${format}: the API refused (${e.message}) but the native CLI did not`);
        return e;
      }
      // The API refuses to drop tensors as the CLIs do (without allowPartial): what it writes holds every one.
      assert.equal(result.rejected, 0, `${format}: the API dropped ${result.rejected} tensor(s) without allowPartial`);
      assert.equal(native.status, 0, `${format}: the native CLI refused what the API wrote: ${native.stderr}`);
      mkdirSync(to);
      for (const f of result.files) writeFileSync(join(to, f.name), f.bytes);
      assert.deepEqual(readdirSync(to).sort(), readdirSync(`${to}-native`).sort(), `${format}: files`);
      for (const f of result.files)
        assert.deepEqual(f.bytes, new Uint8Array(readFileSync(join(`${to}-native`, f.name))), `${format}: ${f.name}`);
      return null;
    };
    const original = readFolder(join(caseDir, 'adapter'));
    for (const [format, want] of Object.entries(item.translate)) {
      const mid = join(dir, format);
      const back = join(dir, `${format}-peft`);
      const refused = await translate(join(caseDir, 'adapter'), mid, format);
      if (want === 'refused') {
        assert.ok(refused, `${format}: the table cannot name every module, so it must be refused`);
        continue;
      }
      assert.equal(refused, null, `--to ${format}: ${refused?.message}`);
      const again = await translate(mid, back, 'peft');
      assert.equal(again, null, `${format} --to peft: ${again?.message}`);
      const got = readFolder(back);
      const tensors = (m) => [...m.keys()].filter((k) => !k.startsWith('file:')).sort();
      assert.deepEqual(tensors(got), tensors(original), format);
      for (const name of tensors(original)) {
        const [a, b] = [got.get(name), original.get(name)];
        assert.equal(a.dtype, b.dtype, `${format}: ${name}`);
        assert.deepEqual(a.shape, b.shape, `${format}: ${name}`);
        assert.deepEqual(a.bytes, b.bytes, `${format}: ${name} is not PEFT's tensor bit for bit`);
      }
    }
  });
}
