// A merged folder is a usable model: merge copies the base directory's other files (tokenizer, generation
// config, chat templates...; app/base_extras.h decides which) inside its all-or-nothing output, lists them in its
// summary, and warns when the base has no config.json. Every case runs the native and the npm CLI in two
// identical trees (relative paths) and compares stdout, stderr, exit status and the resulting tree.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { f32Bytes, makeFile, skipWithoutNativeCli, writePeftAdapterDir } from './helpers/common.mjs';
import { both } from './helpers/two-trees.mjs';

const Q = 'model.layers.0.self_attn.q_proj';
const V = 'model.layers.0.self_attn.v_proj';

const f32 = f32Bytes;
const writeAdapter = (dir) => writePeftAdapterDir(dir, [Q, V], ['q_proj', 'v_proj']);

const BASE_CONFIG = JSON.stringify({
  architectures: ['LlamaForCausalLM'],
  model_type: 'llama',
  hidden_size: 4,
  num_attention_heads: 1,
});
const TOKENIZER = JSON.stringify({ version: '1.0', model: { type: 'BPE', vocab: { a: 0, b: 1 } } });
const GENERATION = JSON.stringify({ bos_token_id: 1, eos_token_id: 2 });
const TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}";

/**
 * A 4x4 llama base directory with the files a Hub model has beside its weights, a subdirectory, hidden files,
 * weights of other formats, and config.json unless `config` is false. `weight`: the base weights' value.
 */
function writeBase(dir, { config = true, weight = 1 } = {}) {
  mkdirSync(join(dir, 'sub'), { recursive: true });
  const tensor = { dtype: 'F32', shape: [4, 4], data_offsets: [0, 64] };
  const header = { [`${Q}.weight`]: tensor, [`${V}.weight`]: { ...tensor, data_offsets: [64, 128] } };
  writeFileSync(join(dir, 'model.safetensors'), makeFile(JSON.stringify(header), f32(32, weight)));
  if (config) writeFileSync(join(dir, 'config.json'), BASE_CONFIG);
  writeFileSync(join(dir, 'tokenizer.json'), TOKENIZER);
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ model_max_length: 2048 }));
  writeFileSync(join(dir, 'generation_config.json'), GENERATION);
  writeFileSync(join(dir, 'chat_template.jinja'), TEMPLATE);
  writeFileSync(join(dir, 'sub', 'preprocessor_config.json'), '{}'); // a subdirectory: not copied
  writeFileSync(join(dir, '.gitattributes'), '*.safetensors filter=lfs\n'); // hidden: not copied
  writeFileSync(join(dir, 'pytorch_model.bin'), 'not read'); // weights of another format: not copied
  writeFileSync(join(dir, 'tf_model.h5'), 'not read');
}

const COPIED = ['chat_template.jinja', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json'];
const outNames = (after) =>
  Object.keys(after)
    .filter((n) => n.startsWith('out/'))
    .map((n) => n.slice(4));

test("merge copies the base directory's other files, byte for byte, and lists them (text and --json)", (t) => {
  if (skipWithoutNativeCli(t)) return;
  const setup = (root) => {
    writeAdapter(join(root, 'rob'));
    writeBase(join(root, 'base'));
  };
  const text = both(t, setup, ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out']);
  assert.equal(text.status, 0, text.stderr);
  assert.equal(text.stderr, '');
  assert.deepEqual(outNames(text.after), [...COPIED, 'config.json', 'model.safetensors'].sort());
  for (const name of COPIED) assert.equal(text.after[`out/${name}`], text.after[`base/${name}`], name);
  assert.match(text.stdout, new RegExp(`\n  copy 4 other file\\(s\\) from the base: ${COPIED.join(' ')}\n`));

  const json = both(t, setup, ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out', '--json']);
  assert.equal(json.status, 0, json.stderr);
  const summary = JSON.parse(json.stdout);
  assert.deepEqual(summary.copiedFiles, COPIED);
  assert.deepEqual(
    summary.files.map((f) => f.name),
    ['model.safetensors'],
  );

  const dry = both(t, setup, ['merge', '--base', 'base', '--adapter', 'rob', '--dry-run']);
  assert.equal(dry.status, 0, dry.stderr);
  assert.match(dry.stdout, /\n  would copy 4 other file\(s\) from the base: /);
  assert.deepEqual(dry.after, dry.before);
});

test('merge --no-copy-extra copies nothing else; unmerge copies too', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const setup = (root) => {
    writeAdapter(join(root, 'rob'));
    writeBase(join(root, 'base'));
  };
  const r = both(t, setup, [
    'merge',
    '--base',
    'base',
    '--adapter',
    'rob',
    '--out',
    'out',
    '--no-copy-extra',
    '--json',
  ]);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(outNames(r.after), ['config.json', 'model.safetensors']);
  assert.deepEqual(JSON.parse(r.stdout).copiedFiles, []);
  const un = both(t, setup, ['unmerge', '--base', 'base', '--adapter', 'rob', '--out', 'out']);
  assert.equal(un.status, 0, un.stderr);
  assert.deepEqual(outNames(un.after), [...COPIED, 'config.json', 'model.safetensors'].sort());
});

test('a base without config.json: a warning, the other files still copied', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const setup = (root) => {
    writeAdapter(join(root, 'rob'));
    writeBase(join(root, 'base'), { config: false });
  };
  const warning =
    'warning: the base `base` has no config.json beside its weights, so the merged folder has none and will not load as a model; pass --base-config FILE\n';
  const r = both(t, setup, ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out']);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, warning);
  assert.deepEqual(outNames(r.after), [...COPIED, 'model.safetensors'].sort());
  const quiet = both(t, setup, [
    'merge',
    '--base',
    'base',
    '--adapter',
    'rob',
    '--out',
    'out',
    '--no-copy-extra',
    '-q',
  ]);
  assert.equal(quiet.stderr, warning, 'the warning stays with --no-copy-extra and -q');
  assert.equal(quiet.stdout, '');
});

test('copied names are outputs: refused over an input, counted for --force, links out need --follow-links', (t) => {
  if (skipWithoutNativeCli(t)) return;
  // --out holding a tokenizer.json: not empty, refused without --force; with it, replaced.
  const existing = (root) => {
    writeAdapter(join(root, 'rob'));
    writeBase(join(root, 'base'));
    mkdirSync(join(root, 'out'));
    writeFileSync(join(root, 'out', 'tokenizer.json'), 'old');
  };
  const refused = both(t, existing, ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out']);
  assert.equal(refused.status, 1);
  assert.match(refused.stderr, /--out `out` is not empty \(tokenizer\.json\); pass --force/);
  assert.deepEqual(refused.after, refused.before);
  const forced = both(t, existing, ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out', '--force']);
  assert.equal(forced.status, 0, forced.stderr);
  assert.equal(forced.after['out/tokenizer.json'], forced.after['base/tokenizer.json']);

  // --base-config in --out under a name the merge would copy over: refused, nothing touched.
  const aliased = (root) => {
    writeAdapter(join(root, 'rob'));
    writeBase(join(root, 'base'));
    mkdirSync(join(root, 'out'));
    writeFileSync(join(root, 'out', 'generation_config.json'), BASE_CONFIG);
  };
  const over = both(t, aliased, [
    'merge',
    '--base',
    'base',
    '--adapter',
    'rob',
    '--base-config',
    'out/generation_config.json',
    '--out',
    'out',
    '--force',
  ]);
  assert.equal(over.status, 1);
  assert.equal(
    over.stderr,
    'error: InvalidArgument: `out/generation_config.json` is --base-config `out/generation_config.json`; merge never writes over its inputs\n',
  );
  assert.deepEqual(over.after, over.before);

  // A base file that is a link leading outside the base directory: an input like the shards.
  const linked = (root) => {
    writeAdapter(join(root, 'rob'));
    writeBase(join(root, 'base'));
    writeFileSync(join(root, 'shared-tokenizer.json'), TOKENIZER);
    rmSync(join(root, 'base', 'tokenizer.json'));
    symlinkSync('../shared-tokenizer.json', join(root, 'base', 'tokenizer.json'));
  };
  const out = both(t, linked, ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out']);
  assert.equal(out.status, 1);
  assert.match(
    out.stderr,
    /1 input file\(s\) are links leading outside their directory; pass --follow-links[^\n]*:\n  base\/tokenizer\.json -> /,
  );
  const followed = both(t, linked, ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out', '--follow-links']);
  assert.equal(followed.status, 0, followed.stderr);
  assert.equal(
    followed.after['out/tokenizer.json'],
    Buffer.from(TOKENIZER).toString('base64'),
    "the link's target, as a file",
  );
});

test('a failure mid-merge (--safe meets NaN) leaves nothing: no copied file, no new --out', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const setup = (root) => {
    writeAdapter(join(root, 'rob'));
    writeBase(join(root, 'base'), { weight: NaN });
  };
  const r = both(t, setup, ['merge', '--base', 'base', '--adapter', 'rob', '--out', 'out', '--safe']);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /NaN/);
  assert.deepEqual(r.after, r.before, 'nothing written');
});

test('--base naming a .safetensors file copies nothing from its directory', (t) => {
  if (skipWithoutNativeCli(t)) return;
  const setup = (root) => {
    writeAdapter(join(root, 'rob'));
    writeBase(join(root, 'base'));
  };
  const r = both(t, setup, ['merge', '--base', 'base/model.safetensors', '--adapter', 'rob', '--out', 'out', '--json']);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(outNames(r.after), ['config.json', 'model.safetensors']);
  assert.deepEqual(JSON.parse(r.stdout).copiedFiles, []);
});
