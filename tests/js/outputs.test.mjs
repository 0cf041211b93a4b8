// The output policy (src/app/output_policy.h) in both CLIs: outputs never overwrite or alias inputs, a non-empty
// output directory needs --force (which removes only stale model files), a directory in the way of an output is
// found before anything is renamed, dropped tensors fail the run unless --allow-partial, and links leaving an
// input directory are refused unless --follow-links. Every case runs the native and the npm CLI in two identical
// trees (relative paths, so messages match) and compares stdout, stderr, exit status and the resulting tree.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeFile, skipWithoutNativeCli } from './helpers/common.mjs';
import { both } from './helpers/two-trees.mjs';

// ---- small inputs ----

const Q = 'model.layers.0.self_attn.q_proj';
const V = 'model.layers.0.self_attn.v_proj';

function f32(n, value) {
  const data = new Uint8Array(4 * n);
  new Float32Array(data.buffer).fill(value);
  return data;
}

/** A PEFT adapter for a 4x4 llama: rank-2 factors for q and v. `weights`: the file name. */
function writeAdapter(dir, { weights = 'adapter_model.safetensors', extra = {}, config = {} } = {}) {
  mkdirSync(dir, { recursive: true });
  const header = {};
  let offset = 0;
  for (const m of [Q, V])
    for (const [role, shape] of [
      ['lora_A', [2, 4]],
      ['lora_B', [4, 2]],
    ]) {
      header[`base_model.model.${m}.${role}.weight`] = { dtype: 'F32', shape, data_offsets: [offset, offset + 32] };
      offset += 32;
    }
  for (const [name, shape] of Object.entries(extra)) {
    header[name] = { dtype: 'F32', shape, data_offsets: [offset, offset + 4 * shape.reduce((a, b) => a * b, 1)] };
    offset = header[name].data_offsets[1];
  }
  writeFileSync(join(dir, weights), makeFile(JSON.stringify(header), f32(offset / 4, 0.25)));
  writeFileSync(
    join(dir, 'adapter_config.json'),
    JSON.stringify({ peft_type: 'LORA', r: 2, lora_alpha: 4, target_modules: ['q_proj', 'v_proj'], ...config }),
  );
}

const BASE_CONFIG = JSON.stringify({
  architectures: ['LlamaForCausalLM'],
  model_type: 'llama',
  hidden_size: 4,
  num_attention_heads: 1,
});

/** A 4x4 llama base: model.safetensors and config.json, or two shards with their index. */
function writeBase(dir, { sharded = false, config = true } = {}) {
  mkdirSync(dir, { recursive: true });
  const tensor = { dtype: 'F32', shape: [4, 4], data_offsets: [0, 64] };
  if (sharded) {
    const names = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
    writeFileSync(join(dir, names[0]), makeFile(JSON.stringify({ [`${Q}.weight`]: tensor }), f32(16, 1)));
    writeFileSync(join(dir, names[1]), makeFile(JSON.stringify({ [`${V}.weight`]: tensor }), f32(16, 2)));
    const index = {
      metadata: { total_size: 128 },
      weight_map: { [`${Q}.weight`]: names[0], [`${V}.weight`]: names[1] },
    };
    writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify(index));
  } else {
    const header = { [`${Q}.weight`]: tensor, [`${V}.weight`]: { ...tensor, data_offsets: [64, 128] } };
    writeFileSync(join(dir, 'model.safetensors'), makeFile(JSON.stringify(header), f32(32, 1)));
  }
  if (config) writeFileSync(join(dir, 'config.json'), BASE_CONFIG);
}

const standard = (root) => {
  writeAdapter(join(root, 'rob'));
  writeBase(join(root, 'base'));
};

/** Asserts a refusal: exit 1, the message on stderr, and nothing touched. `stdout`: what was printed before the
 * failure (a merge's plan, when the failure came once the work had started). */
function assertRefused(r, message, stdout = '') {
  assert.equal(r.status, 1, r.stderr);
  assert.equal(r.stdout, stdout);
  assert.equal(r.stderr, `error: ${message}\n`);
  assert.deepEqual(r.after, r.before, 'nothing touched');
}

// ---- aliasing ----

test('translate DIR DIR is refused with exit 1 and leaves the adapter as it was', (t) => {
  if (skipWithoutNativeCli(t)) return;
  for (const extra of [[], ['--force']]) {
    for (const out of ['rob', 'rob/', './rob']) {
      const r = both(t, standard, ['translate', 'rob', out, '--to', 'kohya', ...extra]);
      assertRefused(
        r,
        `InvalidArgument: OUT_DIR \`${out}\` is the input directory IN_DIR \`rob\`; translate never writes over its inputs`,
      );
    }
  }
});

test('OUT inside IN is refused, and the directory is not created', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const r = both(t, standard, ['translate', 'rob', 'rob/out', '--to', 'mlx']);
  assertRefused(
    r,
    'InvalidArgument: OUT_DIR `rob/out` is inside the input directory IN_DIR `rob`; translate never writes over its inputs',
  );
});

test('merge --out equal to or inside the adapter or the base directory is refused', (t) => {
  if (skipWithoutNativeCli(t)) return;
  for (const [out, message] of [
    ['rob', '--out `rob` is the input directory --adapter `rob`'],
    ['rob/merged', '--out `rob/merged` is inside the input directory --adapter `rob`'],
    ['base', '--out `base` is the input directory --base `base`'],
    ['base/merged', '--out `base/merged` is inside the input directory --base `base`'],
  ]) {
    const r = both(t, standard, ['merge', '--base', 'base', '--adapter', 'rob', '--out', out, '--force']);
    assertRefused(r, `InvalidArgument: ${message}; merge never writes over its inputs`);
  }
});

test('an adapter whose weights file is model.safetensors cannot be merged into its own directory', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const setup = (root) => {
    writeAdapter(join(root, 'ad'), { weights: 'model.safetensors' });
    writeBase(join(root, 'base'));
  };
  let r = both(t, setup, ['merge', '--base', 'base', '--adapter', 'ad', '--out', 'ad', '--force']);
  assertRefused(
    r,
    'InvalidArgument: --out `ad` is the input directory --adapter `ad`; merge never writes over its inputs',
  );
  // Named by its file, the directory is no input of its own, but the file still is.
  r = both(t, setup, ['merge', '--base', 'base', '--adapter', 'ad/model.safetensors', '--out', 'ad', '--force']);
  assertRefused(
    r,
    'InvalidArgument: `ad/model.safetensors` is --adapter `ad/model.safetensors`; merge never writes over its inputs',
  );
});

test('a --base-config inside --out is never written over', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const setup = (root) => {
    standard(root);
    mkdirSync(join(root, 'out'));
    writeFileSync(join(root, 'out', 'config.json'), BASE_CONFIG);
  };
  for (const extra of [[], ['--force']]) {
    const r = both(t, setup, [
      'merge',
      '--base',
      'base',
      '--adapter',
      'rob',
      '--base-config',
      'out/config.json',
      '--out',
      'out',
      ...extra,
    ]);
    assertRefused(
      r,
      'InvalidArgument: `out/config.json` is --base-config `out/config.json`; merge never writes over its inputs',
    );
  }
});

test('convert OUT equal to IN (or a hard link of it) is refused with exit 1', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const r = both(t, standard, ['convert', 'base/model.safetensors', 'base/model.safetensors', '--dtype', 'bf16']);
  assertRefused(
    r,
    'InvalidArgument: OUT `base/model.safetensors` is IN `base/model.safetensors`; convert never writes over its inputs',
  );
  const r2 = both(t, standard, [
    'convert',
    'base/model.safetensors',
    'base/../base/model.safetensors',
    '--dtype',
    'f16',
  ]);
  assertRefused(
    r2,
    'InvalidArgument: OUT `base/../base/model.safetensors` is IN `base/model.safetensors`; convert never writes over its inputs',
  );
});

// A naming table (any valid one: its content does not matter to the policy).
const TABLE = JSON.stringify({
  model_types: ['toymodel'],
  architectures: ['ToyForCausalLM'],
  gguf_arch: 'toy',
  body_prefixes: ['model.'],
  modules: [
    { hf: 'blocks.{N}.attn.wq', canonical: 'layers/{N}/attention/query', gguf: 'blk.{N}.attn_q', kind: 'linear' },
  ],
});

test('a --naming-table inside --out is never written over or removed, whatever its name and with --force', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const setup = (root) => {
    standard(root);
    mkdirSync(join(root, 'out'));
    writeFileSync(join(root, 'out', 'config.json'), TABLE);
    writeFileSync(join(root, 'out', 'adapter_config.json'), TABLE);
  };
  const merge = ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out', '--force'];
  let r = both(t, setup, [...merge, '--naming-table', 'out/config.json']);
  assertRefused(
    r,
    'InvalidArgument: `out/config.json` is --naming-table `out/config.json`; merge never writes over its inputs',
  );
  r = both(t, setup, [...merge, '--naming-table', 'out/adapter_config.json']);
  assertRefused(
    r,
    'InvalidArgument: --force would remove `out/adapter_config.json`, which is --naming-table `out/adapter_config.json`; merge never writes over its inputs',
  );
  r = both(t, setup, [
    'translate',
    'rob',
    'out',
    '--to',
    'peft',
    '--force',
    '--naming-table',
    'out/adapter_config.json',
  ]);
  assertRefused(
    r,
    'InvalidArgument: `out/adapter_config.json` is --naming-table `out/adapter_config.json`; translate never writes over its inputs',
  );
});

// ---- what a killed run left ----

test('our own temporaries a killed run left in --out are removed and do not make it non-empty', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const stale = [
    'model.safetensors.tmp-AbC123',
    'config.json.tmp-x_Y-9z',
    'model-00002-of-00002.safetensors.old-000000',
  ];
  for (const extra of [[], ['--force']]) {
    const setup = (root) => {
      standard(root);
      mkdirSync(join(root, 'out'));
      for (const name of stale) writeFileSync(join(root, 'out', name), 'left by a killed run');
      if (extra.length) writeFileSync(join(root, 'out', 'README.md'), 'keep me');
    };
    const r = both(t, setup, ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out', '-q', ...extra]);
    assert.equal(r.status, 0, r.stderr);
    const expected = ['out/config.json', 'out/model.safetensors', ...(extra.length ? ['out/README.md'] : [])].sort();
    assert.deepEqual(
      Object.keys(r.after)
        .filter((n) => n.startsWith('out/'))
        .sort(),
      expected,
    );
  }
});

test('a commit a killed run left half done is completed from its journal before anything else', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const journal =
    'peft-bridge commit journal 1\n' +
    'rename model.safetensors.tmp-AAAAAA\tmodel.safetensors\n' +
    'rename config.json.tmp-BBBBBB\tconfig.json\n' +
    'remove model.safetensors.index.json\n' +
    'aside model-00001-of-00002.safetensors.old-CCCCCC\n';
  const setup = (root) => {
    standard(root);
    const out = join(root, 'out');
    mkdirSync(out);
    writeFileSync(join(out, 'model.safetensors'), 'old weights');
    writeFileSync(join(out, 'model.safetensors.tmp-AAAAAA'), 'new weights');
    writeFileSync(join(out, 'config.json.tmp-BBBBBB'), 'new config');
    writeFileSync(join(out, 'model.safetensors.index.json'), 'old index');
    writeFileSync(join(out, 'model-00001-of-00002.safetensors.old-CCCCCC'), 'old shard');
    writeFileSync(join(out, '.peft-bridge-commit'), journal);
  };
  // Completed, then judged: the directory holds that run's model, so without --force it is not empty.
  const r = both(t, setup, ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out']);
  assert.equal(r.status, 1);
  assert.equal(
    r.stderr,
    'error: InvalidArgument: --out `out` is not empty (config.json, model.safetensors); pass --force to replace the model files in it (other files are kept)\n',
  );
  const files = Object.fromEntries(
    Object.entries(r.after)
      .filter(([n]) => n.startsWith('out/'))
      .map(([n, b]) => [n, Buffer.from(b, 'base64').toString()]),
  );
  assert.deepEqual(files, { 'out/config.json': 'new config', 'out/model.safetensors': 'new weights' });
  // A journal we never wrote is left alone, with a precise refusal.
  const bad = (root) => {
    standard(root);
    mkdirSync(join(root, 'out'));
    writeFileSync(
      join(root, 'out', '.peft-bridge-commit'),
      'peft-bridge commit journal 1\nrename ../base/config.json\tconfig.json\n',
    );
  };
  assertRefused(
    both(t, bad, ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out', '--force']),
    'InvalidArgument: `out/.peft-bridge-commit` is not a commit journal peft-bridge wrote (line 2); remove it once you have checked the directory',
  ); // Nor is a file larger than any journal we write read into memory: refused by its size (a sparse file one byte past the bound).
  const huge = (root) => {
    standard(root);
    mkdirSync(join(root, 'out'));
    writeFileSync(join(root, 'out', '.peft-bridge-commit'), 'peft-bridge commit journal 1\n');
    truncateSync(join(root, 'out', '.peft-bridge-commit'), 16 * 2 ** 20 + 1);
  };
  assertRefused(
    both(t, huge, ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out', '--force']),
    'InvalidArgument: `out/.peft-bridge-commit` is not a commit journal peft-bridge wrote (it is 16777217 bytes; a journal is at most 16777216); remove it once you have checked the directory',
  );
});

// ---- non-empty output directories and --force ----

test('a non-empty --out is refused without --force; with it stale model files go and other files stay', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const setup = (root) => {
    standard(root);
    writeBase(join(root, 'out'), { sharded: true, config: false }); // an older sharded merge
    writeFileSync(join(root, 'out', 'README.md'), 'keep me');
    writeFileSync(join(root, 'out', 'adapter_config.json'), '{}');
    mkdirSync(join(root, 'out', 'notes'));
  };
  const args = ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out'];
  const refused = both(t, setup, args);
  assertRefused(
    refused,
    'InvalidArgument: --out `out` is not empty (README.md, adapter_config.json, model-00001-of-00002.safetensors, ' +
      'model-00002-of-00002.safetensors, model.safetensors.index.json, notes); pass --force to replace the model files in it (other files are kept)',
  );
  const r = both(t, setup, [...args, '--force']);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(
    Object.keys(r.after).filter((n) => n.startsWith('out/')),
    ['out/README.md', 'out/config.json', 'out/model.safetensors', 'out/notes'],
  );
  assert.equal(Buffer.from(r.after['out/README.md'], 'base64').toString(), 'keep me');
});

test("translate --force into an older output: the new files replace, the other format's weights go", (t) => {
  if (skipWithoutNativeCli(t)) return;
  const setup = (root) => {
    standard(root);
    mkdirSync(join(root, 'out'));
    writeFileSync(join(root, 'out', 'adapters.safetensors'), 'old mlx weights');
    writeFileSync(join(root, 'out', 'adapter_config.json'), 'old config');
    writeFileSync(join(root, 'out', 'tokenizer.json'), '{}');
  };
  const r = both(t, setup, ['translate', 'rob', 'out', '--to', 'peft', '--force']);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(
    Object.keys(r.after).filter((n) => n.startsWith('out/')),
    ['out/adapter_config.json', 'out/adapter_model.safetensors', 'out/tokenizer.json'],
  );
  assert.notEqual(r.after['out/adapter_config.json'], Buffer.from('old config').toString('base64'));
});

test('a directory named config.json in --out: refused before anything is written or renamed', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const setup = (root) => {
    standard(root);
    mkdirSync(join(root, 'out', 'config.json'), { recursive: true });
    writeFileSync(join(root, 'out', 'model.safetensors'), 'old');
  };
  for (const extra of [[], ['--force']]) {
    const r = both(t, setup, ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out', ...extra]);
    assertRefused(
      r,
      'InvalidArgument: merge cannot replace what is in the way of its output files:\n  out/config.json is a directory',
    );
  }
});

// ---- dropped tensors ----

test('translate to kohya of an adapter with a modules_to_save head fails listing it; --allow-partial warns', (t) => {
  if (skipWithoutNativeCli(t)) return;
  // A classifier head saved whole (modules_to_save), as PEFT writes it for sequence classification.
  const setup = (root) =>
    writeAdapter(join(root, 'cls'), {
      extra: { 'base_model.model.score.weight': [2, 4] },
      config: { modules_to_save: ['score'], task_type: 'SEQ_CLS' },
    });
  const reason = 'kohya LoRA files hold only LoRA factors; a full modules_to_save tensor has no place in them';
  const message = `translate would drop 1 tensor(s); pass --allow-partial to write the rest anyway:\n  base_model.model.score.weight: ${reason}`;
  for (const extra of [[], ['--json'], ['--dry-run']]) {
    const r = both(t, setup, ['translate', 'cls', 'out', '--to', 'kohya', ...extra]);
    if (extra.includes('--json')) {
      assert.equal(r.status, 1);
      assert.equal(r.stderr, '');
      assert.deepEqual(JSON.parse(r.stdout).error, { code: 'UnresolvedTensor', message, tensor: null, offset: null });
      assert.deepEqual(r.after, r.before);
    } else assertRefused(r, `UnresolvedTensor: ${message}`);
  }
  for (const extra of [['--json'], []]) {
    const r = both(t, setup, ['translate', 'cls', 'out', '--to', 'kohya', '--allow-partial', ...extra]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stderr, `warning: dropped base_model.model.score.weight: ${reason}\n`);
    if (extra.includes('--json')) {
      const summary = JSON.parse(r.stdout);
      assert.deepEqual(
        summary.tensors.filter((m) => m.to === null),
        [{ from: 'base_model.model.score.weight', to: null, reason }],
      );
      assert.equal(summary.rejected, 1);
    } else assert.match(r.stdout, /\n  rejected base_model\.model\.score\.weight: /);
    assert.ok(r.after['out/adapter_model.safetensors']);
  }
  // PEFT holds the head: nothing dropped, no warning.
  const peft = both(t, setup, ['translate', 'cls', 'out', '--to', 'peft']);
  assert.equal(peft.status, 0, peft.stderr);
  assert.equal(peft.stderr, '');
});

test('merge with an adapter tensor it cannot apply fails listing it; --allow-partial warns and merges the rest', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const setup = (root) => {
    writeAdapter(join(root, 'rob'), {
      extra: { 'base_model.model.model.layers.0.self_attn.q_proj.lora_C.weight': [2] },
    });
    writeBase(join(root, 'base'));
  };
  const args = ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out'];
  const refused = both(t, setup, args);
  assert.equal(refused.status, 1);
  assert.match(
    refused.stderr,
    /^error: UnresolvedTensor: merge would drop 1 tensor\(s\); pass --allow-partial to write the rest anyway:\n  base_model\.model\.model\.layers\.0\.self_attn\.q_proj\.lora_C\.weight: .+\n$/,
  );
  assert.deepEqual(refused.after, refused.before);
  const r = both(t, setup, [...args, '--allow-partial', '--json']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(
    r.stderr,
    /^warning: dropped base_model\.model\.model\.layers\.0\.self_attn\.q_proj\.lora_C\.weight: .+\n$/,
  );
  assert.equal(JSON.parse(r.stdout).unmatchedKeys.length, 1);
  assert.ok(r.after['out/model.safetensors']);
});

// ---- links ----

test('a shard linked outside the base directory is refused unless --follow-links', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const setup = (root) => {
    standard(root);
    mkdirSync(join(root, 'elsewhere'));
    writeBase(join(root, 'elsewhere'), { config: false });
    rmSync(join(root, 'base', 'model.safetensors'));
    symlinkSync('../elsewhere/model.safetensors', join(root, 'base', 'model.safetensors'));
    mkdirSync(join(root, 'base', 'sub'));
    cpSync(join(root, 'base', 'config.json'), join(root, 'base', 'sub', 'config.json'));
    rmSync(join(root, 'base', 'config.json'));
    symlinkSync('sub/config.json', join(root, 'base', 'config.json')); // stays inside: fine
  };
  const args = ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out'];
  const refused = both(t, setup, args);
  assert.equal(refused.status, 1);
  assert.match(
    refused.stderr,
    /^error: InvalidArgument: merge: 1 input file\(s\) are links leading outside their directory; pass --follow-links to read them anyway:\n  base\/model\.safetensors -> <root>\/elsewhere\/model\.safetensors \(outside base\)\n$/,
  );
  assert.deepEqual(refused.after, refused.before);
  const r = both(t, setup, [...args, '--follow-links']);
  assert.equal(r.status, 0, r.stderr);
  assert.ok(r.after['out/model.safetensors']);
  // Named directly, a file is read wherever it leads.
  const direct = both(t, setup, ['merge', '--base', 'base/model.safetensors', '--adapter', 'rob', '--out', 'out2']);
  assert.equal(direct.status, 0, direct.stderr);
});

test("merged shards of a read-only base get the mode of new files in both CLIs, not their input's", (t) => {
  if (skipWithoutNativeCli(t)) return;
  // The npm CLI copies a shard whose layout the merge keeps whole first (copyFile, which gives the copy its
  // source's mode), then writes the merged tensors over it.
  for (const sharded of [false, true]) {
    const setup = (root) => {
      writeAdapter(join(root, 'rob'));
      writeBase(join(root, 'base'), { sharded });
      for (const name of readdirSync(join(root, 'base'))) chmodSync(join(root, 'base', name), 0o400);
    };
    const r = both(t, setup, ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out']);
    assert.equal(r.status, 0, r.stderr);
    const shard = sharded ? 'out/model-00001-of-00002.safetensors' : 'out/model.safetensors';
    assert.notEqual(r.after[shard], r.before[shard.replace('out/', 'base/')], 'the merge changed the shard');
  }
});

test('an adapter file linked outside IN_DIR is refused unless --follow-links', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const setup = (root) => {
    writeAdapter(join(root, 'real'));
    mkdirSync(join(root, 'rob'));
    symlinkSync('../real/adapter_model.safetensors', join(root, 'rob', 'adapter_model.safetensors'));
    cpSync(join(root, 'real', 'adapter_config.json'), join(root, 'rob', 'adapter_config.json'));
  };
  const refused = both(t, setup, ['translate', 'rob', 'out', '--to', 'mlx']);
  assert.equal(refused.status, 1);
  assert.match(
    refused.stderr,
    /rob\/adapter_model\.safetensors -> <root>\/real\/adapter_model\.safetensors \(outside rob\)\n$/,
  );
  const r = both(t, setup, ['translate', 'rob', 'out', '--to', 'mlx', '--follow-links']);
  assert.equal(r.status, 0, r.stderr);
});

// ---- all or nothing ----

test('a commit failing half-way restores every file it had moved aside (an immutable stale shard)', (t) => {
  if (skipWithoutNativeCli(t)) return;
  // chattr +i makes a file impossible to rename or remove, even for the owner: the commit meets the failure
  // after it has moved the files it replaces aside.
  const locked = [];
  t.after(() => {
    for (const path of locked) spawnSync('chattr', ['-i', path]);
  });
  const probe = mkdtempSync(join(tmpdir(), 'pb-outputs-probe-'));
  writeFileSync(join(probe, 'f'), 'x');
  const canLock = spawnSync('chattr', ['+i', join(probe, 'f')]).status === 0;
  spawnSync('chattr', ['-i', join(probe, 'f')]);
  rmSync(probe, { recursive: true, force: true });
  if (!canLock) return t.skip('chattr +i is not available here (needs root and ext4-like file systems)');
  const setup = (root) => {
    standard(root);
    mkdirSync(join(root, 'out'));
    writeFileSync(join(root, 'out', 'model.safetensors'), 'old weights');
    writeFileSync(join(root, 'out', 'config.json'), 'old config');
    const stale = join(root, 'out', 'model-00001-of-00002.safetensors');
    writeFileSync(stale, 'stale shard');
    assert.equal(spawnSync('chattr', ['+i', stale]).status, 0);
    locked.push(stale);
  };
  const r = both(t, setup, ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out', '--force']);
  // The commit failed after the work: the plan, printed before it, is on stdout.
  assertRefused(
    r,
    'IoError: cannot move aside `out/model-00001-of-00002.safetensors`: Operation not permitted',
    'merge 2 module(s) into 2 tensor(s) (architecture llama)\n  model.safetensors: 2 tensors, 328 B\n',
  );
});
