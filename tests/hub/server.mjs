// A local stand-in for the Hugging Face Hub, for tests: nothing in the test suites may talk to the real Hub.
// Plain node:http and no dependencies, so Node tests, a headless-Chromium page and a workerd test can all use it.
//
// Behaves like the Hub where the client can tell:
//   GET/HEAD /{owner}/{repo}/resolve/{revision}/{path}
//     - large files (not .json/.txt/.md: the Hub keeps those in LFS) answer 302 to a content-addressed "CDN" URL
//       on the same server, with X-Linked-Etag, X-Linked-Size and X-Repo-Commit, as the Hub does;
//     - small files are served right there (200/206) with X-Repo-Commit.
//   GET /api/models/{owner}/{repo}/tree/{revision}[/{folder}]: the folder's entries (files and directories).
//   GET/HEAD /cdn/{sha256}: the bytes, with Range (206 + Content-Range, 416 when unsatisfiable), Accept-Ranges
//     and a strong ETag (the content hash, so a changed file has a new ETag).
//   OPTIONS: CORS preflight. Every answer carries Access-Control-Allow-Origin: * and exposes the headers a
//     browser client needs.
//   Private repos need `Authorization: Bearer <token>` (401 otherwise, as the Hub answers for a repo it will not
//   show); unknown repos, revisions and files are 404 with X-Error-Code / X-Error-Message like the Hub's.
//
// Faults, injected on the responses that carry file bytes (CDN answers, and small files at resolve):
//   {type: 'truncate', at}            send `at` body bytes, then close the socket
//   {type: 'status', status, retryAfter}  answer `status` (e.g. 503) with an optional Retry-After (seconds)
//   {type: 'wrongContentRange'}       206 whose Content-Range is one byte off
//   {type: 'slow', delay, chunk}      send the body in `chunk`-byte pieces, `delay` ms apart
//   {type: 'ignoreRange'}             200 with the whole file, whatever the Range header said
//   {type: 'hang'}                    never answer (the connection stays open until the client leaves)
//   {type: 'redirect', location, status}  answer `status` (default 302) with this Location; 'self' redirects to
//                                     the request's own URL (a loop)
//   {type: 'change', after, bytes}    after `after` reads of the file (requests for its current bytes: at the CDN
//                                     for large files, at resolve for small ones, counted from when the fault is
//                                     added), the file becomes `bytes`
//                                     (default: the same bytes with the last one flipped), with a new ETag; the
//                                     old bytes' CDN URL then answers 403, as a signed URL does once expired
// Each fault may have `path` (a string, matched against "repo/path" or "path", or a RegExp) and `times` (apply
// to that many matching requests, default every one) and `skip` (let that many pass first). Every matching fault
// applies to a request (and spends its budget), so give sequential faults increasing `skip`s. Faults live in
// `hub.faults`, so a test can push one just before the request it should hit.
//
//   const hub = await startHub({ files: { 'me/model': { 'model.safetensors': bytes } }, tokens: { 'me/private': 'hf_x' } });
//   hub.endpoint  // http://127.0.0.1:PORT
//   hub.requests  // [{method, url, kind: 'resolve'|'cdn'|'tree'|'preflight'|'other', repo, path, revision, range, status,
//                 //   auth, completed (false if the client left before the whole answer was sent)}]
//   await hub.close();
//
// Run directly (`node tests/hub/server.mjs [--port N] [--dir owner/repo=DIR]...`) it serves until killed and
// prints its endpoint on the first line.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const EXPOSED = [
  'Content-Range', 'ETag', 'Content-Length', 'Accept-Ranges', 'X-Linked-Etag', 'X-Linked-Size', 'X-Repo-Commit',
  'X-Error-Code', 'X-Error-Message', 'Retry-After',
].join(', ');

const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');
// Small git-stored files the Hub serves directly; everything else is LFS behind the CDN redirect.
const isLfs = (path) => !/\.(json|txt|md)$/i.test(path);

function toBytes(value) {
  if (typeof value === 'string') return new TextEncoder().encode(value);
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  throw new TypeError('hub: file contents must be bytes or a string');
}

/** Every file under `dir`, keyed by its path relative to `dir` ('/'-separated). */
function readDirectory(dir, prefix = '') {
  const out = {};
  for (const name of readdirSync(dir).sort()) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) Object.assign(out, readDirectory(full, `${prefix}${name}/`));
    else out[prefix + name] = new Uint8Array(readFileSync(full));
  }
  return out;
}

/** Parses a single `bytes=a-b` / `bytes=a-` / `bytes=-n` range against `size`: {start, end} (end exclusive),
 * 'unsatisfiable', or null to ignore the header (absent, malformed or several ranges: a 200 is allowed then). */
function parseRange(header, size) {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header ?? '');
  if (!m || (m[1] === '' && m[2] === '')) return null;
  if (m[1] === '') {
    const n = Number(m[2]);
    if (n === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - n), end: size };
  }
  const start = Number(m[1]);
  const last = m[2] === '' ? Infinity : Number(m[2]);
  if (last < start) return null;
  if (start >= size) return 'unsatisfiable';
  return { start, end: Math.min(last + 1, size) };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Starts the fake Hub on 127.0.0.1 (a free port unless `port` is given).
 * @param {{files?: Record<string, Record<string, Uint8Array|string> | string>, tokens?: Record<string, string>,
 *   faults?: object[], port?: number, host?: string}} [options]
 *   files: repo → {path → bytes} or repo → a directory to serve; tokens: repo → the token that opens it (the
 *   repo is then private).
 */
export async function startHub(options = {}) {
  const repos = new Map(); // repo → {files: Map(path → {bytes, etag}), commit, version}
  const blobs = new Map(); // sha256 → {bytes, repo, path}: the CDN, content-addressed (old versions stay)
  const tokens = new Map(Object.entries(options.tokens ?? {}));
  const faults = [...(options.faults ?? [])];
  const requests = [];

  function commitOf(repo, version) {
    return createHash('sha1').update(`${repo}@${version}`).digest('hex');
  }

  /** Adds or replaces a file; the repo gets a new commit. */
  function setFile(repo, path, contents) {
    let r = repos.get(repo);
    if (!r) repos.set(repo, (r = { files: new Map(), version: 0, commit: '' }));
    const bytes = toBytes(contents);
    const hash = sha256(bytes);
    r.files.set(path, { bytes, hash });
    blobs.set(hash, { bytes, repo, path });
    r.version += 1;
    r.commit = commitOf(repo, r.version);
  }

  function addRepo(repo, files) {
    const entries = typeof files === 'string' ? readDirectory(files) : files;
    if (!repos.has(repo)) repos.set(repo, { files: new Map(), version: 0, commit: '' });
    for (const [path, bytes] of Object.entries(entries)) setFile(repo, path, bytes);
  }
  for (const [repo, files] of Object.entries(options.files ?? {})) addRepo(repo, files);
  for (const repo of tokens.keys()) if (!repos.has(repo)) addRepo(repo, {});

  /** The faults that apply to this file request (consuming their `skip` / `times` budgets). */
  function faultsFor(repo, path) {
    const key = `${repo}/${path}`;
    const hits = [];
    for (const f of faults) {
      const match = f.path === undefined || (f.path instanceof RegExp ? f.path.test(key) : f.path === key || f.path === path);
      if (!match || f.type === 'change') continue;
      if ((f.skip ?? 0) > 0) {
        f.skip -= 1;
        continue;
      }
      if (f.times !== undefined) {
        if (f.times <= 0) continue;
        f.times -= 1;
      }
      hits.push(f);
    }
    return hits;
  }

  /** Applies due 'change' faults: once a fault has seen `after` requests for its file, the file changes. */
  function applyChanges(repo, path) {
    const key = `${repo}/${path}`;
    for (const f of faults) {
      if (f.type !== 'change' || f.done) continue;
      const match = f.path === undefined || (f.path instanceof RegExp ? f.path.test(key) : f.path === key || f.path === path);
      if (!match || !repos.get(repo).files.has(path)) continue;
      f.seen = (f.seen ?? 0) + 1;
      if (f.seen <= (f.after ?? 1)) continue;
      const old = repos.get(repo).files.get(path).bytes;
      let next = f.bytes;
      if (next === undefined) {
        next = old.slice();
        if (next.length) next[next.length - 1] ^= 1;
      }
      const before = repos.get(repo).files.get(path).hash;
      setFile(repo, path, next);
      if (blobs.get(before) !== blobs.get(repos.get(repo).files.get(path).hash)) blobs.get(before).expired = true;
      f.done = true;
    }
  }

  function cors(res) {
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.setHeader('Access-Control-Expose-Headers', EXPOSED);
  }

  function error(res, status, code, message, extra = {}) {
    res.writeHead(status, { 'Content-Type': 'text/plain', 'X-Error-Code': code, 'X-Error-Message': message, ...extra });
    res.end(`${message}\n`);
    return status;
  }

  /** Serves `bytes` (HEAD: headers only) with Range support and the faults in `hits`. Returns the status. */
  async function sendFile(req, res, file, hits, extraHeaders) {
    const { bytes, hash } = file;
    const size = bytes.length;
    if (hits.some((f) => f.type === 'hang')) {
      await new Promise((resolve) => res.on('close', resolve));
      return 0;
    }
    const redirect = hits.find((f) => f.type === 'redirect');
    if (redirect) {
      res.writeHead(redirect.status ?? 302, { Location: redirect.location === 'self' ? req.url : redirect.location, 'Content-Length': '0' });
      res.end();
      return redirect.status ?? 302;
    }
    const status = hits.find((f) => f.type === 'status');
    if (status) {
      const headers = status.retryAfter !== undefined ? { 'Retry-After': String(status.retryAfter) } : {};
      return error(res, status.status ?? 503, 'ServiceUnavailable', 'Injected failure', headers);
    }
    const headers = { ...extraHeaders, 'Accept-Ranges': 'bytes', ETag: `"${hash}"`, 'Content-Type': 'application/octet-stream' };
    let range = hits.some((f) => f.type === 'ignoreRange') ? null : parseRange(req.headers.range, size);
    if (range === 'unsatisfiable') {
      res.writeHead(416, { ...headers, 'Content-Range': `bytes */${size}` });
      res.end();
      return 416;
    }
    let code = 200;
    let body = bytes;
    if (range) {
      code = 206;
      body = bytes.subarray(range.start, range.end);
      const shift = hits.some((f) => f.type === 'wrongContentRange') ? 1 : 0;
      headers['Content-Range'] = `bytes ${range.start + shift}-${range.end - 1 + shift}/${size}`;
    }
    headers['Content-Length'] = String(body.length);
    res.writeHead(code, headers);
    if (req.method === 'HEAD') {
      res.end();
      return code;
    }
    const truncate = hits.find((f) => f.type === 'truncate');
    if (truncate) {
      // Send part of the body, then drop the connection: the client sees fewer bytes than Content-Length.
      const part = body.subarray(0, Math.min(truncate.at ?? Math.floor(body.length / 2), body.length));
      res.write(part, () => setTimeout(() => res.socket?.destroy(), 10));
      return code;
    }
    const slow = hits.find((f) => f.type === 'slow');
    if (slow) {
      const chunk = slow.chunk ?? 16384;
      for (let pos = 0; pos < body.length; pos += chunk) {
        if (res.destroyed) return code;
        res.write(body.subarray(pos, pos + chunk));
        await sleep(slow.delay ?? 50);
      }
      res.end();
      return code;
    }
    res.end(body);
    return code;
  }

  /** Checks the token of a private repo: null when allowed, else the error status already sent. */
  function denied(req, res, repo) {
    const token = tokens.get(repo);
    if (token === undefined) return null;
    if (req.headers.authorization === `Bearer ${token}`) return null;
    return error(res, 401, 'RepoNotFound', 'Repository not found');
  }

  async function handle(req, res, entry) {
    cors(res);
    if (req.method === 'OPTIONS') {
      entry.kind = 'preflight';
      res.writeHead(204, {
        'Access-Control-Allow-Methods': 'GET, HEAD, OPTIONS',
        'Access-Control-Allow-Headers': req.headers['access-control-request-headers'] ?? 'Authorization, Range',
        'Access-Control-Max-Age': '600',
      });
      res.end();
      return 204;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') return error(res, 405, 'MethodNotAllowed', 'Method not allowed');
    const url = new URL(req.url, 'http://hub.invalid');
    const segments = url.pathname.split('/').slice(1);

    if (segments[0] === 'cdn' && segments.length === 2) {
      entry.kind = 'cdn';
      const blob = blobs.get(segments[1]);
      if (!blob) return error(res, 404, 'EntryNotFound', 'Entry not found');
      entry.repo = blob.repo;
      entry.path = blob.path;
      if (repos.get(blob.repo)?.files.get(blob.path)?.hash === segments[1]) applyChanges(blob.repo, blob.path);
      if (blob.expired) return error(res, 403, 'Expired', 'Request has expired');
      return sendFile(req, res, { bytes: blob.bytes, hash: segments[1] }, faultsFor(blob.repo, blob.path), {});
    }

    // api/models/{owner}/{repo}/tree/{revision}[/{folder...}]: the folder's direct entries, as the Hub lists them
    // ([{type: 'file', path, size, oid}, {type: 'directory', path, oid}], paths from the repo's root).
    if (segments[0] === 'api' && segments[1] === 'models' && segments[4] === 'tree' && segments.length >= 6) {
      entry.kind = 'tree';
      let repo, revision, folder;
      try {
        repo = `${decodeURIComponent(segments[2])}/${decodeURIComponent(segments[3])}`;
        revision = decodeURIComponent(segments[5]);
        folder = segments.slice(6).filter((x) => x !== '').map(decodeURIComponent).join('/');
      } catch {
        return error(res, 400, 'BadRequest', 'Malformed URL');
      }
      Object.assign(entry, { repo, path: folder, revision });
      const r = repos.get(repo);
      if (!r) return error(res, 404, 'RepoNotFound', 'Repository not found');
      const refused = denied(req, res, repo);
      if (refused) return refused;
      if (revision !== 'main' && revision !== r.commit) return error(res, 404, 'RevisionNotFound', `Invalid rev id: ${revision}`);
      const prefix = folder ? `${folder}/` : '';
      const entries = new Map();
      for (const [path, file] of r.files) {
        if (!path.startsWith(prefix)) continue;
        const rest = path.slice(prefix.length);
        const slash = rest.indexOf('/');
        if (slash === -1) entries.set(path, { type: 'file', oid: file.hash, size: file.bytes.length, path });
        else entries.set(prefix + rest.slice(0, slash), { type: 'directory', oid: r.commit, path: prefix + rest.slice(0, slash) });
      }
      if (folder && entries.size === 0) return error(res, 404, 'EntryNotFound', `${folder} does not exist on "${revision}"`);
      const body = JSON.stringify([...entries.values()]);
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) });
      res.end(req.method === 'HEAD' ? undefined : body);
      return 200;
    }

    // {owner}/{repo}/resolve/{revision}/{path...} (or a legacy {repo}/resolve/... without owner)
    const at = segments.indexOf('resolve');
    if (at < 1 || at > 2 || segments.length < at + 3) return error(res, 404, 'RepoNotFound', 'Repository not found');
    entry.kind = 'resolve';
    let repo, revision, path;
    try {
      repo = segments.slice(0, at).map(decodeURIComponent).join('/');
      revision = decodeURIComponent(segments[at + 1]);
      path = segments.slice(at + 2).map(decodeURIComponent).join('/');
    } catch {
      return error(res, 400, 'BadRequest', 'Malformed URL');
    }
    Object.assign(entry, { repo, path, revision });
    const r = repos.get(repo);
    if (!r) return error(res, 404, 'RepoNotFound', 'Repository not found');
    const refused = denied(req, res, repo);
    if (refused) return refused;
    if (revision !== 'main' && revision !== r.commit) return error(res, 404, 'RevisionNotFound', `Invalid rev id: ${revision}`);
    if (!isLfs(path)) applyChanges(repo, path); // an LFS file's reads are counted at the CDN, where each ends
    const file = r.files.get(path);
    if (!file) return error(res, 404, 'EntryNotFound', 'Entry not found', { 'X-Repo-Commit': r.commit });
    const repoHeaders = { 'X-Repo-Commit': r.commit };
    if (!isLfs(path)) return sendFile(req, res, file, faultsFor(repo, path), repoHeaders);
    const location = `http://${req.headers.host}/cdn/${file.hash}`;
    res.writeHead(302, {
      ...repoHeaders,
      Location: location,
      'X-Linked-Etag': `"${file.hash}"`,
      'X-Linked-Size': String(file.bytes.length),
      'Content-Length': '0',
    });
    res.end();
    return 302;
  }

  const server = createServer((req, res) => {
    const entry = {
      method: req.method,
      url: req.url,
      kind: 'other',
      repo: null,
      path: null,
      range: req.headers.range ?? null,
      auth: req.headers.authorization ?? null,
      status: null,
      completed: null,
    };
    requests.push(entry);
    // The status is logged as the headers go out: a test may look while a slow body is still being sent.
    const writeHead = res.writeHead.bind(res);
    res.writeHead = (status, ...rest) => {
      entry.status = status;
      return writeHead(status, ...rest);
    };
    // false when the client went away before the whole answer was sent (a cancelled body)
    res.on('close', () => {
      entry.completed = res.writableFinished;
    });
    handle(req, res, entry).then(
      (status) => {
        entry.status = status;
      },
      (e) => {
        entry.status = 500;
        if (!res.headersSent) error(res, 500, 'InternalError', String(e?.message ?? e));
        else res.destroy();
      },
    );
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve);
  });
  const { port } = server.address();
  const endpoint = `http://${options.host ?? '127.0.0.1'}:${port}`;

  return {
    endpoint,
    requests,
    faults,
    setFile,
    addRepo,
    /** The commit a repo is at now. */
    commit: (repo) => repos.get(repo)?.commit ?? null,
    /** The requests (optionally of one kind, for one file path) logged since the last clearLog(). */
    log: (kind, path) => requests.filter((r) => (!kind || r.kind === kind) && (!path || r.path === path)),
    clearLog: () => {
      requests.length = 0;
    },
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections?.();
      }),
  };
}

// Standalone: node tests/hub/server.mjs [--port N] [--dir owner/repo=DIR]... [--token owner/repo=TOKEN]...
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const files = {};
  const tokens = {};
  let port = 0;
  const args = process.argv.slice(2);
  for (let i = 0; i + 1 < args.length; i += 2) {
    const [flag, value] = [args[i], args[i + 1]];
    const eq = value.indexOf('=');
    if (flag === '--port') port = Number(value);
    else if (flag === '--dir' && eq > 0) files[value.slice(0, eq)] = value.slice(eq + 1);
    else if (flag === '--token' && eq > 0) tokens[value.slice(0, eq)] = value.slice(eq + 1);
    else throw new Error(`usage: node tests/hub/server.mjs [--port N] [--dir owner/repo=DIR]... [--token owner/repo=TOKEN]...`);
  }
  const hub = await startHub({ files, tokens, port });
  console.log(hub.endpoint);
}
