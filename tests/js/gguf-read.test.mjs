// Reading .gguf LoRA adapters (docs/gguf.md): both CLIs print the same bytes for adapter-info and translate of a
// .gguf (a file, or a directory holding one), the round trip PEFT -> .gguf f32 -> PEFT gives PEFT's bytes back,
// the JS API takes .gguf bytes and paths as it takes other adapters, hostile files fail alike with nothing left
// behind, and @huggingface/gguf parses every .gguf we write.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, hasNativeCli, nativeCli, rejectsWith, repoRoot, webDir } from './helpers/common.mjs';

const { adapterInfo, translateAdapter } = await import(join(webDir, 'src', 'node.js'));
const { gguf } = await import('@huggingface/gguf');

const CORPUS = join(repoRoot, 'tests', 'golden', 'corpus');
const ADAPTERS = ['arch_llama', 'arch_qwen2', 'llama_lora_f32'];
const OUTTYPES = ['f32', 'f16', 'bf16', 'q8_0'];
const run = (cli, args) =>
  spawnSync(cli === 'npm' ? process.execPath : nativeCli, cli === 'npm' ? [cliPath, ...args] : args, {
    encoding: 'buffer',
  });
const skip = !hasNativeCli && 'native CLI not built';

// The .gguf files of the corpus adapters, written once by the native CLI (gguf-write.test.mjs checks the npm CLI
// writes the same bytes).
const work = mkdtempSync(join(tmpdir(), 'pb-gguf-read-'));
process.on('exit', () => rmSync(work, { recursive: true, force: true }));
function ggufOf(name, outtype) {
  const out = join(work, `${name}-${outtype}.gguf`);
  if (!existsSync(out)) {
    const config = join(CORPUS, name, 'base', 'config.json');
    const r = run('native', [
      'translate',
      join(CORPUS, name, 'adapter'),
      out,
      '--to',
      'gguf',
      '--outtype',
      outtype,
      '--base-config',
      config,
      '-q',
    ]);
    assert.equal(r.status, 0, String(r.stderr));
  }
  return out;
}

function same(args, what) {
  const native = run('native', args);
  const npm = run('npm', args);
  assert.equal(
    npm.status,
    native.status,
    `${what}: exit ${npm.status} vs ${native.status}\n${npm.stderr}\n${native.stderr}`,
  );
  assert.equal(String(npm.stderr), String(native.stderr), `${what}: stderr`);
  assert.ok(
    npm.stdout.equals(native.stdout),
    `${what}: stdout differs\n--- npm\n${npm.stdout}\n--- native\n${native.stdout}`,
  );
  return native;
}

const listing = (dir) => readdirSync(dir).sort();
const bytesOf = (dir) => Object.fromEntries(listing(dir).map((f) => [f, readFileSync(join(dir, f))]));

test('adapter-info of a .gguf: the same bytes from both CLIs, text and --json', { skip }, () => {
  for (const name of ADAPTERS) {
    for (const outtype of OUTTYPES) {
      const file = ggufOf(name, outtype);
      const text = same(['adapter-info', file], `${name} ${outtype}`);
      assert.equal(text.status, 0, String(text.stderr));
      assert.match(String(text.stdout), /gguf/);
      const json = same(['adapter-info', file, '--json'], `${name} ${outtype} --json`);
      const report = JSON.parse(String(json.stdout));
      assert.equal(report.ok, true);
      assert.equal(report.format, 'gguf');
      assert.deepEqual(report.rejected, []);
      // q8_0 (and its F16 fallback) and mixed types decode to F32; a single f32/f16/bf16 type is kept.
      const dtype = { f32: 'F32', f16: 'F16', bf16: 'BF16', q8_0: 'F32' }[outtype];
      assert.ok(
        report.modules.every((m) => m.dtype === dtype),
        `${name} ${outtype}: dtypes`,
      );
    }
  }
  // A directory holding one .gguf file.
  const dir = join(work, 'dir-with-gguf');
  mkdirSync(dir, { recursive: true });
  copyFileSync(ggufOf('arch_llama', 'f32'), join(dir, 'Arch-Llama-F32-LoRA.gguf'));
  const r = same(['adapter-info', dir], 'directory');
  assert.equal(r.status, 0, String(r.stderr));
  assert.ok(
    r.stdout.equals(run('native', ['adapter-info', join(dir, 'Arch-Llama-F32-LoRA.gguf')]).stdout),
    'the directory reads as its .gguf',
  );
});

test('PEFT -> .gguf f32 -> PEFT gives the PEFT files byte for byte (both CLIs)', { skip }, () => {
  for (const name of ADAPTERS) {
    const direct = join(work, `${name}-peft-direct`);
    assert.equal(run('native', ['translate', join(CORPUS, name, 'adapter'), direct, '--to', 'peft', '-q']).status, 0);
    const expected = bytesOf(direct);
    for (const cli of ['native', 'npm']) {
      const back = join(work, `${name}-peft-back-${cli}`);
      const r = run(cli, ['translate', ggufOf(name, 'f32'), back, '--to', 'peft', '-q']);
      assert.equal(r.status, 0, `${cli}: ${r.stderr}`);
      assert.deepEqual(listing(back), Object.keys(expected).sort());
      for (const [f, bytes] of Object.entries(expected))
        assert.ok(readFileSync(join(back, f)).equals(bytes), `${name} via ${cli}: ${f} differs`);
    }
    // .gguf -> .gguf: the same file again.
    const again = join(work, `${name}-again.gguf`);
    // (The head counts for llama.cpp's q/k row order come from --base-config when writing, as from a PEFT adapter.)
    const config = join(CORPUS, name, 'base', 'config.json');
    assert.equal(
      run('native', ['translate', ggufOf(name, 'f32'), again, '--to', 'gguf', '--base-config', config, '-q']).status,
      0,
    );
    assert.ok(readFileSync(again).equals(readFileSync(ggufOf(name, 'f32'))), `${name}: .gguf -> .gguf differs`);
  }
});

test('translate of a .gguf to peft, mlx, kohya and gguf: the same files from both CLIs', { skip }, () => {
  for (const outtype of OUTTYPES) {
    const file = ggufOf('arch_llama', outtype);
    for (const to of ['peft', 'mlx', 'kohya', 'gguf']) {
      const outs = {};
      for (const cli of ['native', 'npm']) {
        const out = join(work, `t-${outtype}-${to}-${cli}`);
        const r = run(cli, [
          'translate',
          file,
          out,
          '--to',
          to,
          '-q',
          ...(to === 'gguf' ? ['--base-config', join(CORPUS, 'arch_llama', 'base', 'config.json')] : []),
        ]);
        assert.equal(r.status, 0, `${cli} ${outtype} -> ${to}: ${r.stderr}`);
        outs[cli] = bytesOf(out);
      }
      assert.deepEqual(Object.keys(outs.npm), Object.keys(outs.native));
      for (const f of Object.keys(outs.native))
        assert.ok(outs.npm[f].equals(outs.native[f]), `${outtype} -> ${to}: ${f} differs`);
    }
  }
});

test('the JS API reads a .gguf from a path and from bytes as the CLI does', { skip }, async () => {
  const file = ggufOf('arch_llama', 'q8_0');
  const cli = JSON.parse(String(run('native', ['adapter-info', file, '--json']).stdout));
  const fromPath = await adapterInfo(file);
  const fromBytes = await adapterInfo({
    weights: new Uint8Array(readFileSync(file)),
    weightsName: 'arch_llama-q8_0.gguf',
  });
  assert.deepEqual(fromBytes.modules, fromPath.modules);
  assert.deepEqual(fromPath.modules, cli.modules);
  const translated = await translateAdapter(
    { weights: new Uint8Array(readFileSync(ggufOf('arch_llama', 'f32'))) },
    { to: 'peft' },
  );
  const direct = join(work, 'api-direct');
  assert.equal(
    run('native', ['translate', join(CORPUS, 'arch_llama', 'adapter'), direct, '--to', 'peft', '-q']).status,
    0,
  );
  for (const f of translated.files) assert.ok(Buffer.from(f.bytes).equals(readFileSync(join(direct, f.name))), f.name);
});

test('hostile .gguf files: the same error from both CLIs, nothing written', { skip }, async () => {
  const good = readFileSync(ggufOf('arch_llama', 'f32'));
  const cases = {
    truncated: [good.subarray(0, 200), /GGUF: the file ends at byte 200/],
    'bad version': [
      Buffer.concat([good.subarray(0, 4), Buffer.from([9, 0, 0, 0]), good.subarray(8)]),
      /GGUF version 9 is newer/,
    ],
    'huge key count': [
      Buffer.concat([
        good.subarray(0, 16),
        Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f]),
        good.subarray(24),
      ]),
      /declares \d+ keys/,
    ],
    'not an adapter': [
      Buffer.from(good.toString('latin1').replace('adapter', 'model\0\0'), 'latin1'),
      /general.type|not/,
    ],
  };
  for (const [what, [bytes, pattern]] of Object.entries(cases)) {
    const file = join(work, `hostile-${what.replaceAll(' ', '-')}.gguf`);
    writeFileSync(file, bytes);
    const info = same(['adapter-info', file], what);
    assert.equal(info.status, 1, what);
    assert.match(String(info.stderr), pattern, what);
    const out = join(work, `hostile-out-${what.replaceAll(' ', '-')}`);
    const t = same(['translate', file, out, '--to', 'peft'], `${what} translate`);
    assert.equal(t.status, 1);
    assert.equal(existsSync(out), false, `${what}: output left behind`);
    await rejectsWith(
      adapterInfo({ weights: new Uint8Array(bytes), weightsName: 'x.gguf' }),
      JSON.parse(String(run('native', ['adapter-info', file, '--json']).stdout)).error.code,
    );
  }
});

test('@huggingface/gguf parses every .gguf we write, with the keys and tensors we wrote', { skip }, async () => {
  for (const name of ADAPTERS) {
    for (const outtype of OUTTYPES) {
      const file = ggufOf(name, outtype);
      const parsed = await gguf(file, { allowLocalFile: true });
      const m = parsed.metadata;
      assert.equal(m['general.type'], 'adapter');
      assert.equal(m['adapter.type'], 'lora');
      assert.equal(typeof m['adapter.lora.alpha'], 'number');
      assert.equal(m['general.architecture'], name === 'arch_qwen2' ? 'qwen2' : 'llama');
      assert.equal(m['peft_bridge.arch'], name === 'arch_qwen2' ? 'qwen2' : 'llama');
      assert.equal(typeof m['peft_config'], 'string');
      assert.ok(Array.isArray(JSON.parse(m['peft_bridge.module_paths'])));
      // The tensors as our own reader lists them (adapter-info --json's mapping of each input tensor).
      const info = JSON.parse(String(run('native', ['adapter-info', file, '--json']).stdout));
      const names = parsed.tensorInfos.map((t) => t.name);
      assert.ok(names.length > 0 && names.every((n) => /\.lora_[ab]$/.test(n)), `${name} ${outtype}`);
      assert.equal(names.length, 2 * info.modules.length, `${name} ${outtype}: tensor count`);
      const types = new Set(parsed.tensorInfos.map((t) => t.dtype));
      const expected = { f32: [0], f16: [1], bf16: [30], q8_0: [8, 1] }[outtype];
      for (const t of types) assert.ok(expected.includes(t), `${name} ${outtype}: ggml type ${t}`);
      // ggml order: lora_a ne = [in, r], lora_b ne = [r, out]; the pairs agree on the rank, and the elements are
      // the parameters our reader counts.
      const byName = new Map(parsed.tensorInfos.map((t) => [t.name, t]));
      let elements = 0n;
      for (const t of parsed.tensorInfos) {
        assert.equal(Number(t.n_dims), 2);
        elements += t.shape.reduce((a, b) => a * BigInt(b), 1n);
        if (!t.name.endsWith('.lora_a')) continue;
        const b = byName.get(t.name.replace(/\.lora_a$/, '.lora_b'));
        assert.ok(b, `${t.name}: no lora_b`);
        const embedding = t.name.startsWith('token_embd');
        assert.equal(BigInt(embedding ? t.shape[0] : t.shape[1]), BigInt(b.shape[0]), `${t.name}: rank`);
      }
      assert.equal(Number(elements), info.parameters, `${name} ${outtype}: parameters`);
    }
  }
});

test(
  'a remote .gguf (a Hub repo holding one, hf://…/x.gguf, its URL): as the local file, in both CLIs and the API',
  { skip },
  async () => {
    const { startHub } = await import('../hub/server.mjs');
    const file = ggufOf('arch_llama', 'q8_0');
    const hub = await startHub({
      files: {
        'me/gguf-lora': {
          'README.md': 'a llama.cpp LoRA',
          'Arch-Llama-Q8_0-LoRA.gguf': new Uint8Array(readFileSync(file)),
        },
      },
    });
    try {
      const env = {
        ...process.env,
        HF_ENDPOINT: hub.endpoint,
        HF_TOKEN: '',
        HF_HOME: join(work, 'hf-home'),
        PB_HTTP_RETRIES: '0',
      };
      // Asynchronous: the hub answers from this process's event loop.
      const runEnv = (cli, args) =>
        new Promise((resolve) =>
          execFile(
            cli === 'npm' ? process.execPath : nativeCli,
            cli === 'npm' ? [cliPath, ...args] : args,
            { encoding: 'buffer', env, timeout: 60000 },
            (error, stdout, stderr) => resolve({ status: error ? error.code : 0, stdout, stderr }),
          ),
        );
      const expected = run('native', ['adapter-info', file, '--json']).stdout;
      for (const address of [
        'hf://me/gguf-lora',
        'hf://me/gguf-lora/Arch-Llama-Q8_0-LoRA.gguf',
        `${hub.endpoint}/me/gguf-lora/resolve/main/Arch-Llama-Q8_0-LoRA.gguf`,
      ]) {
        for (const cli of ['native', 'npm']) {
          const r = await runEnv(cli, ['adapter-info', address, '--json']);
          assert.equal(r.status, 0, `${cli} ${address}: ${r.stderr}`);
          assert.ok(r.stdout.equals(expected), `${cli} ${address}: differs from the local file`);
        }
      }
      const api = await adapterInfo({ repo: 'me/gguf-lora' }, { endpoint: hub.endpoint, token: '' });
      assert.deepEqual(api.modules, JSON.parse(String(expected)).modules);
    } finally {
      await hub.close();
    }
  },
);

test(
  'merge --adapter X.gguf: both CLIs write what merging the PEFT adapter writes (f32), the same bytes for q8_0',
  { skip },
  () => {
    const base = join(CORPUS, 'arch_llama', 'base');
    const reference = join(work, 'merge-peft');
    assert.equal(
      run('native', [
        'merge',
        '--base',
        base,
        '--adapter',
        join(CORPUS, 'arch_llama', 'adapter'),
        '-o',
        reference,
        '-q',
      ]).status,
      0,
    );
    for (const outtype of ['f32', 'q8_0']) {
      const outs = {};
      for (const cli of ['native', 'npm']) {
        const out = join(work, `merge-${outtype}-${cli}`);
        const r = run(cli, ['merge', '--base', base, '--adapter', ggufOf('arch_llama', outtype), '-o', out, '-q']);
        assert.equal(r.status, 0, `${cli} ${outtype}: ${r.stderr}`);
        outs[cli] = readFileSync(join(out, 'model.safetensors'));
      }
      assert.ok(outs.npm.equals(outs.native), `${outtype}: the CLIs' merged models differ`);
      if (outtype === 'f32')
        assert.ok(
          outs.native.equals(readFileSync(join(reference, 'model.safetensors'))),
          'f32: differs from the PEFT adapter merge',
        );
    }
  },
);

test('combine takes .gguf adapters: both CLIs write what combining the PEFT adapters writes (f32)', { skip }, () => {
  const peft = join(CORPUS, 'arch_llama', 'adapter');
  const reference = join(work, 'combine-peft');
  assert.equal(run('native', ['combine', peft, peft, '--weights', '1,0.5', '-o', reference, '-q']).status, 0);
  for (const cli of ['native', 'npm']) {
    const out = join(work, `combine-gguf-${cli}`);
    const r = run(cli, ['combine', ggufOf('arch_llama', 'f32'), peft, '--weights', '1,0.5', '-o', out, '-q']);
    assert.equal(r.status, 0, `${cli}: ${r.stderr}`);
    for (const f of listing(reference))
      assert.ok(readFileSync(join(out, f)).equals(readFileSync(join(reference, f))), `${cli}: ${f} differs`);
  }
});
