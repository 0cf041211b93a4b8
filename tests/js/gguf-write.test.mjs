// translate --to gguf: the npm CLI writes the native CLI's bytes (both are the core's GGUF writer), into OUT.gguf
// or OUT_DIR/adapter_model.gguf, for every --outtype; the JS API's translateAdapter gives the same file; and
// --outtype without --to gguf is the same usage error in both.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, hasNativeCli, nativeCli, repoRoot, webDir } from './helpers/common.mjs';

// The Node entry (local paths as adapters).
const { translateAdapter } = await import(join(webDir, 'src', 'node.js'));

const CORPUS = join(repoRoot, 'tests', 'golden', 'corpus');
const run = (cli, args) =>
  spawnSync(cli === 'npm' ? process.execPath : nativeCli, cli === 'npm' ? [cliPath, ...args] : args, {
    encoding: 'buffer',
  });

test(
  'both CLIs write the same .gguf bytes for every outtype',
  { skip: !hasNativeCli && 'native CLI not built' },
  () => {
    const work = mkdtempSync(join(tmpdir(), 'pb-gguf-'));
    try {
      for (const name of ['arch_llama', 'llama_lora_f32']) {
        const adapter = join(CORPUS, name, 'adapter');
        const config = join(CORPUS, name, 'base', 'config.json');
        for (const outtype of ['f32', 'f16', 'bf16', 'q8_0']) {
          const files = {};
          for (const cli of ['native', 'npm']) {
            const out = join(work, `${name}-${outtype}-${cli}.gguf`);
            const r = run(cli, [
              'translate',
              adapter,
              out,
              '--to',
              'gguf',
              '--outtype',
              outtype,
              '--base-config',
              config,
              '-q',
            ]);
            assert.equal(r.status, 0, `${cli} ${name} ${outtype}: ${r.stderr}`);
            files[cli] = readFileSync(out);
          }
          assert.equal(files.native.subarray(0, 4).toString(), 'GGUF');
          assert.ok(
            files.npm.equals(files.native),
            `${name} ${outtype}: the npm CLI's file differs from the native one`,
          );
        }
        // A directory OUT gets adapter_model.gguf, the same bytes.
        const dir = join(work, `${name}-dir`);
        const r = run('npm', ['translate', adapter, dir, '--to', 'gguf', '--base-config', config, '-q']);
        assert.equal(r.status, 0, String(r.stderr));
        assert.ok(
          readFileSync(join(dir, 'adapter_model.gguf')).equals(readFileSync(join(work, `${name}-f32-native.gguf`))),
        );
      }
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  },
);

test(
  'translateAdapter({to: "gguf"}) gives the CLI file',
  { skip: !hasNativeCli && 'native CLI not built' },
  async () => {
    const work = mkdtempSync(join(tmpdir(), 'pb-gguf-api-'));
    try {
      const adapter = join(CORPUS, 'arch_llama', 'adapter');
      const config = join(CORPUS, 'arch_llama', 'base', 'config.json');
      const out = join(work, 'a.gguf');
      assert.equal(
        run('native', ['translate', adapter, out, '--to', 'gguf', '--outtype', 'q8_0', '--base-config', config, '-q'])
          .status,
        0,
      );
      const result = await translateAdapter(adapter, {
        to: 'gguf',
        outtype: 'q8_0',
        baseConfig: readFileSync(config, 'utf8'),
      });
      assert.equal(result.files.length, 1);
      assert.equal(result.files[0].name, 'adapter_model.gguf');
      assert.ok(Buffer.from(result.files[0].bytes).equals(readFileSync(out)));
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  },
);

test(
  '--outtype without --to gguf is one usage error in both CLIs',
  { skip: !hasNativeCli && 'native CLI not built' },
  () => {
    const args = ['translate', join(CORPUS, 'arch_llama', 'adapter'), '/tmp/never', '--to', 'peft', '--outtype', 'f16'];
    const native = run('native', args);
    const npm = run('npm', args);
    assert.equal(native.status, 2);
    assert.equal(npm.status, native.status);
    assert.equal(String(npm.stderr), String(native.stderr));
    assert.match(String(native.stderr), /--outtype applies to --to gguf only/);
  },
);
