// Resource bounds (docs/limits.md): for each input class, the largest input the format allows (or about 100 MB) is
// processed or refused by both CLIs in bounded time and memory, never a crash. The bounds asserted here are
// generous (CI's 2 cores may be busy); docs/limits.md states the measured figures and the limits that apply.
// PB_RESOURCE_REPORT=1 prints each run's time and peak RSS for the docs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, hasNativeCli, nativeCli } from './helpers/common.mjs';

const TIME_LIMIT_S = 60;
const RSS_LIMIT_MB = 2048;
const report = process.env.PB_RESOURCE_REPORT === '1';

/** Runs a command under /usr/bin/time; returns status, signal, stdout/stderr heads, seconds and peak RSS in MB. */
function measured(label, command, args) {
  const r = spawnSync('/usr/bin/time', ['-f', '%e %M', command, ...args], {
    encoding: 'buffer',
    timeout: TIME_LIMIT_S * 1000 * 2,
    maxBuffer: 1 << 30,
  });
  if (r.error) throw r.error;
  const stderr = r.stderr.toString('latin1');
  const lines = stderr.trimEnd().split('\n');
  const [seconds, kb] = lines.pop().split(' ').map(Number);
  const result = {
    status: r.status,
    signal: r.signal,
    stdout: r.stdout.subarray(0, 4096).toString('latin1'),
    stderr: lines.join('\n').slice(0, 4096),
    seconds,
    rssMb: kb / 1024,
  };
  if (report)
    console.log(`${label}: exit ${r.status}, ${seconds.toFixed(2)} s, ${result.rssMb.toFixed(1)} MiB peak RSS`);
  return result;
}

/** Both CLIs, same exit status and same first line of output; each within the bounds. */
function bothWithinBounds(t, label, args, { expect }) {
  const runs = [['npm', process.execPath, [cliPath, ...args]]];
  if (hasNativeCli) runs.unshift(['native', nativeCli, args]);
  else t.diagnostic('native CLI not built: npm CLI only');
  const results = runs.map(([who, command, a]) => {
    const r = measured(`${label} (${who})`, command, a);
    assert.equal(r.signal, null, `${label} (${who}) was killed by ${r.signal}`);
    assert.ok(r.status === 0 || r.status === 1, `${label} (${who}): exit ${r.status}\n${r.stderr}`);
    assert.ok(r.seconds < TIME_LIMIT_S, `${label} (${who}): ${r.seconds} s`);
    assert.ok(r.rssMb < RSS_LIMIT_MB, `${label} (${who}): ${r.rssMb} MiB`);
    expect(r, who);
    return r;
  });
  if (results.length === 2) {
    assert.equal(results[1].status, results[0].status, `${label}: exit statuses differ`);
    assert.equal(results[1].stdout.split('\n')[0], results[0].stdout.split('\n')[0], `${label}: first lines differ`);
  }
  return results;
}

function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'pb-resources-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Writes a safetensors file of `count` zero-size F32 tensors named prefix + i, streaming the header. */
function writeManyTensors(path, count, prefix = 't') {
  const parts = ['{'];
  for (let i = 0; i < count; ++i)
    parts.push(`${i ? ',' : ''}"${prefix}${i}":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`);
  parts.push('}');
  let json = parts.join('');
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const fd = openSync(path, 'w');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeSync(fd, len);
  writeSync(fd, json);
  closeSync(fd);
  return json.length;
}

const errorJson = (r) => JSON.parse(r.stdout).error;

test('header: a 100 MB header is refused at once; a 1,000,000-tensor header is inspected', (t) => {
  const dir = tempDir(t);
  const tooLarge = join(dir, 'too-large.safetensors');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(100_000_001n);
  writeFileSync(tooLarge, len);
  bothWithinBounds(t, 'header of 100,000,001 bytes', ['inspect', tooLarge, '--json'], {
    expect: (r) => assert.equal(errorJson(r).code, 'HeaderTooLarge'),
  });
  const many = join(dir, 'many.safetensors');
  const size = writeManyTensors(many, 1_000_000);
  t.diagnostic(`header of ${size} bytes`);
  bothWithinBounds(t, 'header with 1,000,000 tensors', ['inspect', many, '--json'], {
    expect: (r) => assert.equal(r.status, 0, r.stderr),
  });
});

const adapterFiles = (dir, config) => {
  mkdirSync(dir, { recursive: true });
  // One rank-1 module: base_model.model.layers.0.q_proj (A 1x2, B 2x1), F32 zeros.
  const header = JSON.stringify({
    'base_model.model.layers.0.q_proj.lora_A.weight': { dtype: 'F32', shape: [1, 2], data_offsets: [0, 8] },
    'base_model.model.layers.0.q_proj.lora_B.weight': { dtype: 'F32', shape: [2, 1], data_offsets: [8, 16] },
  });
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(header.length));
  writeFileSync(join(dir, 'adapter_model.safetensors'), Buffer.concat([len, Buffer.from(header), Buffer.alloc(16)]));
  writeFileSync(join(dir, 'adapter_config.json'), config);
  return dir;
};

test('config: a 100 MB adapter_config.json of 1,000,000 unknown keys, and one nested 1,000,000 deep', (t) => {
  const dir = tempDir(t);
  const keys = [];
  for (let i = 0; i < 1_000_000; ++i) keys.push(`"unknown_key_${i}_${'x'.repeat(70)}":${i}`);
  const wide = adapterFiles(
    join(dir, 'wide'),
    `{"peft_type":"LORA","r":1,"lora_alpha":1,"target_modules":["q_proj"],${keys.join(',')}}`,
  );
  bothWithinBounds(t, 'config with 1,000,000 keys', ['adapter-info', wide, '--json'], {
    expect: (r) => assert.ok(r.status === 0 || errorJson(r).code === 'InvalidConfig', r.stdout.slice(0, 300)),
  });
  const deep = adapterFiles(
    join(dir, 'deep'),
    `{"peft_type":"LORA","r":1,"x":${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}}`,
  );
  bothWithinBounds(t, 'config nested 1,000,000 deep', ['adapter-info', deep, '--json'], {
    expect: (r) => assert.equal(errorJson(r).code, 'InvalidConfig'),
  });
});

test('patterns: 50,000 rank_pattern keys over 200 modules; a 1 MB pattern; (a+)+$ on a 100,000-character name', (t) => {
  const dir = tempDir(t);
  const rankPattern = {};
  for (let i = 0; i < 50_000; ++i) rankPattern[`layers\\.${i + 1000}\\.q_proj`] = 2;
  const modules = [];
  for (let l = 0; l < 200; ++l) modules.push(l);
  const header = {};
  let offset = 0;
  for (const l of modules) {
    header[`base_model.model.layers.${l}.q_proj.lora_A.weight`] = {
      dtype: 'F32',
      shape: [1, 2],
      data_offsets: [offset, offset + 8],
    };
    header[`base_model.model.layers.${l}.q_proj.lora_B.weight`] = {
      dtype: 'F32',
      shape: [2, 1],
      data_offsets: [offset + 8, offset + 16],
    };
    offset += 16;
  }
  const many = join(dir, 'many');
  mkdirSync(many);
  const json = JSON.stringify(header);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(join(many, 'adapter_model.safetensors'), Buffer.concat([len, Buffer.from(json), Buffer.alloc(offset)]));
  writeFileSync(
    join(many, 'adapter_config.json'),
    JSON.stringify({ peft_type: 'LORA', r: 1, lora_alpha: 1, target_modules: ['q_proj'], rank_pattern: rankPattern }),
  );
  bothWithinBounds(t, '50,000 rank_pattern keys x 200 modules', ['adapter-info', many, '--json'], {
    expect: (r) => assert.equal(r.status, 0, r.stdout.slice(0, 300)),
  });

  const longPattern = adapterFiles(
    join(dir, 'long-pattern'),
    JSON.stringify({ peft_type: 'LORA', r: 1, lora_alpha: 1, target_modules: `(${'a'.repeat(1 << 20)}|.*q_proj)` }),
  );
  bothWithinBounds(t, 'a 1 MB target_modules pattern', ['adapter-info', longPattern, '--json'], {
    expect: (r) => assert.ok(r.status === 0 || errorJson(r).code === 'InvalidConfig', r.stdout.slice(0, 300)),
  });
  const nested = adapterFiles(
    join(dir, 'nested'),
    JSON.stringify({
      peft_type: 'LORA',
      r: 1,
      lora_alpha: 1,
      target_modules: '(a+)+$',
      modules_to_save: ['a'.repeat(100_000)],
    }),
  );
  bothWithinBounds(t, '(a+)+$ with a 100,000-character modules_to_save', ['adapter-info', nested, '--json'], {
    expect: (r) => assert.ok(r.status === 0 || r.status === 1, r.stdout.slice(0, 300)),
  });
});

test('index: a 1,000,000-entry weight_map is planned; an index nested 1,000,000 deep is refused before any output', (t) => {
  const dir = tempDir(t);
  const base = join(dir, 'base');
  mkdirSync(base);
  writeManyTensors(join(base, 'model-00001-of-00001.safetensors'), 1_000_000);
  const entries = [];
  for (let i = 0; i < 1_000_000; ++i) entries.push(`"t${i}":"model-00001-of-00001.safetensors"`);
  writeFileSync(
    join(base, 'model.safetensors.index.json'),
    `{"metadata":{"total_size":0},"weight_map":{${entries.join(',')}}}`,
  );
  const adapter = adapterFiles(
    join(dir, 'adapter'),
    JSON.stringify({ peft_type: 'LORA', r: 1, lora_alpha: 1, target_modules: ['q_proj'] }),
  );
  bothWithinBounds(
    t,
    'merge --dry-run over a 1,000,000-entry index',
    ['merge', '--base', base, '--adapter', adapter, '--out', join(dir, 'out'), '--dry-run', '--json'],
    {
      // The adapter's module is not in this base: a precise plan error, found after reading the whole index.
      expect: (r) => assert.equal(r.status, 1, r.stdout.slice(0, 300)),
    },
  );
  assert.ok(!existsSync(join(dir, 'out')), 'nothing written');

  const deep = join(dir, 'deep');
  mkdirSync(deep);
  writeManyTensors(join(deep, 'model-00001-of-00001.safetensors'), 1);
  writeFileSync(
    join(deep, 'model.safetensors.index.json'),
    `{"weight_map":{"t0":"model-00001-of-00001.safetensors"},"x":${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}}`,
  );
  const out = join(dir, 'out-deep');
  bothWithinBounds(
    t,
    'index nested 1,000,000 deep',
    ['merge', '--base', deep, '--adapter', adapter, '--out', out, '--json'],
    { expect: (r) => assert.equal(errorJson(r).code, 'InvalidConfig') },
  );
  assert.ok(!existsSync(out) || readdirSync(out).length === 0, 'nothing left in --out');
});
