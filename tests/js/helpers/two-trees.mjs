// Both CLIs in two identical trees: the harness of the output-policy and merge-extras suites. Each case builds the
// same tree twice, runs the native and the npm CLI in one each (relative paths, so messages match) and checks that
// stdout, stderr, exit status and the tree afterwards (files' bytes and modes) agree.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, nativeCli } from './common.mjs';

const run = (command, args, cwd, env) => {
  const r = spawnSync(command, args, {
    cwd,
    env: env && { ...process.env, ...env },
    encoding: 'buffer',
    timeout: 60000,
  });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout.toString('latin1'), stderr: r.stderr.toString('latin1') };
};

/** The tree under `dir`: path -> file bytes (base64), 'link -> target' or 'dir'; `modes`: path -> a file's mode. */
function tree(dir, modes = {}) {
  const out = {};
  const walk = (d, rel) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = lstatSync(p);
      if (st.isSymbolicLink()) out[r] = `link -> ${readlinkSync(p)}`;
      else if (st.isDirectory()) {
        out[r] = 'dir';
        walk(p, r);
      } else {
        out[r] = readFileSync(p).toString('base64');
        modes[r] = (st.mode & 0o7777).toString(8);
      }
    }
  };
  walk(dir, '');
  return out;
}

// The merge summary's measured fields: the text's last line (size, seconds, rate, peak memory), the JSON's timing and memory.
const unmeasured = (s) =>
  s
    .replace(/[\d.]+ [kMGTPE]?B in [\d.]+ s \([\d.]+ [kMGTPE]?B\/s\), peak memory [^\n]*\n$/, '<measured>\n')
    .replace(/"(seconds|gbPerS|peakMemory|peakWasmHeap)":([\d.e+-]+|null)/g, '"$1":0');

/**
 * Builds the same tree twice with `setup(root)`, runs `args` in each with either CLI, and checks both agree:
 * stdout, stderr, exit status and the tree afterwards, files' modes too. Returns the native result and tree.
 * `env`: variables added to both CLIs' environment.
 */
export function both(t, setup, args, env = undefined) {
  const roots = ['native', 'js'].map((n) => {
    const root = mkdtempSync(join(tmpdir(), `pb-trees-${n}-`));
    t.after(() => rmSync(root, { recursive: true, force: true }));
    setup(root);
    return root;
  });
  const before = tree(roots[0]);
  // Absolute paths in messages (where a link leads) name each tree's own root.
  const rooted = (r, root) => ({
    ...r,
    stdout: r.stdout.replaceAll(root, '<root>'),
    stderr: r.stderr.replaceAll(root, '<root>'),
  });
  const native = rooted(run(nativeCli, args, roots[0], env), realpathSync(roots[0]));
  const js = rooted(run(process.execPath, [cliPath, ...args], roots[1], env), realpathSync(roots[1]));
  const label = args.join(' ');
  assert.equal(js.status, native.status, `${label}: ${js.stderr} / ${native.stderr}`);
  assert.equal(js.stderr, native.stderr, label);
  assert.equal(unmeasured(js.stdout), unmeasured(native.stdout), label);
  const modes = [{}, {}];
  const after = tree(roots[0], modes[0]);
  assert.deepEqual(tree(roots[1], modes[1]), after, `${label}: the trees differ`);
  assert.deepEqual(modes[1], modes[0], `${label}: the files' modes differ`);
  for (const name of Object.keys(after)) assert.doesNotMatch(name, /\.(tmp|old)-/, `${label}: ${name} left behind`);
  return { ...native, before, after };
}
