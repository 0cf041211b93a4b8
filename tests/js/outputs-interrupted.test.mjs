// Outputs on disk under signals and limits, in both CLIs (the native one where built): SIGINT at any moment of a
// `merge --force` over an older output leaves exactly the old model or exactly the new one (never a mix, never a
// temporary file, never an empty directory the run created); SIGKILL leaves what the next run cleans up or
// completes; a base of hundreds of shards merges under a descriptor limit far below its shard count.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, f32Bytes, hasNativeCli, makeFile, nativeCli, rng, writePeftAdapterDir } from './helpers/common.mjs';

const CLIS = [['npm', [process.execPath, cliPath]], ...(hasNativeCli ? [['native', [nativeCli]]] : [])];

/** A LLaMA-shaped F32 base of `layers` layers, one shard per layer (q_proj and v_proj, 4 x 4), with its index and
 * config.json, and an r=2 adapter on every q_proj and v_proj. */
function writeManyShardModel(root, layers) {
  const base = join(root, 'base');
  mkdirSync(base, { recursive: true });
  const width = String(layers).padStart(5, '0');
  const weightMap = {};
  const modules = [];
  for (let l = 0; l < layers; ++l) {
    const name = `model-${String(l + 1).padStart(5, '0')}-of-${width}.safetensors`;
    const q = `model.layers.${l}.self_attn.q_proj`;
    const v = `model.layers.${l}.self_attn.v_proj`;
    const header = {
      [`${q}.weight`]: { dtype: 'F32', shape: [4, 4], data_offsets: [0, 64] },
      [`${v}.weight`]: { dtype: 'F32', shape: [4, 4], data_offsets: [64, 128] },
    };
    writeFileSync(join(base, name), makeFile(JSON.stringify(header), f32Bytes(32, 1 + l / 1000)));
    weightMap[`${q}.weight`] = name;
    weightMap[`${v}.weight`] = name;
    modules.push(q, v);
  }
  writeFileSync(
    join(base, 'model.safetensors.index.json'),
    JSON.stringify({ metadata: { total_size: 128 * layers }, weight_map: weightMap }),
  );
  writeFileSync(
    join(base, 'config.json'),
    JSON.stringify({
      architectures: ['LlamaForCausalLM'],
      model_type: 'llama',
      hidden_size: 4,
      num_attention_heads: 1,
    }),
  );
  writePeftAdapterDir(join(root, 'adapter'), modules, ['q_proj', 'v_proj']);
}

/** The files of `dir`: name -> bytes (base64); null when it does not exist. */
function snapshot(dir) {
  if (!existsSync(dir)) return null;
  return Object.fromEntries(
    readdirSync(dir)
      .sort()
      .map((n) => [n, readFileSync(join(dir, n)).toString('base64')]),
  );
}

const run = (argv, args) => spawnSync(argv[0], [...argv.slice(1), ...args], { encoding: 'utf8', timeout: 120000 });

function setUp(t, layers) {
  const root = mkdtempSync(join(tmpdir(), 'pb-interrupted-'));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  writeManyShardModel(root, layers);
  return root;
}

/** Runs `args` (with `--out OUT`) and sends `signal` after `delay` ms; resolves once it has exited. */
function interrupted(argv, args, signal, delay) {
  return new Promise((resolve) => {
    const child = spawn(argv[0], [...argv.slice(1), ...args], { stdio: 'ignore' });
    const timer = setTimeout(() => child.kill(signal), delay);
    child.on('exit', (code, sig) => {
      clearTimeout(timer);
      resolve({ code, sig });
    });
  });
}

/** `trials` runs (within `seconds`), each interrupted after a random delay over the run's length, most near its
 * end (the commit): `check(outcome, trial)` after each. */
async function trials(t, { count, seconds, measure, attempt }) {
  const random = rng(7);
  const t0 = Date.now();
  const length = measure();
  let done = 0;
  for (; done < count && Date.now() - t0 < seconds * 1000; ++done) {
    // Half over the whole run, half over its last 40% (where the files are renamed into place).
    const delay = done % 2 ? random() * length * 1.1 : length * (0.6 + random() * 0.5);
    await attempt(Math.round(delay), done);
  }
  t.diagnostic(`${done} trials, a run takes ${length} ms`);
  return done;
}

for (const [cli, argv] of CLIS) {
  test(`${cli} CLI: SIGINT at any moment of merge --force over an older output leaves the old or the new model, nothing else`, async (t) => {
    const root = setUp(t, 24);
    const common = ['merge', '--base', join(root, 'base'), '--adapter', join(root, 'adapter'), '-q', '--force'];
    // The old output (F16) and the new one (F32, as the base), both as the CLI writes them.
    assert.equal(run(argv, [...common, '--out', join(root, 'old'), '--dtype', 'f16']).status, 0);
    const old = snapshot(join(root, 'old'));
    let fresh = null;
    const outcomes = { old: 0, new: 0 };
    const n = await trials(t, {
      count: cli === 'native' ? 120 : 50,
      seconds: 90,
      measure: () => {
        const t0 = Date.now();
        assert.equal(run(argv, [...common, '--out', join(root, 'new')]).status, 0);
        fresh = snapshot(join(root, 'new'));
        return Date.now() - t0;
      },
      attempt: async (delay, trial) => {
        const out = join(root, 'out');
        rmSync(out, { recursive: true, force: true });
        cpSync(join(root, 'old'), out, { recursive: true });
        const r = await interrupted(argv, [...common, '--out', out], 'SIGINT', delay);
        const after = snapshot(out);
        const leftovers = Object.keys(after).filter((name) => /\.(tmp|old)-|^\.peft-bridge-commit/.test(name));
        assert.deepEqual(leftovers, [], `trial ${trial} (SIGINT after ${delay} ms, ${JSON.stringify(r)}): left behind`);
        const which =
          JSON.stringify(after) === JSON.stringify(old)
            ? 'old'
            : JSON.stringify(after) === JSON.stringify(fresh)
              ? 'new'
              : null;
        assert.ok(
          which,
          `trial ${trial} (SIGINT after ${delay} ms, ${JSON.stringify(r)}): a mix of the old and the new model: ${JSON.stringify(Object.keys(after))}`,
        );
        outcomes[which] += 1;
        // Interrupted, it exits 130, or dies of the signal where no output is being written (before the output
        // is begun, after it is committed); finished first, 0 with the new model.
        assert.ok(r.code === 130 || r.sig === 'SIGINT' || (r.code === 0 && which === 'new'), JSON.stringify(r));
      },
    });
    t.diagnostic(`${JSON.stringify(outcomes)} of ${n}`);
  });

  test(`${cli} CLI: SIGINT or SIGTERM during a merge into a new directory leaves no directory, or the whole model`, async (t) => {
    const root = setUp(t, 24);
    const common = ['merge', '--base', join(root, 'base'), '--adapter', join(root, 'adapter'), '-q'];
    let fresh = null;
    const outcomes = { none: 0, new: 0 };
    await trials(t, {
      count: cli === 'native' ? 60 : 30,
      seconds: 60,
      measure: () => {
        const t0 = Date.now();
        assert.equal(run(argv, [...common, '--out', join(root, 'new')]).status, 0);
        fresh = snapshot(join(root, 'new'));
        return Date.now() - t0;
      },
      attempt: async (delay, trial) => {
        const out = join(root, 'out');
        rmSync(out, { recursive: true, force: true });
        const signal = trial % 3 ? 'SIGINT' : 'SIGTERM';
        const r = await interrupted(argv, [...common, '--out', out], signal, delay);
        const after = snapshot(out);
        if (after === null) outcomes.none += 1;
        else {
          assert.deepEqual(
            after,
            fresh,
            `trial ${trial} (${signal} after ${delay} ms, ${JSON.stringify(r)}): not the whole model`,
          );
          outcomes.new += 1;
        }
      },
    });
    t.diagnostic(JSON.stringify(outcomes));
  });

  test(`${cli} CLI: after SIGKILL, the next merge --force leaves exactly the new model (no temporary file of the killed run)`, async (t) => {
    const root = setUp(t, 24);
    const common = ['merge', '--base', join(root, 'base'), '--adapter', join(root, 'adapter'), '-q', '--force'];
    assert.equal(run(argv, [...common, '--out', join(root, 'old'), '--dtype', 'f16']).status, 0);
    let fresh = null;
    let leftBehind = 0;
    await trials(t, {
      count: cli === 'native' ? 40 : 12,
      seconds: 60,
      measure: () => {
        const t0 = Date.now();
        assert.equal(run(argv, [...common, '--out', join(root, 'new')]).status, 0);
        fresh = snapshot(join(root, 'new'));
        return Date.now() - t0;
      },
      attempt: async (delay, trial) => {
        const out = join(root, 'out');
        rmSync(out, { recursive: true, force: true });
        cpSync(join(root, 'old'), out, { recursive: true });
        await interrupted(argv, [...common, '--out', out], 'SIGKILL', delay);
        if (Object.keys(snapshot(out)).some((name) => /\.(tmp|old)-|^\.peft-bridge-commit/.test(name))) leftBehind += 1;
        const r = run(argv, [...common, '--out', out]);
        assert.equal(r.status, 0, r.stderr);
        assert.deepEqual(
          snapshot(out),
          fresh,
          `trial ${trial} (SIGKILL after ${delay} ms): the re-run's output is not exactly the new model`,
        );
      },
    });
    t.diagnostic(`${leftBehind} killed runs left temporaries behind; every re-run removed them`);
  });

  // The real case is 3,000 shards under the default limit of 1,024, which once failed with "Too many open
  // files": run for the native CLI (3.6 s of CPU per merge, 11 s wall at load average 15). The npm CLI takes 15.8 s
  // of CPU per merge of it (51 s wall at load average 17; two merges per case), so it runs the scaled case only,
  // 300 shards under 128, the same ratio of shards to descriptors and more.
  // (Measured: `ulimit -n 1024 && CLI merge --base B --adapter A --out O -q` on this model, /usr/bin/time.)
  const cases =
    cli === 'native'
      ? [
          [300, 128],
          [3000, 1024],
        ]
      : [[300, 128]];
  for (const [shards, limit] of cases) {
    test(
      `${cli} CLI: a base of ${shards} shards merges under a limit of ${limit} open files`,
      { timeout: 600000 },
      (t) => {
        const root = setUp(t, shards);
        const out = join(root, 'out');
        const command = [
          ...argv,
          'merge',
          '--base',
          join(root, 'base'),
          '--adapter',
          join(root, 'adapter'),
          '--out',
          out,
          '-q',
        ];
        const quoted = command.map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
        const r = spawnSync('sh', ['-c', `ulimit -n ${limit} && exec ${quoted}`], {
          encoding: 'utf8',
          timeout: 300000,
        });
        assert.equal(r.status, 0, r.stderr);
        const names = readdirSync(out);
        assert.equal(names.filter((n) => n.endsWith('.safetensors')).length, shards);
        assert.ok(names.includes('model.safetensors.index.json') && names.includes('config.json'));
        assert.deepEqual(
          names.filter((n) => /\.(tmp|old)-/.test(n)),
          [],
        );
        // The same bytes as without the limit.
        const free = run(argv, [
          'merge',
          '--base',
          join(root, 'base'),
          '--adapter',
          join(root, 'adapter'),
          '--out',
          join(root, 'free'),
          '-q',
        ]);
        assert.equal(free.status, 0, free.stderr);
        assert.deepEqual(snapshot(out), snapshot(join(root, 'free')));
      },
    );
  }
}
