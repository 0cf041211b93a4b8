// Errors that say what happened, in both CLIs (identical bytes and exit statuses) and in the JS API: a file that
// is not safetensors is named for what it looks like, a directory or a config file passed for weights says what
// to pass instead, and a merge into the wrong base leads with one headline (code ModulesNotFound) and lists its
// problems, in --json as an array of {code, module, message}.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, hasNativeCli, makeFile, nativeCli, pb, peftAdapterBytes } from './helpers/common.mjs';

const { inspect, SafetensorsError, createMergeStream } = pb;

const runWith = (command, prefix) => (args, cwd) => {
  const r = spawnSync(command, [...prefix, ...args], { cwd, encoding: 'buffer', timeout: 30000 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout.toString('latin1'), stderr: r.stderr.toString('latin1') };
};
const runJs = runWith(process.execPath, [cliPath]);
const runNative = runWith(nativeCli, []);

/** Runs `args` in both CLIs, asserts identical bytes and statuses, and returns the result. */
function both(t, args, cwd) {
  const js = runJs(args, cwd);
  if (!hasNativeCli) {
    t.diagnostic('build/native/peft-bridge not built: the npm CLI alone is checked');
    return js;
  }
  const native = runNative(args, cwd);
  assert.deepEqual(js, native, `both CLIs on ${args.join(' ')}`);
  return js;
}

function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-errors-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** `text` and `--json` runs of one command: status 1, the text line on stderr, the JSON error on stdout. */
function failsBoth(t, args, cwd) {
  const text = both(t, args, cwd);
  assert.equal(text.status, 1, text.stderr);
  assert.equal(text.stdout, '');
  const json = both(t, [...args, '--json'], cwd);
  assert.equal(json.status, 1);
  assert.equal(json.stderr, '');
  const { error } = JSON.parse(json.stdout);
  assert.equal(text.stderr, `error: ${error.code}: ${error.message}\n`);
  return error;
}

const enc = (s) => new TextEncoder().encode(s);
const FILES = {
  'notes.json': [
    enc('{"learning_rate": 0.0002}\n'),
    'HeaderTooLarge',
    /^not a safetensors file, it looks like JSON: header length \d+ exceeds/,
  ],
  'README.md': [enc('# My LoRA\n\nTrained on...\n'), 'HeaderTooLarge', /^not a safetensors file, it looks like text: /],
  'short.txt': [enc('hi\n'), 'HeaderTooSmall', /^not a safetensors file, it looks like text: file is 3 bytes/],
  'page.safetensors': [
    enc('<!DOCTYPE html><html>'),
    'HeaderTooLarge',
    /^not a safetensors file, it looks like HTML or XML/,
  ],
  'model.gguf': [
    new Uint8Array([0x47, 0x47, 0x55, 0x46, 3, 0, 0, 0, 9, 9, 9, 9]),
    'HeaderTooLarge',
    /^not a safetensors file, it looks like a GGUF file/,
  ],
  'pytorch_model.zip': [
    new Uint8Array([0x50, 0x4b, 3, 4, 20, 0, 0, 0, 8, 0]),
    'HeaderTooLarge',
    /^not a safetensors file, it looks like a zip archive \(PyTorch/,
  ],
};

test('inspect and convert: a file that is not safetensors is named for what it looks like, in both CLIs', (t) => {
  const dir = tempDir(t);
  for (const [name, [bytes, code, message]] of Object.entries(FILES)) {
    writeFileSync(join(dir, name), bytes);
    for (const args of [
      ['inspect', name],
      ['convert', name, 'out.safetensors', '--dtype', 'bf16'],
    ]) {
      const error = failsBoth(t, args, dir);
      assert.equal(error.code, code, `${args.join(' ')}: ${error.message}`);
      assert.match(error.message, message);
    }
  }
});

test('the JS API says the same when it reads such a source', async () => {
  for (const [name, [bytes, code, message]] of Object.entries(FILES)) {
    await assert.rejects(
      inspect(bytes),
      (e) => e instanceof SafetensorsError && e.code === code && message.test(e.message),
      name,
    );
    await assert.rejects(
      inspect(new Blob([bytes]).stream()),
      (e) => e.code === code && message.test(e.message),
      `${name} as a stream`,
    );
  }
});

test('a directory given to inspect or convert is read as a model folder: one without a model says what it lacks', (t) => {
  const dir = tempDir(t);
  mkdirSync(join(dir, 'model'));
  for (const args of [
    ['inspect', 'model'],
    ['convert', 'model', 'out', '--dtype', 'bf16'],
  ]) {
    const error = failsBoth(t, args, dir);
    assert.deepEqual(error, {
      code: 'IoError',
      message: '`model` has neither model.safetensors nor model.safetensors.index.json',
      tensor: null,
      offset: null,
    });
  }
});

/** A GPT-2-style PEFT adapter (4 modules, trained on gpt2) and a Llama-style base with its config.json. */
function wrongBase(dir) {
  const modules = [0, 1].flatMap((l) => [`transformer.h.${l}.attn.c_attn`, `transformer.h.${l}.attn.c_proj`]);
  mkdirSync(join(dir, 'gpt2-lora'));
  writeFileSync(join(dir, 'gpt2-lora', 'adapter_model.safetensors'), peftAdapterBytes(modules));
  writeFileSync(
    join(dir, 'gpt2-lora', 'adapter_config.json'),
    JSON.stringify({
      peft_type: 'LORA',
      r: 2,
      lora_alpha: 4,
      target_modules: ['c_attn', 'c_proj'],
      base_model_name_or_path: 'gpt2',
    }),
  );
  mkdirSync(join(dir, 'llama'));
  const header = {};
  let offset = 0;
  for (const p of ['q_proj', 'k_proj', 'v_proj', 'o_proj']) {
    header[`model.layers.0.self_attn.${p}.weight`] = {
      dtype: 'F32',
      shape: [4, 4],
      data_offsets: [offset, offset + 64],
    };
    offset += 64;
  }
  writeFileSync(join(dir, 'llama', 'model.safetensors'), makeFile(JSON.stringify(header), new Uint8Array(offset)));
  writeFileSync(
    join(dir, 'llama', 'config.json'),
    JSON.stringify({ architectures: ['LlamaForCausalLM'], model_type: 'llama' }),
  );
  return modules;
}

test('adapter-info, translate and merge: adapter_config.json passed for the adapter says to pass its folder', (t) => {
  const dir = tempDir(t);
  wrongBase(dir);
  const expected = {
    code: 'InvalidArgument',
    message:
      "`gpt2-lora/adapter_config.json` is an adapter's config, not safetensors weights: pass its folder `gpt2-lora`",
    tensor: null,
    offset: null,
  };
  for (const args of [
    ['adapter-info', 'gpt2-lora/adapter_config.json'],
    ['translate', 'gpt2-lora/adapter_config.json', 'out', '--to', 'mlx'],
    ['merge', '--base', 'llama', '--adapter', 'gpt2-lora/adapter_config.json', '--out', 'merged'],
  ])
    assert.deepEqual(failsBoth(t, args, dir), expected, args.join(' '));
  // As --base: config.json says to pass its folder; the adapter's config says what --base takes.
  assert.deepEqual(
    failsBoth(t, ['merge', '--base', 'llama/config.json', '--adapter', 'gpt2-lora', '--out', 'merged'], dir),
    {
      ...expected,
      message: "`llama/config.json` is a model's config, not safetensors weights: pass its folder `llama`",
    },
  );
  assert.match(
    failsBoth(t, ['merge', '--base', 'gpt2-lora/adapter_config.json', '--adapter', 'gpt2-lora', '--out', 'merged'], dir)
      .message,
    /is an adapter's config, not safetensors weights: pass the base model's folder or its \.safetensors file$/,
  );
  // inspect takes one file: the weights beside it.
  assert.match(
    failsBoth(t, ['inspect', 'gpt2-lora/adapter_config.json'], dir).message,
    /pass adapter_model\.safetensors beside it$/,
  );
});

test('merge into the wrong base: one headline, code ModulesNotFound, the list; --json problems are an array', (t) => {
  const dir = tempDir(t);
  const modules = wrongBase(dir);
  for (const command of ['merge', 'unmerge']) {
    const error = failsBoth(t, [command, '--base', 'llama', '--adapter', 'gpt2-lora', '--out', 'merged'], dir);
    assert.equal(error.code, 'ModulesNotFound');
    const [headline, ...lines] = error.message.split('\n');
    assert.equal(
      headline,
      'adapter trained on gpt2 (GPT2LMHeadModel); base is LlamaForCausalLM: 0 of 4 modules found:',
    );
    assert.deepEqual(
      lines,
      modules.map((m) => `  adapter module \`${m}\`: the base has no tensor \`${m}.weight\``),
    );
    assert.deepEqual(
      error.problems,
      modules.map((m) => ({
        code: 'ModulesNotFound',
        module: m,
        message: `adapter module \`${m}\`: the base has no tensor \`${m}.weight\``,
      })),
    );
  }
});

test('the JS API: a merge into the wrong base rejects with ModulesNotFound and its problems', async (t) => {
  const dir = tempDir(t);
  const modules = wrongBase(dir);
  const { readFileSync } = await import('node:fs');
  const adapter = {
    weights: new Uint8Array(readFileSync(join(dir, 'gpt2-lora', 'adapter_model.safetensors'))),
    config: readFileSync(join(dir, 'gpt2-lora', 'adapter_config.json'), 'utf8'),
  };
  const base = new Uint8Array(readFileSync(join(dir, 'llama', 'model.safetensors')));
  const baseConfig = readFileSync(join(dir, 'llama', 'config.json'), 'utf8');
  const reader = new Blob([base]).stream().pipeThrough(createMergeStream({ adapter, baseConfig })).getReader();
  await assert.rejects(
    (async () => {
      while (!(await reader.read()).done);
    })(),
    (e) =>
      e instanceof SafetensorsError &&
      e.code === 'ModulesNotFound' &&
      e.message.startsWith(
        'adapter trained on gpt2 (GPT2LMHeadModel); base is LlamaForCausalLM: 0 of 4 modules found:',
      ) &&
      e.problems.length === modules.length &&
      e.problems.every((p, i) => p.code === 'ModulesNotFound' && p.module === modules[i]),
  );
});

test('merge: more than 20 problems are listed 20, then counted; --json keeps them all', (t) => {
  const dir = tempDir(t);
  const modules = Array.from({ length: 23 }, (_, l) => `transformer.h.${l}.attn.c_attn`);
  wrongBase(dir);
  writeFileSync(join(dir, 'gpt2-lora', 'adapter_model.safetensors'), peftAdapterBytes(modules));
  const error = failsBoth(
    t,
    ['merge', '--base', 'llama', '--adapter', 'gpt2-lora', '--out', 'merged', '--dry-run'],
    dir,
  );
  assert.equal(error.code, 'ModulesNotFound');
  const lines = error.message.split('\n');
  assert.equal(lines[0], 'adapter trained on gpt2 (GPT2LMHeadModel); base is LlamaForCausalLM: 0 of 23 modules found:');
  assert.equal(lines.length, 1 + 20 + 1);
  assert.equal(lines.at(-1), '  and 3 more');
  assert.equal(error.problems.length, 23);
});
