// A local stand-in for the Hugging Face Hub, for tests: nothing in the test suites may talk to the real Hub.
// Plain node:http and no dependencies, so Node tests, a headless-Chromium page and a workerd test can all use it.
//
// Behaves like the Hub where the client can tell:
//   GET/HEAD /{owner}/{repo}/resolve/{revision}/{path}
//     - large files (not .json/.txt/.md: the Hub keeps those in LFS) answer 302 to a content-addressed "CDN" URL
//       on the same server, with X-Linked-Etag, X-Linked-Size and X-Repo-Commit, as the Hub does;
//     - small files are served right there (200/206) with X-Repo-Commit.
//   GET /api/models/{owner}/{repo}/tree/{revision}[/{folder}]: the folder's entries (files and directories).
//   GET /api/models/{owner}/{repo}: the repo's info (whether it exists: a push asks after a refused creation).
//   GET/HEAD /cdn/{sha256}: the bytes, with Range (206 + Content-Range, 416 when unsatisfiable), Accept-Ranges
//     and a strong ETag (the content hash, so a changed file has a new ETag).
//   OPTIONS: CORS preflight. Every answer carries Access-Control-Allow-Origin: * and exposes the headers a
//     browser client needs.
//   Private repos need `Authorization: Bearer <token>` (401 otherwise, as the Hub answers for a repo it will not
//   show); unknown repos, revisions and files are 404 with X-Error-Code / X-Error-Message like the Hub's.
//
// The commit API, as the Hub documents it and @huggingface/hub's commit() uses it (write access: see `owners`):
//   POST /api/repos/create {name, organization?, type?, visibility?: 'private'|'public' (or private: bool)}: a new
//     empty model repo (409 if it exists; 401/403 as for any write to the namespace, whether or not it exists,
//     as the Hub refuses a token that may not create there).
//   POST /api/models/{owner}/{repo}/branch/{branch} {startingPoint?}: a branch at main (or startingPoint).
//   POST /api/models/{owner}/{repo}/preupload/{revision}[?create_pr=1] {files: [{path, size, sample}]}:
//     {files: [{path, uploadMode: 'lfs'|'regular', shouldIgnore: false}], commitOid}; 'lfs' for files over
//     `lfsThreshold` (10 MB) or whose name the resolve rule above keeps in LFS.
//   POST /{owner}/{repo}.git/info/lfs/objects/batch {operation: 'upload', objects: [{oid, size}]}: per object
//     either no action (already stored) or actions.upload: a basic PUT URL on this server, or (objects of at
//     least `multipartThreshold` bytes) the Hub's multipart form: header {chunk_size, '00001': part URL, ...} and
//     href the completion URL (POST {oid, parts: [{partNumber, etag}]}).
//   PUT /lfs/upload/{oid}, PUT /lfs/part/{id}/{n}, POST /lfs/complete/{id}: the upload URLs (no token needed,
//     they are pre-signed like S3's). The bytes are checked against the oid's sha256 and size. An uploaded object
//     is invisible (the CDN answers 404) until a commit names it.
//   POST /api/models/{owner}/{repo}/commit/{revision}[?create_pr=1] (NDJSON: {key: 'header', value: {summary,
//     description?, parentCommit?}}, then {key: 'file', value: {path, content, encoding: 'base64'}},
//     {key: 'lfsFile', value: {path, algo: 'sha256', size, oid}}, {key: 'deletedFile', value: {path}}): checked
//     whole first, then applied at once (one new commit), on the branch or, with create_pr=1, on a new
//     refs/pr/N branched from the revision: {commitOid, commitUrl, pullRequestUrl?, hookOutput: ''}. Nothing
//     changes unless it answers 200.
//   Write access: `Authorization: Bearer T` where T is `owners[namespace]` (the repo's owner) or the private
//   repo's token in `tokens`; none → 401, another valid token → 403. Revisions: 'main', a branch name
//   ('refs/pr/1' too, URL-encoded) or a branch's current commit.
//
// Faults, injected on the responses that carry file bytes (CDN answers, and small files at resolve):
//   {type: 'truncate', at}            send `at` body bytes, then close the socket
//   {type: 'status', status, retryAfter}  answer `status` (e.g. 503) with an optional Retry-After (seconds, or
//                                     any text); `retryAfterDate: s` sends it as an HTTP-date, s seconds after the
//                                     answer's Date
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
// Faults with `on` apply to the commit API instead: on: 'preupload' | 'batch' | 'upload' (a basic PUT) | 'part' |
//   'complete' | 'commit' | 'create' | 'branch', with type 'status' (as above; the request's body is read and
//   dropped), 'reset' (read `at` body bytes, default half, then destroy the socket) or 'hang' (accept the request
//   and never answer, until the client leaves), and optional `repo`.
// Each fault may have `path` (a string, matched against "repo/path" or "path", or a RegExp) and `times` (apply
// to that many matching requests, default every one) and `skip` (let that many pass first). Every matching fault
// applies to a request (and spends its budget), so give sequential faults increasing `skip`s. Faults live in
// `hub.faults`, so a test can push one just before the request it should hit.
//
// Latency: `latency` (ms, option or hub.latency, default 0) delays every answer's head, as a round trip to a far
// server would (a Hub resolve and its CDN redirect then cost two). hub.maxInFlight is the most requests that were
// open at once (since the last clearLog()).
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
  'Content-Range',
  'ETag',
  'Content-Length',
  'Accept-Ranges',
  'X-Linked-Etag',
  'X-Linked-Size',
  'X-Repo-Commit',
  'X-Error-Code',
  'X-Error-Message',
  'Retry-After',
  'Date',
].join(', ');

/** A status fault's Retry-After: `retryAfter` as given (seconds, or any text), or, with `retryAfterDate`, the
 * HTTP-date that many seconds after the answer's own Date header (both set here, from one instant). */
function retryAfterHeaders(fault) {
  if (fault.retryAfterDate !== undefined) {
    const now = Date.now();
    const at = new Date(now + fault.retryAfterDate * 1000);
    return { Date: new Date(now).toUTCString(), 'Retry-After': at.toUTCString() };
  }
  return fault.retryAfter !== undefined ? { 'Retry-After': String(fault.retryAfter) } : {};
}

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
 *   faults?: object[], port?: number, host?: string, owners?: Record<string, string>, lfsThreshold?: number,
 *   multipartThreshold?: number, partSize?: number}} [options]
 *   files: repo → {path → bytes} or repo → a directory to serve; tokens: repo → the token that opens it (the
 *   repo is then private, and the token writes to it); owners: namespace → the token that writes to (and
 *   creates) its repos; lfsThreshold: preupload's size limit for regular files (10 MB); multipartThreshold /
 *   partSize: LFS objects at least this large are uploaded in parts of partSize (64 MiB / 16 MiB).
 */
export async function startHub(options = {}) {
  // repo → {files: Map(path → {bytes, hash, lfs}), commit, version (counts every commit of the repo),
  //   branches: Map(name → {files, commit}) for branches other than main (refs/pr/N too), prs}
  const repos = new Map();
  const blobs = new Map(); // sha256 → {bytes, repo, path}: the CDN, content-addressed (old versions stay)
  const tokens = new Map(Object.entries(options.tokens ?? {}));
  const owners = new Map(Object.entries(options.owners ?? {})); // namespace → the token that writes there
  const lfsThreshold = options.lfsThreshold ?? 10_000_000;
  const multipartThreshold = options.multipartThreshold ?? 64 * 2 ** 20;
  const partSize = options.partSize ?? 16 * 2 ** 20;
  const pending = new Map(); // sha256 → bytes: uploaded LFS objects no commit has named yet (invisible)
  const expected = new Map(); // sha256 → size, from the LFS batch call (what the upload URLs accept)
  const multipart = new Map(); // upload id → {oid, size, parts: Map(n → {bytes, etag})}
  let uploadCount = 0;
  const faults = [...(options.faults ?? [])];
  const requests = [];

  function commitOf(repo, version) {
    return createHash('sha1').update(`${repo}@${version}`).digest('hex');
  }
  const newRepo = () => ({ files: new Map(), version: 0, commit: '', branches: new Map(), prs: 0 });

  /** The branch a revision names: {name, files, commit} ('main', a branch, or a branch's current commit), or null. */
  function refOf(r, revision) {
    if (revision === 'main' || revision === r.commit) return { name: 'main', files: r.files, commit: r.commit };
    for (const [name, b] of r.branches)
      if (revision === name || revision === b.commit) return { name, files: b.files, commit: b.commit };
    return null;
  }

  /** Points a branch at new files, as one new commit. */
  function setRef(repo, r, name, files) {
    r.version += 1;
    const commit = commitOf(repo, r.version);
    if (name === 'main') {
      r.files = files;
      r.commit = commit;
    } else r.branches.set(name, { files, commit });
    return commit;
  }

  /** Adds or replaces a file; the repo gets a new commit. */
  function setFile(repo, path, contents) {
    let r = repos.get(repo);
    if (!r) repos.set(repo, (r = newRepo()));
    const bytes = toBytes(contents);
    const hash = sha256(bytes);
    r.files.set(path, { bytes, hash, lfs: isLfs(path) });
    blobs.set(hash, { bytes, repo, path });
    r.version += 1;
    r.commit = commitOf(repo, r.version);
  }

  function addRepo(repo, files) {
    const entries = typeof files === 'string' ? readDirectory(files) : files;
    if (!repos.has(repo)) repos.set(repo, newRepo());
    for (const [path, bytes] of Object.entries(entries)) setFile(repo, path, bytes);
  }
  for (const [repo, files] of Object.entries(options.files ?? {})) addRepo(repo, files);
  for (const repo of tokens.keys()) if (!repos.has(repo)) addRepo(repo, {});

  /** The faults that apply to this file request (consuming their `skip` / `times` budgets). */
  function faultsFor(repo, path) {
    const key = `${repo}/${path}`;
    const hits = [];
    for (const f of faults) {
      const match =
        f.path === undefined || (f.path instanceof RegExp ? f.path.test(key) : f.path === key || f.path === path);
      if (!match || f.type === 'change' || f.on) continue;
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
      if (f.type !== 'change' || f.done || f.on) continue;
      const match =
        f.path === undefined || (f.path instanceof RegExp ? f.path.test(key) : f.path === key || f.path === path);
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

  /** The commit API's errors: JSON {error} as the Hub's API answers (and @huggingface/hub reads), same headers. */
  function apiError(res, status, code, message, extra = {}) {
    const body = JSON.stringify({ error: message });
    res.writeHead(status, {
      'Content-Type': 'application/json',
      'X-Error-Code': code,
      'X-Error-Message': message,
      ...extra,
    });
    res.end(body);
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
      res.writeHead(redirect.status ?? 302, {
        Location: redirect.location === 'self' ? req.url : redirect.location,
        'Content-Length': '0',
      });
      res.end();
      return redirect.status ?? 302;
    }
    const status = hits.find((f) => f.type === 'status');
    if (status) {
      const headers = retryAfterHeaders(status);
      return error(res, status.status ?? 503, 'ServiceUnavailable', 'Injected failure', headers);
    }
    const headers = {
      ...extraHeaders,
      'Accept-Ranges': 'bytes',
      ETag: `"${hash}"`,
      'Content-Type': 'application/octet-stream',
    };
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

  /** The commit-API faults that apply to this request (consuming their budgets). */
  function apiFaults(on, repo) {
    const hits = [];
    for (const f of faults) {
      if (f.on !== on || (f.repo !== undefined && f.repo !== repo)) continue;
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

  /** Reads a request's body whole (at most `limit` bytes), hashing it on the way. */
  function readBody(req, limit = 2 ** 31) {
    return new Promise((resolve, reject) => {
      const chunks = [];
      const hash = createHash('sha256');
      let length = 0;
      req.on('data', (chunk) => {
        length += chunk.length;
        if (length > limit) {
          req.destroy();
          reject(new Error('body too large'));
          return;
        }
        hash.update(chunk);
        chunks.push(chunk);
      });
      req.on('end', () => resolve({ bytes: new Uint8Array(Buffer.concat(chunks, length)), hash: hash.digest('hex') }));
      req.on('error', reject);
      req.on('aborted', () => reject(new Error('client aborted')));
    });
  }

  /** Applies a commit-API fault, if one is due: the status sent (0 when the socket was dropped), or null. */
  async function apiFault(req, res, on, repo) {
    const hits = apiFaults(on, repo);
    if (hits.some((f) => f.type === 'hang')) {
      await new Promise((resolve) => res.on('close', resolve));
      return 0;
    }
    const reset = hits.find((f) => f.type === 'reset');
    if (reset) {
      const want = reset.at ?? Math.floor(Number(req.headers['content-length'] ?? 0) / 2);
      await new Promise((resolve) => {
        let seen = 0;
        const drop = () => {
          req.socket?.destroy();
          resolve();
        };
        if (want <= 0) return drop();
        req.on('data', (chunk) => {
          seen += chunk.length;
          if (seen >= want) drop();
        });
        req.on('end', drop);
        req.on('error', resolve);
      });
      return 0;
    }
    const status = hits.find((f) => f.type === 'status');
    if (status) {
      await readBody(req).catch(() => {});
      const headers = retryAfterHeaders(status);
      return apiError(res, status.status ?? 503, 'ServiceUnavailable', 'Injected failure', headers);
    }
    return null;
  }

  function json(res, status, value) {
    const body = JSON.stringify(value);
    res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) });
    res.end(body);
    return status;
  }

  /** Write access to `repo` (which may not exist yet: its namespace decides): null when allowed, else the status sent. */
  function writeDenied(req, res, repo) {
    const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
    if (!m) return apiError(res, 401, 'Unauthorized', 'You must be authenticated to write to this repository');
    const token = m[1];
    if (owners.get(repo.split('/')[0]) === token || tokens.get(repo) === token) return null;
    const known = [...owners.values(), ...tokens.values()].includes(token);
    if (!known) return apiError(res, 401, 'Unauthorized', 'Invalid credentials in Authorization header');
    if (tokens.has(repo)) return apiError(res, 404, 'RepoNotFound', 'Repository not found');
    return apiError(res, 403, 'Forbidden', `You don't have the rights to write to ${repo}`);
  }

  const badPath = (path) =>
    typeof path !== 'string' ||
    path === '' ||
    path.startsWith('/') ||
    path.endsWith('/') ||
    path.split('/').some((part) => part === '' || part === '.' || part === '..') ||
    /[\0\\]/.test(path);
  const validName = (name) =>
    typeof name === 'string' &&
    /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/.test(name) &&
    !/\.\.|--/.test(name) &&
    !name.endsWith('.git');

  async function parseJson(req, res) {
    let body;
    try {
      body = JSON.parse(Buffer.from((await readBody(req, 64 * 2 ** 20)).bytes).toString('utf8'));
    } catch {
      apiError(res, 400, 'BadRequest', 'Malformed JSON body');
      return undefined;
    }
    return body;
  }

  /** POST /api/repos/create */
  async function createRepo(req, res, entry) {
    entry.kind = 'create';
    const body = await parseJson(req, res);
    if (body === undefined) return 400;
    const namespace =
      body.organization ??
      Object.entries(Object.fromEntries(owners)).find(([, t]) => req.headers.authorization === `Bearer ${t}`)?.[0];
    if (!validName(body.name) || !validName(namespace ?? ''))
      return apiError(res, 400, 'BadRequest', 'Invalid repo name');
    if (body.type !== undefined && body.type !== 'model')
      return apiError(res, 400, 'BadRequest', 'Only model repos here');
    const repo = `${namespace}/${body.name}`;
    entry.repo = repo;
    const refused = writeDenied(req, res, repo);
    if (refused) return refused;
    const fault = await apiFault(req, res, 'create', repo);
    if (fault !== null) return fault;
    if (repos.has(repo)) return apiError(res, 409, 'Conflict', 'You already created this model repo', {});
    addRepo(repo, {});
    if (body.private === true || body.visibility === 'private') tokens.set(repo, owners.get(namespace));
    return json(res, 200, { url: `${endpoint}/${repo}`, name: repo, id: repo });
  }

  /** POST /api/models/{owner}/{repo}/{branch|preupload|commit}/{revision} */
  async function repoApi(req, res, entry, repo, action, revision, url) {
    entry.kind = action;
    Object.assign(entry, { repo, revision });
    const r = repos.get(repo);
    if (!r) {
      await readBody(req).catch(() => {});
      return apiError(res, 404, 'RepoNotFound', 'Repository not found');
    }
    const refused = writeDenied(req, res, repo);
    if (refused) return refused;
    const fault = await apiFault(req, res, action, repo);
    if (fault !== null) return fault;

    if (action === 'branch') {
      const body = (await parseJson(req, res)) ?? null;
      if (body === null) return 400;
      if (
        typeof revision !== 'string' ||
        !/^[A-Za-z0-9][A-Za-z0-9._/-]*$/.test(revision) ||
        revision.startsWith('refs/') ||
        revision === 'main'
      ) {
        return apiError(res, 400, 'BadRequest', `Invalid branch name: ${revision}`);
      }
      if (r.branches.has(revision))
        return apiError(res, 409, 'Conflict', `Reference already exists: refs/heads/${revision}`);
      const from = refOf(r, body.startingPoint ?? 'main');
      if (!from) return apiError(res, 404, 'RevisionNotFound', `Invalid rev id: ${body.startingPoint}`);
      r.branches.set(revision, { files: new Map(from.files), commit: from.commit });
      return json(res, 200, {});
    }

    const ref = refOf(r, revision);
    if (!ref) {
      await readBody(req).catch(() => {});
      return apiError(res, 404, 'RevisionNotFound', `Invalid rev id: ${revision}`);
    }

    if (action === 'preupload') {
      const body = await parseJson(req, res);
      if (body === undefined) return 400;
      if (!Array.isArray(body?.files)) return apiError(res, 400, 'BadRequest', 'files must be an array');
      const files = [];
      for (const f of body.files) {
        if (badPath(f?.path) || !Number.isSafeInteger(f?.size) || f.size < 0)
          return apiError(res, 400, 'BadRequest', `Invalid file: ${JSON.stringify(f?.path)}`);
        files.push({
          path: f.path,
          uploadMode: f.size > lfsThreshold || isLfs(f.path) ? 'lfs' : 'regular',
          shouldIgnore: false,
        });
      }
      return json(res, 200, { files, commitOid: ref.commit });
    }

    // commit: parse and check every line, then apply them all
    let text;
    try {
      text = Buffer.from((await readBody(req, 2 ** 31)).bytes).toString('utf8');
    } catch {
      return apiError(res, 400, 'BadRequest', 'Unreadable body');
    }
    let lines;
    try {
      lines = text
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l));
    } catch {
      return apiError(res, 400, 'BadRequest', 'Malformed NDJSON');
    }
    const header = lines[0];
    if (header?.key !== 'header' || typeof header.value?.summary !== 'string' || header.value.summary.trim() === '') {
      return apiError(res, 400, 'BadRequest', 'The first line must be the header, with a summary');
    }
    if (header.value.parentCommit && header.value.parentCommit !== ref.commit) {
      return apiError(res, 412, 'PreconditionFailed', `A commit has happened since ${header.value.parentCommit}`);
    }
    const files = new Map(ref.files);
    const seen = new Set();
    const adopted = [];
    for (const line of lines.slice(1)) {
      const v = line?.value;
      if (badPath(v?.path)) return apiError(res, 400, 'BadRequest', `Invalid path: ${JSON.stringify(v?.path)}`);
      if (seen.has(v.path)) return apiError(res, 400, 'BadRequest', `${v.path} appears twice in the commit`);
      seen.add(v.path);
      if (line.key === 'file') {
        if (v.encoding !== 'base64' || typeof v.content !== 'string')
          return apiError(res, 400, 'BadRequest', `${v.path}: content must be base64`);
        const bytes = new Uint8Array(Buffer.from(v.content, 'base64'));
        files.set(v.path, { bytes, hash: sha256(bytes), lfs: false });
      } else if (line.key === 'lfsFile') {
        if (v.algo !== 'sha256' || !/^[0-9a-f]{64}$/.test(v.oid ?? '') || !Number.isSafeInteger(v.size)) {
          return apiError(res, 400, 'BadRequest', `${v.path}: invalid LFS pointer`);
        }
        const bytes = pending.get(v.oid) ?? blobs.get(v.oid)?.bytes;
        if (!bytes || bytes.length !== v.size) {
          return apiError(
            res,
            422,
            'LfsObjectNotFound',
            `Your push was rejected because an LFS pointer pointed to a file that does not exist (${v.path})`,
          );
        }
        files.set(v.path, { bytes, hash: v.oid, lfs: true });
        adopted.push([v.oid, bytes, v.path]);
      } else if (line.key === 'deletedFile') {
        if (!files.delete(v.path))
          return apiError(res, 404, 'EntryNotFound', `${v.path} does not exist on "${ref.name}"`);
      } else if (line.key === 'deletedFolder') {
        const prefix = `${v.path}/`;
        let any = false;
        for (const path of [...files.keys()]) if (path.startsWith(prefix)) any = files.delete(path) || any;
        if (!any) return apiError(res, 404, 'EntryNotFound', `${v.path} does not exist on "${ref.name}"`);
      } else return apiError(res, 400, 'BadRequest', `Unknown key: ${JSON.stringify(line?.key)}`);
    }
    let name = ref.name;
    let pullRequestUrl;
    if (url.searchParams.get('create_pr') === '1') {
      r.prs += 1;
      name = `refs/pr/${r.prs}`;
      pullRequestUrl = `${endpoint}/${repo}/discussions/${r.prs}`;
    }
    for (const [oid, bytes, path] of adopted) {
      pending.delete(oid);
      if (!blobs.has(oid)) blobs.set(oid, { bytes, repo, path });
    }
    const commit = setRef(repo, r, name, files);
    return json(res, 200, {
      commitOid: commit,
      commitUrl: `${endpoint}/${repo}/commit/${commit}`,
      pullRequestUrl,
      hookOutput: '',
    });
  }

  /** POST /{owner}/{repo}.git/info/lfs/objects/batch */
  async function lfsBatch(req, res, entry, repo) {
    entry.kind = 'batch';
    entry.repo = repo;
    if (!repos.has(repo)) {
      await readBody(req).catch(() => {});
      return apiError(res, 404, 'RepoNotFound', 'Repository not found');
    }
    const refused = writeDenied(req, res, repo);
    if (refused) return refused;
    const fault = await apiFault(req, res, 'batch', repo);
    if (fault !== null) return fault;
    const body = await parseJson(req, res);
    if (body === undefined) return 400;
    if (body?.operation !== 'upload' || !Array.isArray(body.objects))
      return apiError(res, 400, 'BadRequest', 'Only upload batches here');
    const base = `http://${req.headers.host}`;
    let anyMultipart = false;
    const objects = body.objects.map(({ oid, size }) => {
      if (!/^[0-9a-f]{64}$/.test(oid ?? '') || !Number.isSafeInteger(size) || size < 0) {
        return { oid, size, error: { code: 422, message: 'Invalid oid or size' } };
      }
      const stored = blobs.get(oid)?.bytes ?? pending.get(oid);
      if (stored && stored.length === size) return { oid, size, authenticated: true };
      expected.set(oid, size);
      if (size >= multipartThreshold) {
        anyMultipart = true;
        const id = `${oid}-${++uploadCount}`;
        multipart.set(id, { oid, size, parts: new Map() });
        const header = { chunk_size: String(partSize) };
        const n = Math.ceil(size / partSize);
        for (let i = 1; i <= n; i++) header[String(i).padStart(5, '0')] = `${base}/lfs/part/${id}/${i}`;
        return {
          oid,
          size,
          authenticated: true,
          actions: { upload: { href: `${base}/lfs/complete/${id}`, header, expires_in: 86400 } },
        };
      }
      return {
        oid,
        size,
        authenticated: true,
        actions: { upload: { href: `${base}/lfs/upload/${oid}`, expires_in: 86400 } },
      };
    });
    res.setHeader('X-Request-Id', `req-${requests.length}`);
    res.writeHead(200, { 'Content-Type': 'application/vnd.git-lfs+json' });
    res.end(JSON.stringify({ transfer: anyMultipart ? 'multipart' : 'basic', objects }));
    return 200;
  }

  /** PUT /lfs/upload/{oid}, PUT /lfs/part/{id}/{n}, POST /lfs/complete/{id}: the pre-signed storage URLs. */
  async function lfsStorage(req, res, entry, segments) {
    const [, what, id, n] = segments;
    entry.kind = what === 'upload' ? 'upload' : what;
    const job = what === 'upload' ? null : multipart.get(id);
    const oid = what === 'upload' ? id : job?.oid;
    entry.path = oid ?? null;
    if (what === 'upload' ? !expected.has(oid) : !job) {
      await readBody(req).catch(() => {});
      return apiError(res, 404, 'NoSuchUpload', 'No such upload');
    }
    const fault = await apiFault(req, res, entry.kind, null);
    if (fault !== null) return fault;
    if (what === 'upload') {
      if (req.method !== 'PUT') return apiError(res, 405, 'MethodNotAllowed', 'Method not allowed');
      const { bytes, hash } = await readBody(req);
      if (bytes.length !== expected.get(oid) || hash !== oid)
        return apiError(res, 400, 'BadDigest', `The uploaded bytes do not match ${oid}`);
      pending.set(oid, bytes);
      res.writeHead(200, { ETag: `"${oid}"`, 'Content-Length': '0' });
      res.end();
      return 200;
    }
    if (what === 'part') {
      if (req.method !== 'PUT') return apiError(res, 405, 'MethodNotAllowed', 'Method not allowed');
      const index = Number(n);
      const count = Math.ceil(job.size / partSize);
      const { bytes } = await readBody(req);
      const want = Math.min(partSize, job.size - (index - 1) * partSize);
      if (!Number.isInteger(index) || index < 1 || index > count || bytes.length !== want)
        return apiError(res, 400, 'InvalidPart', `Part ${n} has the wrong size`);
      const etag = `"${createHash('md5').update(bytes).digest('hex')}"`;
      job.parts.set(index, { bytes, etag });
      res.writeHead(200, { ETag: etag, 'Content-Length': '0' });
      res.end();
      return 200;
    }
    if (req.method !== 'POST') return apiError(res, 405, 'MethodNotAllowed', 'Method not allowed');
    const body = await parseJson(req, res);
    if (body === undefined) return 400;
    const count = Math.ceil(job.size / partSize);
    if (body?.oid !== job.oid || !Array.isArray(body.parts) || body.parts.length !== count)
      return apiError(res, 400, 'InvalidPart', 'Wrong part list');
    const pieces = [];
    for (let i = 1; i <= count; i++) {
      const part = job.parts.get(i);
      const named = body.parts.find((p) => p.partNumber === i);
      if (!part || !named || named.etag !== part.etag)
        return apiError(res, 400, 'InvalidPart', `Part ${i} is missing or its ETag differs`);
      pieces.push(part.bytes);
    }
    const bytes = new Uint8Array(Buffer.concat(pieces));
    if (sha256(bytes) !== job.oid) return apiError(res, 400, 'BadDigest', `The uploaded bytes do not match ${job.oid}`);
    multipart.delete(id);
    pending.set(job.oid, bytes);
    return json(res, 200, {});
  }

  /** Routes the commit API's requests (POST/PUT); null for anything else. */
  async function writeRoutes(req, res, entry) {
    const url = new URL(req.url, 'http://hub.invalid');
    const segments = url.pathname.split('/').slice(1);
    let dec;
    try {
      dec = segments.map(decodeURIComponent);
    } catch {
      return apiError(res, 400, 'BadRequest', 'Malformed URL');
    }
    if (segments[0] === 'lfs' && (segments.length === 3 || segments.length === 4))
      return lfsStorage(req, res, entry, dec);
    if (req.method !== 'POST') return null;
    if (dec[0] === 'api' && dec[1] === 'repos' && dec[2] === 'create' && dec.length === 3)
      return createRepo(req, res, entry);
    if (
      dec[0] === 'api' &&
      dec[1] === 'models' &&
      ['preupload', 'commit', 'branch'].includes(dec[4]) &&
      dec.length === 6
    ) {
      return repoApi(req, res, entry, `${dec[2]}/${dec[3]}`, dec[4], dec[5], url);
    }
    if (dec.length === 6 && dec[1].endsWith('.git') && dec.slice(2).join('/') === 'info/lfs/objects/batch') {
      return lfsBatch(req, res, entry, `${dec[0]}/${dec[1].slice(0, -4)}`);
    }
    return null;
  }

  async function handle(req, res, entry) {
    cors(res);
    if (req.method === 'OPTIONS') {
      entry.kind = 'preflight';
      res.writeHead(204, {
        'Access-Control-Allow-Methods': 'GET, HEAD, OPTIONS, POST, PUT',
        'Access-Control-Allow-Headers': req.headers['access-control-request-headers'] ?? 'Authorization, Range',
        'Access-Control-Max-Age': '600',
      });
      res.end();
      return 204;
    }
    if (req.method === 'POST' || req.method === 'PUT') {
      const status = await writeRoutes(req, res, entry);
      if (status !== null) return status;
      await readBody(req).catch(() => {});
      return apiError(res, 404, 'NotFound', 'Not found');
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

    // api/models/{owner}/{repo}: the repo's info (huggingface_hub's repo_info / model_info, @huggingface/hub's
    // repoExists), here {_id, id, modelId, author, sha, private, siblings}; 404 for a repo that does not exist, 401
    // for a private one without its token (the Hub does not tell it exists).
    if (segments[0] === 'api' && segments[1] === 'models' && segments.length === 4) {
      entry.kind = 'repoInfo';
      let repo;
      try {
        repo = `${decodeURIComponent(segments[2])}/${decodeURIComponent(segments[3])}`;
      } catch {
        return error(res, 400, 'BadRequest', 'Malformed URL');
      }
      entry.repo = repo;
      const r = repos.get(repo);
      if (!r) return error(res, 404, 'RepoNotFound', 'Repository not found');
      const refused = denied(req, res, repo);
      if (refused) return refused;
      const main = refOf(r, 'main');
      const body = JSON.stringify({
        _id: createHash('sha1').update(repo).digest('hex').slice(0, 24),
        id: repo,
        modelId: repo,
        author: repo.split('/')[0],
        sha: main?.commit,
        private: tokens.has(repo),
        siblings: main ? [...main.files.keys()].map((rfilename) => ({ rfilename })) : [],
      });
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) });
      res.end(req.method === 'HEAD' ? undefined : body);
      return 200;
    }

    // api/models/{owner}/{repo}/tree/{revision}[/{folder...}]: the folder's direct entries, as the Hub lists them
    // ([{type: 'file', path, size, oid}, {type: 'directory', path, oid}], paths from the repo's root).
    if (segments[0] === 'api' && segments[1] === 'models' && segments[4] === 'tree' && segments.length >= 6) {
      entry.kind = 'tree';
      let repo, revision, folder;
      try {
        repo = `${decodeURIComponent(segments[2])}/${decodeURIComponent(segments[3])}`;
        revision = decodeURIComponent(segments[5]);
        // refs/pr/N (or refs/convert/…) unencoded, as @huggingface/hub's listFiles sends it
        const refsLen = revision === 'refs' && segments.length >= 8 ? 3 : 1;
        if (refsLen === 3) revision = segments.slice(5, 8).map(decodeURIComponent).join('/');
        folder = segments
          .slice(5 + refsLen)
          .filter((x) => x !== '')
          .map(decodeURIComponent)
          .join('/');
      } catch {
        return error(res, 400, 'BadRequest', 'Malformed URL');
      }
      Object.assign(entry, { repo, path: folder, revision });
      const r = repos.get(repo);
      if (!r) return error(res, 404, 'RepoNotFound', 'Repository not found');
      const refused = denied(req, res, repo);
      if (refused) return refused;
      const ref = refOf(r, revision);
      if (!ref) return error(res, 404, 'RevisionNotFound', `Invalid rev id: ${revision}`);
      const recursive = url.searchParams.get('recursive') === 'true' || url.searchParams.get('recursive') === '1';
      const prefix = folder ? `${folder}/` : '';
      const entries = new Map();
      for (const [path, file] of ref.files) {
        if (!path.startsWith(prefix)) continue;
        const rest = path.slice(prefix.length);
        const parts = rest.split('/');
        // LFS files carry the Hub's lfs field: {oid: sha256, size, pointerSize}
        const fileEntry = {
          type: 'file',
          oid: file.hash,
          size: file.bytes.length,
          path,
          ...(file.lfs ? { lfs: { oid: file.hash, size: file.bytes.length, pointerSize: 134 } } : {}),
        };
        if (parts.length === 1) entries.set(path, fileEntry);
        else if (recursive) {
          for (let i = 1; i < parts.length; i++) {
            const d = prefix + parts.slice(0, i).join('/');
            entries.set(d, { type: 'directory', oid: ref.commit, path: d });
          }
          entries.set(path, fileEntry);
        } else entries.set(prefix + parts[0], { type: 'directory', oid: ref.commit, path: prefix + parts[0] });
      }
      if (folder && entries.size === 0)
        return error(res, 404, 'EntryNotFound', `${folder} does not exist on "${revision}"`);
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
      path = segments
        .slice(at + 2)
        .map(decodeURIComponent)
        .join('/');
    } catch {
      return error(res, 400, 'BadRequest', 'Malformed URL');
    }
    Object.assign(entry, { repo, path, revision });
    const r = repos.get(repo);
    if (!r) return error(res, 404, 'RepoNotFound', 'Repository not found');
    const refused = denied(req, res, repo);
    if (refused) return refused;
    const named = refOf(r, revision);
    if (!named) return error(res, 404, 'RevisionNotFound', `Invalid rev id: ${revision}`);
    // an LFS file's reads are counted at the CDN, where each ends
    if (!(named.files.get(path)?.lfs ?? isLfs(path))) applyChanges(repo, path);
    // the branch as it is now (a 'change' fault moves it on: a read pinned to the old commit sees the new bytes)
    const ref = refOf(r, named.name);
    const file = ref.files.get(path);
    if (!file) return error(res, 404, 'EntryNotFound', 'Entry not found', { 'X-Repo-Commit': ref.commit });
    const repoHeaders = { 'X-Repo-Commit': ref.commit };
    if (!file.lfs) return sendFile(req, res, file, faultsFor(repo, path), repoHeaders);
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

  let latency = options.latency ?? 0;
  let inFlight = 0;
  let maxInFlight = 0;
  const server = createServer(async (req, res) => {
    inFlight += 1;
    maxInFlight = Math.max(maxInFlight, inFlight);
    res.on('close', () => (inFlight -= 1));
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
    if (latency > 0) await sleep(latency);
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
    /** The commit a repo (or one of its branches) is at now. */
    commit: (repo, branch = 'main') => {
      const r = repos.get(repo);
      return (r && refOf(r, branch)?.commit) ?? null;
    },
    /** A branch's files now: Map(path → {bytes, hash, lfs}), or null. */
    files: (repo, branch = 'main') => {
      const r = repos.get(repo);
      return (r && refOf(r, branch)?.files) ?? null;
    },
    /** The branches other than main (refs/pr/N included). */
    branches: (repo) => [...(repos.get(repo)?.branches.keys() ?? [])],
    /** LFS objects uploaded that no commit names (invisible to readers). */
    pendingObjects: () => [...pending.keys()],
    /** The requests (optionally of one kind, for one file path) logged since the last clearLog(). */
    log: (kind, path) => requests.filter((r) => (!kind || r.kind === kind) && (!path || r.path === path)),
    clearLog: () => {
      requests.length = 0;
      maxInFlight = inFlight;
    },
    get latency() {
      return latency;
    },
    set latency(ms) {
      latency = ms;
    },
    get maxInFlight() {
      return maxInFlight;
    },
    /** The requests open now (their answers not ended, nor their connections closed). */
    get inFlight() {
      return inFlight;
    },
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections?.();
      }),
  };
}

// Standalone: node tests/hub/server.mjs [--port N] [--dir owner/repo=DIR]... [--token owner/repo=TOKEN]...
//   [--owner NAMESPACE=TOKEN]... [--multipart-threshold BYTES] [--latency MS]
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const files = {};
  const tokens = {};
  const owners = {};
  let port = 0;
  let multipartThreshold;
  let latency = 0;
  const args = process.argv.slice(2);
  for (let i = 0; i + 1 < args.length; i += 2) {
    const [flag, value] = [args[i], args[i + 1]];
    const eq = value.indexOf('=');
    if (flag === '--port') port = Number(value);
    else if (flag === '--dir' && eq > 0) files[value.slice(0, eq)] = value.slice(eq + 1);
    else if (flag === '--token' && eq > 0) tokens[value.slice(0, eq)] = value.slice(eq + 1);
    else if (flag === '--owner' && eq > 0) owners[value.slice(0, eq)] = value.slice(eq + 1);
    else if (flag === '--multipart-threshold') multipartThreshold = Number(value);
    else if (flag === '--latency') latency = Number(value);
    else
      throw new Error(
        `usage: node tests/hub/server.mjs [--port N] [--dir owner/repo=DIR]... [--token owner/repo=TOKEN]... [--owner NAMESPACE=TOKEN]... [--multipart-threshold BYTES] [--latency MS]`,
      );
  }
  const hub = await startHub({ files, tokens, owners, port, multipartThreshold, latency });
  console.log(hub.endpoint);
}
