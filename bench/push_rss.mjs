// Peak resident memory of pushToHub (web/src/remote/push.js) pushing a large output to the local Hub stand-in, run in
// a separate process so that the stand-in's copy of the upload is not counted:
//   node bench/push_rss.mjs [--size BYTES] [--source generated|file|cli] [--multipart-threshold BYTES]
// generated: a deterministic generated stream (content: () => stream, size), replayed for the hash and the upload;
// file: a sparse file of that size on disk (a Node path); cli: the npm CLI's `create --push-to` is not used here
// (its outputs are small), so 'file' stands for what --push-to does with a written model.
// Prints one JSON line: {source, size, seconds, maxRssMiB, baselineRssMiB, transfer, commit}.
import { spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, ftruncateSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const size = Number(opt('size', String(2 ** 30)));
const source = opt('source', 'generated');
const multipartThreshold = opt('multipart-threshold', String(64 * 2 ** 20));
const root = fileURLToPath(new URL('..', import.meta.url));

const { pushToHub } = await import(join(root, 'web', 'src', 'node.js'));
const baseline = process.resourceUsage().maxRSS;

const server = spawn(
  process.execPath,
  [join(root, 'tests', 'hub', 'server.mjs'), '--owner', 'me=hf_bench', '--multipart-threshold', multipartThreshold],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
const endpoint = await new Promise((resolve) => createInterface({ input: server.stdout }).once('line', resolve));

const dir = mkdtempSync(join(tmpdir(), 'pb-push-rss-'));
let content;
if (source === 'file') {
  // a sparse file with a few written bytes, so that its hash is not that of zeros only
  const path = join(dir, 'model.safetensors');
  const fd = openSync(path, 'w');
  ftruncateSync(fd, size);
  for (let at = 0; at < size; at += 64 * 2 ** 20) writeSync(fd, Buffer.from(`block ${at}`), 0, undefined, at);
  closeSync(fd);
  content = path;
} else {
  const CHUNK = 2 ** 20;
  const pattern = new Uint8Array(CHUNK);
  for (let i = 0; i < CHUNK; i++) pattern[i] = (i * 2654435761) >>> 24;
  content = () =>
    (async function* () {
      for (let at = 0; at < size; at += CHUNK) {
        const piece = pattern.slice(0, Math.min(CHUNK, size - at));
        new DataView(piece.buffer).setFloat64(0, at, true); // every chunk differs
        yield piece;
      }
    })();
}

const t0 = performance.now();
let result;
try {
  result = await pushToHub({
    repo: 'me/big',
    createRepo: true,
    token: 'hf_bench',
    endpoint,
    files: [
      { path: 'model.safetensors', content, size },
      { path: 'config.json', content: new TextEncoder().encode('{}') },
    ],
  });
} finally {
  server.kill();
  rmSync(dir, { recursive: true, force: true });
}
const seconds = (performance.now() - t0) / 1000;
console.log(
  JSON.stringify({
    source,
    size,
    seconds: Number(seconds.toFixed(1)),
    maxRssMiB: Math.round(process.resourceUsage().maxRSS / 1024),
    baselineRssMiB: Math.round(baseline / 1024),
    transfer: size >= Number(multipartThreshold) ? 'multipart' : 'basic',
    commit: result.commit,
  }),
);
