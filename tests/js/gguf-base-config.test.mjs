// translate --to gguf finds the base model's config as convert_lora_to_gguf.py does (docs/gguf.md, the core's
// app::ChooseBaseConfig): --base-config wins (a file, or hf://owner/repo: its config.json); else the adapter's
// base_model_name_or_path when it is a local folder with config.json (said in the notes); else, for an adapter read
// from the Hub, that Hub repo's config.json; else the refusal names base_model_name_or_path and the flag to pass.
// Both CLIs print the same bytes and write the same file, and translateAdapter follows the same rule. Also: a
// naming table llama.cpp has no architecture for is refused naming the table (it read "llama.cpp's  model has no
// tensor…"), and LFM2 adapters translate with llama.cpp's names.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  cliPath,
  hasNativeCli,
  nativeCli,
  rejectsWith,
  repoRoot,
  webDir,
  writePeftAdapterDir,
} from './helpers/common.mjs';

const { translateAdapter } = await import(join(webDir, 'src', 'node.js'));
const { gguf } = await import('@huggingface/gguf');

const CORPUS = join(repoRoot, 'tests', 'golden', 'corpus', 'arch_llama');
const skip = !hasNativeCli && 'native CLI not built';
const work = mkdtempSync(join(tmpdir(), 'pb-gguf-base-'));
process.on('exit', () => rmSync(work, { recursive: true, force: true }));

const run = (cli, args, env = process.env) =>
  spawnSync(cli === 'npm' ? process.execPath : nativeCli, cli === 'npm' ? [cliPath, ...args] : args, {
    encoding: 'buffer',
    env,
  });
// Asynchronous, for runs against the Hub stand-in (it answers from this process's event loop).
const runAsync = (cli, args, env) =>
  new Promise((resolve) =>
    execFile(
      cli === 'npm' ? process.execPath : nativeCli,
      cli === 'npm' ? [cliPath, ...args] : args,
      { encoding: 'buffer', env, timeout: 60000 },
      (error, stdout, stderr) => resolve({ status: error ? error.code : 0, stdout, stderr }),
    ),
  );

/** OUT for one CLI's run: the same file name in a folder of its own (the CLIs print the name they wrote). */
function outFor(name, cli) {
  mkdirSync(join(work, `${name}-${cli}`), { recursive: true });
  return join(work, `${name}-${cli}`, 'out.gguf');
}

function same(native, npm, what) {
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

/** The corpus LLaMA adapter (q/k rows permuted by head in llama.cpp: it needs the head counts) in a folder of its
 * own, its adapter_config.json naming `baseName` as base_model_name_or_path. */
function llamaAdapter(name, baseName) {
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  copyFileSync(join(CORPUS, 'adapter', 'adapter_model.safetensors'), join(dir, 'adapter_model.safetensors'));
  const config = JSON.parse(readFileSync(join(CORPUS, 'adapter', 'adapter_config.json'), 'utf8'));
  config.base_model_name_or_path = baseName;
  writeFileSync(join(dir, 'adapter_config.json'), JSON.stringify(config, null, 2));
  return dir;
}

// What --base-config with the corpus base's config writes for `adapter` (the file carries the adapter's config, so
// each adapter folder has its own): the file every other way of finding the base must write.
const expectedFiles = new Map();
function expected(adapter) {
  if (!expectedFiles.has(adapter)) {
    const out = join(work, `expected-${expectedFiles.size}.gguf`);
    const r = run('native', [
      'translate',
      adapter,
      out,
      '--to',
      'gguf',
      '--base-config',
      join(CORPUS, 'base', 'config.json'),
      '-q',
    ]);
    assert.equal(r.status, 0, String(r.stderr));
    expectedFiles.set(adapter, readFileSync(out));
  }
  return expectedFiles.get(adapter);
}

test(
  'base_model_name_or_path naming a local folder with config.json: used, and said, by both CLIs and the API',
  { skip },
  async () => {
    const base = join(work, 'local-base');
    mkdirSync(base, { recursive: true });
    copyFileSync(join(CORPUS, 'base', 'config.json'), join(base, 'config.json'));
    const adapter = llamaAdapter('local-adapter', base);
    const outs = {};
    const results = {};
    for (const cli of ['native', 'npm']) {
      outs[cli] = outFor('local', cli);
      results[cli] = run(cli, ['translate', adapter, outs[cli], '--to', 'gguf']);
    }
    const r = same(results.native, results.npm, 'local base');
    assert.equal(r.status, 0, String(r.stderr));
    assert.ok(
      String(r.stdout).includes(`base config: ${base}/config.json (the adapter's base_model_name_or_path)`),
      String(r.stdout),
    );
    for (const cli of ['native', 'npm'])
      assert.ok(readFileSync(outs[cli]).equals(expected(adapter)), `${cli}: not the --base-config file`);
    // --json carries the note too.
    const json = JSON.parse(
      String(run('native', ['translate', adapter, join(work, 'local-json.gguf'), '--to', 'gguf', '--json']).stdout),
    );
    assert.ok(
      json.notes.includes(`base config: ${base}/config.json (the adapter's base_model_name_or_path)`),
      JSON.stringify(json.notes),
    );

    const api = await translateAdapter(adapter, { to: 'gguf' });
    assert.equal(api.rejected, 0);
    assert.ok(
      api.notes.includes(`base config: ${base}/config.json (the adapter's base_model_name_or_path)`),
      JSON.stringify(api.notes),
    );
    assert.ok(
      Buffer.from(api.files[0].bytes).equals(expected(adapter)),
      'translateAdapter: not the --base-config file',
    );
    // A trailing slash names the same folder.
    const slashed = llamaAdapter('local-adapter-slash', `${base}/`);
    assert.equal(run('native', ['translate', slashed, join(work, 'slash.gguf'), '--to', 'gguf', '-q']).status, 0);
    // --base-config still wins (a config of other head counts would be refused by the permutation: use the same).
    const flagged = run('npm', [
      'translate',
      adapter,
      join(work, 'flagged.gguf'),
      '--to',
      'gguf',
      '--base-config',
      join(CORPUS, 'base', 'config.json'),
    ]);
    assert.equal(flagged.status, 0, String(flagged.stderr));
    assert.ok(!String(flagged.stdout).includes('base config:'), 'a named --base-config is not announced');
  },
);

test(
  'a base that is neither a local folder nor allowed remote: the refusal names base_model_name_or_path and the flag',
  { skip },
  async () => {
    const cases = [
      [
        'hub-id',
        'meta-llama/Llama-3.2-1B',
        "the adapter's base_model_name_or_path `meta-llama/Llama-3.2-1B` is not a local folder with config.json; pass --base-config hf://meta-llama/Llama-3.2-1B (its config.json, read from the Hub) or a local copy's config.json",
      ],
      [
        'path',
        '/nowhere/llama',
        "the adapter's base_model_name_or_path `/nowhere/llama` is not a local folder with config.json; pass --base-config BASE/config.json",
      ],
    ];
    for (const [name, baseName, hint] of cases) {
      const adapter = llamaAdapter(`hint-${name}`, baseName);
      const out = (cli) => join(work, `hint-${name}-${cli}.gguf`);
      const r = same(
        run('native', ['translate', adapter, out('native'), '--to', 'gguf']),
        run('npm', ['translate', adapter, out('npm'), '--to', 'gguf']),
        name,
      );
      assert.notEqual(r.status, 0);
      assert.ok(String(r.stderr).includes(`pass --base-config so the head count is known (${hint})`), String(r.stderr));
      await rejectsWith(
        translateAdapter(adapter, { to: 'gguf' }),
        'UnresolvedTensor',
        new RegExp(hint.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')),
      );
    }
  },
);

test(
  'an adapter on the Hub: its base_model_name_or_path repo gives config.json; --base-config hf:// too (both CLIs, the API)',
  { skip },
  async () => {
    const { startHub } = await import('../hub/server.mjs');
    const config = JSON.parse(readFileSync(join(CORPUS, 'adapter', 'adapter_config.json'), 'utf8'));
    const hubConfig = (baseName) => JSON.stringify({ ...config, base_model_name_or_path: baseName });
    const weights = new Uint8Array(readFileSync(join(CORPUS, 'adapter', 'adapter_model.safetensors')));
    const hub = await startHub({
      files: {
        'me/llama-lora': { 'adapter_config.json': hubConfig('me/tiny-llama'), 'adapter_model.safetensors': weights },
        'me/tiny-llama': { 'config.json': readFileSync(join(CORPUS, 'base', 'config.json'), 'utf8') },
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
      // The same adapter, local: what --base-config writes for it.
      const local = join(work, 'hub-adapter-local');
      mkdirSync(local, { recursive: true });
      writeFileSync(join(local, 'adapter_config.json'), hubConfig('me/tiny-llama'));
      writeFileSync(join(local, 'adapter_model.safetensors'), weights);
      const results = {};
      for (const cli of ['native', 'npm'])
        results[cli] = await runAsync(
          cli,
          ['translate', 'hf://me/llama-lora', outFor('hub', cli), '--to', 'gguf'],
          env,
        );
      const r = same(results.native, results.npm, 'hub adapter');
      assert.equal(r.status, 0, String(r.stderr));
      assert.ok(
        String(r.stdout).includes(
          "base config: hf://me/tiny-llama/config.json (the adapter's base_model_name_or_path, on the Hub)",
        ),
        String(r.stdout),
      );
      for (const cli of ['native', 'npm'])
        assert.ok(readFileSync(outFor('hub', cli)).equals(expected(local)), `${cli}: not the --base-config file`);
      const api = await translateAdapter({ repo: 'me/llama-lora' }, { to: 'gguf', endpoint: hub.endpoint, token: '' });
      assert.ok(Buffer.from(api.files[0].bytes).equals(expected(local)), 'translateAdapter of a Hub repo');
      assert.ok(
        api.notes.includes(
          "base config: hf://me/tiny-llama/config.json (the adapter's base_model_name_or_path, on the Hub)",
        ),
        JSON.stringify(api.notes),
      );

      // A local adapter naming a Hub repo is not fetched unless asked: --base-config hf://owner/repo reads its config.json.
      const adapter = llamaAdapter('hub-base-local-adapter', 'me/tiny-llama');
      for (const cli of ['native', 'npm']) {
        const refused = await runAsync(cli, ['translate', adapter, join(work, `no-${cli}.gguf`), '--to', 'gguf'], env);
        assert.notEqual(refused.status, 0, `${cli}: fetched without being asked`);
        assert.ok(String(refused.stderr).includes('pass --base-config hf://me/tiny-llama'), String(refused.stderr));
        const asked = await runAsync(
          cli,
          [
            'translate',
            adapter,
            join(work, `asked-${cli}.gguf`),
            '--to',
            'gguf',
            '--base-config',
            'hf://me/tiny-llama',
          ],
          env,
        );
        assert.equal(asked.status, 0, `${cli}: ${asked.stderr}`);
        assert.ok(
          readFileSync(join(work, `asked-${cli}.gguf`)).equals(expected(adapter)),
          `${cli} --base-config hf://: not the local --base-config file`,
        );
      }
      // A Hub base that does not exist: the Hub's 404, naming the file.
      const missing = llamaAdapter('missing-hub-base', 'me/no-such-model');
      const gone = await runAsync(
        'native',
        ['translate', missing, join(work, 'gone.gguf'), '--to', 'gguf', '--base-config', 'hf://me/no-such-model'],
        env,
      );
      assert.notEqual(gone.status, 0);
      assert.match(String(gone.stderr), /hf:\/\/me\/no-such-model\/config\.json/);
    } finally {
      await hub.close();
    }
  },
);

test(
  'a naming table llama.cpp has no architecture for is refused naming it (not "llama.cpp\'s  model")',
  { skip },
  () => {
    const adapter = join(CORPUS, 'adapter');
    const r = same(
      run('native', ['translate', adapter, join(work, 'jet-n.gguf'), '--to', 'gguf', '--arch', 'jetmoe']),
      run('npm', ['translate', adapter, join(work, 'jet-p.gguf'), '--to', 'gguf', '--arch', 'jetmoe']),
      '--arch jetmoe',
    );
    assert.notEqual(r.status, 0);
    assert.match(
      String(r.stderr),
      /llama\.cpp's converter has no architecture for the naming table `jetmoe` \(named by --arch\); the tables with one: [a-z0-9_, ]*lfm2/,
    );
    assert.doesNotMatch(String(r.stderr), /llama\.cpp's  model/);
  },
);

test(
  "LFM2 adapters translate with llama.cpp's names (shortconv in/out projections, attention, feed-forward)",
  { skip },
  async () => {
    const modules = [
      'model.layers.0.conv.in_proj',
      'model.layers.0.conv.out_proj',
      'model.layers.0.feed_forward.w1',
      'model.layers.0.feed_forward.w2',
      'model.layers.0.feed_forward.w3',
      'model.layers.1.self_attn.q_proj',
      'model.layers.1.self_attn.k_proj',
      'model.layers.1.self_attn.v_proj',
      'model.layers.1.self_attn.out_proj',
    ];
    const adapter = writePeftAdapterDir(join(work, 'lfm2-adapter'), modules, [
      'in_proj',
      'out_proj',
      'w1',
      'w2',
      'w3',
      'q_proj',
      'k_proj',
      'v_proj',
    ]);
    const base = join(work, 'lfm2-base');
    mkdirSync(base, { recursive: true });
    writeFileSync(
      join(base, 'config.json'),
      JSON.stringify({
        architectures: ['Lfm2ForCausalLM'],
        model_type: 'lfm2',
        num_attention_heads: 2,
        num_key_value_heads: 1,
      }),
    );
    const config = JSON.parse(readFileSync(join(adapter, 'adapter_config.json'), 'utf8'));
    writeFileSync(join(adapter, 'adapter_config.json'), JSON.stringify({ ...config, base_model_name_or_path: base }));
    const outs = { native: outFor('lfm2', 'native'), npm: outFor('lfm2', 'npm') };
    const r = same(
      run('native', ['translate', adapter, outs.native, '--to', 'gguf']),
      run('npm', ['translate', adapter, outs.npm, '--to', 'gguf']),
      'lfm2',
    );
    assert.equal(r.status, 0, String(r.stderr));
    assert.ok(readFileSync(outs.npm).equals(readFileSync(outs.native)), 'the CLIs wrote different files');
    const parsed = await gguf(outs.native, { allowLocalFile: true });
    assert.equal(parsed.metadata['general.architecture'], 'lfm2');
    const names = parsed.tensorInfos
      .map((t) => t.name)
      .filter((n) => n.endsWith('.lora_a'))
      .sort();
    assert.deepEqual(names, [
      'blk.0.ffn_down.weight.lora_a',
      'blk.0.ffn_gate.weight.lora_a',
      'blk.0.ffn_up.weight.lora_a',
      'blk.0.shortconv.in_proj.weight.lora_a',
      'blk.0.shortconv.out_proj.weight.lora_a',
      'blk.1.attn_k.weight.lora_a',
      'blk.1.attn_output.weight.lora_a',
      'blk.1.attn_q.weight.lora_a',
      'blk.1.attn_v.weight.lora_a',
    ]);
    const api = await translateAdapter(adapter, { to: 'gguf' });
    assert.equal(api.rejected, 0);
    assert.ok(Buffer.from(api.files[0].bytes).equals(readFileSync(outs.native)), 'translateAdapter wrote another file');
  },
);
