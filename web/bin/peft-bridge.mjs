#!/usr/bin/env node
// peft-bridge CLI for Node: the native CLI (src/cli) over the WebAssembly build. Same commands, options, exit
// statuses and output bytes: help, version, reports and errors are all rendered by the core.
//   0 success, 1 invalid input or I/O failure, 2 usage error; 129 / 130 / 143 when a writing command is interrupted
//   by SIGHUP / SIGINT / SIGTERM (its temporary output files are removed first).
import { randomBytes } from 'node:crypto';
import { readFileSync, unlinkSync } from 'node:fs';
import { lstat, mkdir, open, readdir, realpath, rename, rmdir, stat, unlink } from 'node:fs/promises';
import { callAdapter } from '../src/adapter.js';
import { createConversion } from '../src/convert.js';
import { errorFromHandle, renderedError } from '../src/errors.js';
import { DEFAULT_ENDPOINT, isRemote, readRemoteWhole, withRemoteHeader } from '../src/hub.js';
import { inspectRendered } from '../src/inspect.js';
import { ADAPTER_CAP, LIMIT_OPTIONS } from '../src/range-client.js';
import { getModule } from '../src/init.js';
import { MergeSession } from '../src/merge.js';
import { strerror } from '../src/node-files.js';
import { openSource } from '../src/sources.js';

const module = await getModule();

// A failed write to standard output (a full disk, a closed pipe) must not crash the process through an unhandled
// 'error' event: the first failure is kept and reported once main() returns, with exit status 1.
let stdoutError = null;
process.stdout.on('error', (error) => {
  stdoutError ??= error;
});
const write = (stream, text) =>
  new Promise((resolve) =>
    stream.write(text, (error) => {
      if (error && stream === process.stdout) stdoutError ??= error;
      resolve();
    }),
  );
const out = (text) => write(process.stdout, text);
const err = (text) => write(process.stderr, text);

// The command line as the shared grammar parsed it (src/app/command_line.cc): {command, help, version,
// positional, options: {name: [values]}} or {usageError: text}.
const parseCommandLine = (args) => JSON.parse(module.parseCommandLine(JSON.stringify(args)));
const option = (line, name) => line.options[name]?.at(-1) ?? null;
const flag = (line, name) => Object.hasOwn(line.options, name);

class IoFailure extends Error {
  constructor(message) {
    super(message);
    this.code = 'IoError';
  }
}
const ioFailure = (what, path, error) => new IoFailure(`${what} \`${path}\`: ${strerror(error)}`);

async function fail(error, json) {
  let text = renderedError(error, json);
  if (text === null) {
    const e = {
      code: typeof error?.code === 'string' ? error.code : 'IoError',
      message: String(error?.message ?? error),
      tensor: error?.tensor ?? null,
      offset: error?.offset ?? null,
    };
    text = module.renderError(JSON.stringify(e), json);
  }
  await (json ? out(text) : err(text));
  return 1;
}

/** A read-only file read with positional reads (the file is never modified). */
async function openInput(path) {
  // Checked before opening: opening a FIFO for reading blocks until a writer appears.
  let pathStat;
  try {
    pathStat = await stat(path);
  } catch (error) {
    throw ioFailure('cannot open', path, error);
  }
  if (!pathStat.isFile()) throw new IoFailure(`\`${path}\` is not a regular file`);
  let handle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    throw ioFailure('cannot open', path, error);
  }
  try {
    let st;
    try {
      st = await handle.stat();
    } catch (error) {
      throw ioFailure('cannot stat', path, error);
    }
    if (!st.isFile()) throw new IoFailure(`\`${path}\` is not a regular file`);
    const source = {
      size: st.size,
      async read(offset, length) {
        const buffer = new Uint8Array(length);
        let done = 0;
        while (done < length) {
          let n;
          try {
            ({ bytesRead: n } = await handle.read(buffer, done, length - done, offset + done));
          } catch (error) {
            throw ioFailure('cannot read', path, error);
          }
          if (n === 0) throw new IoFailure(`\`${path}\` shrank while being read`);
          done += n;
        }
        return buffer;
      },
    };
    return { handle, source, stat: st };
  } catch (error) {
    await handle.close();
    throw error;
  }
}

// What the native CLI reads too (src/cli/http_source.cc): the token is HF_TOKEN, else the file huggingface_hub
// writes ($HF_TOKEN_PATH, else $HF_HOME/token, else $XDG_CACHE_HOME/huggingface/token, else
// ~/.cache/huggingface/token); the endpoint HF_ENDPOINT; the HTTP limits the PB_HTTP_* variables. The policy sends
// the token to the endpoint's origin only, on every redirect hop.
function remoteOptions() {
  const env = process.env;
  let token = (env.HF_TOKEN ?? '').trim();
  if (!token) {
    const cache = env.XDG_CACHE_HOME || (env.HOME ? `${env.HOME}/.cache` : '');
    const home = env.HF_HOME || (cache ? `${cache}/huggingface` : '');
    const path = env.HF_TOKEN_PATH || (home ? `${home}/token` : '');
    try {
      token = path ? readFileSync(path, 'utf8').trim() : '';
    } catch {
      token = '';
    }
  }
  const http = {};
  for (const name of Object.values(LIMIT_OPTIONS)) if (env[name]) http[name] = env[name];
  return { token: token || undefined, endpoint: env.HF_ENDPOINT || DEFAULT_ENDPOINT, http };
}

async function runInspect(line) {
  const json = flag(line, 'json');
  const { positional } = line;
  const arg = positional[0];
  let input;
  try {
    const render = json ? 'json' : 'text';
    // A repo, a folder or an index: every shard's header (the shared rules say which files).
    if (isRemote(arg) && remoteAddress(arg, remoteOptions()).model) {
      await out(await inspectRemoteModel(arg, remoteOptions(), json));
      return 0;
    }
    const report = isRemote(arg)
      ? await inspectRendered(arg, { render, ...remoteOptions() })
      : await inspectRendered((input = await openInput(arg)).source, { render });
    await out(json ? report.json : report.text);
    return 0;
  } catch (error) {
    return fail(isRemote(arg) ? error : await explainInput(error, arg, 'tensor'), json);
  } finally {
    await input?.handle.close();
  }
}

async function runConvert(line) {
  const json = flag(line, 'json');
  const dtype = option(line, 'dtype');
  const order = option(line, 'order') ?? 'reference';
  const { positional } = line;
  const [inPath, outPath] = positional;

  let input;
  let output = null;
  let progress = null;
  try {
    input = await openInput(inPath);
    // OUT may replace a file, never IN (whatever the path: a hard link, a path through a link to IN's directory).
    const plan = planOutput('convert', [await fileFact('IN', inPath, null)], await describeOutputFile(outPath), {});
    let planText = '';
    progress = stderrProgress(line, input.source.size);
    const onProgress = ({ bytesRead }) => progress.update(bytesRead); // the bytes of IN read, header included
    const { readable, summary } = createConversion(input.source, { dtype, order, onPlan: (text) => (planText = text), onProgress });
    const reader = readable.getReader();
    try {
      // The first chunk is the output header: the input header is valid and the plan made before OUT is touched.
      let next = await reader.read();
      // The text is the plan, told before the work starts; the JSON, one document, once the output is in place.
      if (!json && !flag(line, 'quiet')) await out(planText);
      output = OutputTransaction.forFile(outPath, plan);
      const file = await output.add(baseName(outPath));
      progress.startFile(baseName(inPath), 0);
      while (!next.done) {
        await output.write(file, next.value);
        next = await reader.read();
      }
    } catch (error) {
      await reader.cancel(error).catch(() => {});
      throw error;
    }
    const report = await summary;
    await output.commit();
    progress.finish();
    if (json) await out(report.json);
    return 0;
  } catch (error) {
    progress?.abandon();
    return fail(await explainInput(error, inPath, 'tensor'), json);
  } finally {
    progress?.close();
    await output?.close();
    await input?.handle.close();
  }
}

// ---- adapter-info and translate (src/cli/adapter_commands.cc) ----

/** An error the CLI itself raises with a core code, rendered by the core like its own. */
class CliFailure extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

/** An error result of the core's adapter functions, keeping the core's renderings. */
const coreError = (r) => errorFromHandle({ errorJson: () => r.errorJson, errorText: () => r.errorText });

// The native Join: no normalisation, so messages name paths exactly as given.
const joinPath = (dir, name) => (dir === '' || dir.endsWith('/') ? dir + name : `${dir}/${name}`);
const isDirectory = async (path) => (await stat(path).catch(() => null))?.isDirectory() ?? false;
const isRegularFile = async (path) => (await stat(path).catch(() => null))?.isFile() ?? false;

/** The error's {code, message, tensor, offset}, as `fail` renders it. */
function errorFields(error) {
  const rendered = renderedError(error, true);
  if (rendered !== null) return JSON.parse(rendered).error;
  return {
    code: typeof error?.code === 'string' ? error.code : 'IoError',
    message: String(error?.message ?? error),
    tensor: error?.tensor ?? null,
    offset: error?.offset ?? null,
  };
}

/** ExplainInputError (src/app/input_hint.h), as the native ExplainInput: `error`, met reading the input the user
 * named `path`, told as what happened (a directory, a config file passed for the weights); else `error` itself.
 * `role`: 'tensor' (inspect, convert), 'adapter', 'base'. */
async function explainInput(error, path, role) {
  const r = module.explainInputError(JSON.stringify(errorFields(error)), path, await isDirectory(path), role);
  return r.changed ? coreError(r) : error;
}

async function readWholeFile(path) {
  const input = await openInput(path);
  try {
    return input.source.size ? await input.source.read(0, input.source.size) : new Uint8Array(0);
  } finally {
    await input.handle.close();
  }
}

/** --naming-table FILE..., read and checked before any input, as natively (src/cli/naming_table_files.cc). */
async function namingTables(line) {
  const paths = line.options['naming-table'] ?? [];
  if (paths.length === 0) return null;
  const tables = [];
  for (const path of paths) tables.push({ path, text: decodeText(await readWholeFile(path)) });
  const errorJson = module.namingTablesError(JSON.stringify({ namingTables: tables }));
  if (errorJson) throw coreError({ errorJson, errorText: module.renderError(JSON.stringify(JSON.parse(errorJson).error), false) });
  return tables;
}

/** Regular files in `dir` named *`suffix`, in byte order (as std::sort on the native names); none if unreadable. */
async function listFiles(dir, suffix) {
  const names = [];
  for (const name of await readdir(dir).catch(() => [])) {
    if (name.length > suffix.length && name.endsWith(suffix) && (await isRegularFile(joinPath(dir, name)))) names.push(name);
  }
  return names.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
}

/** The adapter's files, picked and read by LoadAdapterDir's rules. Configs stay raw bytes: the core gets them as
 * the native CLI reads them. */
async function loadAdapterDir(path, baseConfigPath) {
  if (isRemote(path)) return loadRemoteAdapter(path, baseConfigPath);
  let weightsPath = null;
  let folder = path;
  if (await isDirectory(path)) {
    // Which file is which is the core's rule (src/app/adapter_files.h), shared with the native CLI and the JS API.
    const chosen = module.chooseAdapterFiles(path, JSON.stringify(await listFiles(path, '')));
    if (!chosen.ok) throw coreError(chosen);
    weightsPath = joinPath(path, chosen.weights);
  } else {
    const checked = module.checkAdapterWeightsPath(path);
    if (!checked.ok) throw coreError(checked);
    weightsPath = path;
    const slash = path.lastIndexOf('/');
    folder = slash === -1 ? '.' : path.slice(0, slash);
  }
  // The weights stay a file handle read by range (the core asks for its header, then for tensors as it needs
  // them), as the native CLI's pread: an adapter of any size, never read whole. close() releases it.
  const input = await openInput(weightsPath);
  try {
    const configPath = joinPath(folder, 'adapter_config.json');
    const config = (await isRegularFile(configPath)) ? await readWholeFile(configPath) : null;
    const baseConfig = baseConfigPath !== null ? await readWholeFile(baseConfigPath) : null;
    const close = () => input.handle.close().catch(() => {});
    return { weights: input.source, weightsName: weightsPath.slice(weightsPath.lastIndexOf('/') + 1), weightsPath, config, baseConfig, close };
  } catch (error) {
    await input.handle.close().catch(() => {});
    throw error;
  }
}

/** The options adapter-info and translate share. */
const commonOptions = (line) => ({
  json: flag(line, 'json'),
  strict: flag(line, 'strict'),
  arch: option(line, 'arch'),
  baseConfig: option(line, 'base-config'),
  from: option(line, 'from'),
  positional: line.positional,
});

async function runAdapterInfo(line) {
  const o = commonOptions(line);
  try {
    o.namingTables = await namingTables(line);
    const files = await loadAdapterDir(o.positional[0], o.baseConfig);
    let r;
    try {
      r = await callAdapter('adapterInfo', files, o);
    } finally {
      await files.close();
    }
    await out(o.json ? r.json : r.text);
    return 0;
  } catch (error) {
    return fail(await explainInput(error, o.positional[0], 'adapter'), o.json);
  }
}

// ---- the output policy and the one atomic multi-file write (src/app/output_policy.h, src/cli/input_facts.cc,
// src/cli/output_transaction.cc) ----

const stripTrailingSlashes = (path) => {
  let p = path;
  while (p.length > 1 && p.endsWith('/')) p = p.slice(0, -1);
  return p;
};
const baseName = (path) => path.slice(path.lastIndexOf('/') + 1);
/** DirectoryOf: the directory part of a path as the commands take it ("." when there is none). */
function directoryOf(path) {
  const p = stripTrailingSlashes(path);
  const slash = p.lastIndexOf('/');
  if (slash === -1) return '.';
  return slash === 0 ? '/' : p.slice(0, slash);
}

/** The canonical path of `path`, which may not exist: its deepest existing ancestor resolved, the rest appended. */
async function canonical(given) {
  const p = stripTrailingSlashes(given);
  try {
    return await realpath(p);
  } catch {
    // does not exist (yet)
  }
  if (p === '/' || p === '' || p === '.' || p === '..') return p;
  const parent = await canonical(directoryOf(p));
  return parent === '/' ? `/${baseName(p)}` : `${parent}/${baseName(p)}`;
}

const idOf = (st) => `${st.dev}:${st.ino}`;
const identity = async (path) => {
  const st = await stat(path, { bigint: true }).catch(() => null);
  return st ? idOf(st) : '';
};
const kindOf = (st) => (st.isFile() ? 'file' : st.isDirectory() ? 'directory' : st.isSymbolicLink() ? 'symlink' : 'other');

/** A directory the user named (IN_DIR, --adapter DIR, --base DIR). */
const directoryFact = async (label, path) => {
  const real = await canonical(path);
  return { label, path, real, entry: real, id: await identity(path), directory: true, within: null, withinPath: '' };
};

/** A file the command reads; `within`: the directory it was found in (null for a file named directly). */
async function fileFact(label, path, within) {
  const parent = await canonical(directoryOf(path));
  return {
    label,
    path,
    real: await canonical(path),
    entry: `${parent === '/' ? '' : parent}/${baseName(stripTrailingSlashes(path))}`,
    id: await identity(path),
    directory: false,
    within: within === null ? null : await canonical(within),
    withinPath: within ?? '',
  };
}

/** An adapter given as DIR (or as its weights file): the directory, the weights, adapter_config.json beside. */
async function adapterFacts(label, given, weightsPath) {
  if (isRemote(given)) return []; // nothing local to alias or to leave by a link
  const facts = [];
  let folder;
  if (await isDirectory(given)) {
    facts.push(await directoryFact(label, given));
    folder = given;
    facts.push(await fileFact(label, weightsPath, folder));
  } else {
    facts.push(await fileFact(label, weightsPath, null));
    folder = directoryOf(weightsPath);
  }
  const config = joinPath(folder, 'adapter_config.json');
  if (await isRegularFile(config)) facts.push(await fileFact(label, config, folder));
  return facts;
}

/** The output directory `path` (which may not exist yet), its entries, and the names the command writes. */
async function describeOutputDirectory(label, path, writes) {
  const request = { label, path, real: await canonical(path), exists: await isDirectory(path), listing: [], writes, singleFile: false };
  if (!request.exists) return request;
  for (const name of await readdir(path).catch(() => [])) {
    const st = await lstat(joinPath(path, name), { bigint: true }).catch(() => null);
    // else vanished meanwhile
    if (st) request.listing.push({ name, kind: kindOf(st), id: idOf(st), targetId: st.isSymbolicLink() ? await identity(joinPath(path, name)) : '' });
  }
  return request;
}

/** convert's OUT: one file in a directory the command shares with others. */
async function describeOutputFile(path) {
  const name = baseName(stripTrailingSlashes(path));
  const request = { label: 'OUT', path, real: await canonical(directoryOf(path)), exists: true, listing: [], writes: [name], singleFile: true };
  const st = await lstat(path, { bigint: true }).catch(() => null);
  if (st) request.listing.push({ name, kind: kindOf(st), id: idOf(st), targetId: st.isSymbolicLink() ? await identity(path) : '' });
  return request;
}

/** The core's decision: the plan {commit, replace, remove}, or its refusal thrown. `out` null checks links only. */
function planOutput(command, inputs, out, { force = false, followLinks = false }) {
  const r = module.planOutput(JSON.stringify({ command, inputs, out, force, followLinks }));
  if (!r.ok) throw coreError(r);
  return JSON.parse(r.planJson);
}

/** No silent loss: the warning lines for stderr, or the core's refusal thrown. `dropped`: [{tensor, reason}]. */
function checkDropped(command, dropped, allowPartial) {
  const r = module.checkDropped(JSON.stringify({ command, dropped, allowPartial }));
  if (!r.ok) throw coreError(r);
  return r.warnings;
}

const SIGNAL_STATUS = { SIGHUP: 129, SIGINT: 130, SIGTERM: 143 };
const randomSuffix = () => randomBytes(6).toString('base64url').slice(0, 6);

/**
 * All-or-nothing output of several files into one directory, as the native OutputTransaction: every file under
 * a temporary name (PATH.tmp-XXXXXX, mode 0666 minus the umask); commit() checks every final name, moves aside
 * what the new files replace and the stale files --force removes, renames, and deletes what was moved aside only
 * once all renames succeeded, undoing the steps before a failure. close() (always, in a finally) removes the
 * temporary files of an uncommitted transaction and the directory if it created it; SIGHUP/SIGINT/SIGTERM remove
 * them too and exit 128 + the signal.
 */
class OutputTransaction {
  static async begin(dir, plan) {
    let created = false;
    if (!(await isDirectory(dir))) {
      try {
        await mkdir(dir);
      } catch (error) {
        throw ioFailure('cannot create directory', dir, error);
      }
      created = true;
    }
    return new OutputTransaction(dir, plan, created, false);
  }

  static forFile(path, plan) {
    return new OutputTransaction(path, plan, false, true);
  }

  constructor(dir, plan, created, singleFile) {
    this.dir = dir;
    this.plan = plan;
    this.created = created;
    this.singleFile = singleFile;
    this.files = [];
    this.opening = new Set(); // temporary files' open() calls still running
    this.committed = false;
    this.onSignal = (signal) => {
      const exit = () => {
        for (const f of this.files) {
          try {
            if (!f.renamed) unlinkSync(f.temp);
          } catch {
            // not created, or already gone
          }
        }
        process.exit(SIGNAL_STATUS[signal]);
      };
      if (this.opening.size) Promise.allSettled([...this.opening]).then(exit);
      else exit();
    };
    for (const s of Object.keys(SIGNAL_STATUS)) process.on(s, this.onSignal);
  }

  pathOf(name) {
    return this.singleFile ? this.dir : joinPath(this.dir, name);
  }

  /** A new temporary file for `name` (one of the plan's commit names). */
  async add(name) {
    const final = this.pathOf(name);
    const file = { temp: `${final}.tmp-${randomSuffix()}`, final, handle: null, renamed: false };
    this.files.push(file);
    const opening = open(file.temp, 'wx', 0o666);
    this.opening.add(opening);
    try {
      file.handle = await opening;
    } catch (error) {
      this.files.pop();
      throw ioFailure('cannot create a temporary file for', final, error);
    } finally {
      this.opening.delete(opening);
    }
    return file;
  }

  async write(file, bytes) {
    try {
      for (let done = 0; done < bytes.length; ) done += (await file.handle.write(bytes, done, bytes.length - done)).bytesWritten;
    } catch (error) {
      throw ioFailure('cannot write', file.temp, error);
    }
  }

  /** Syncs and closes a file written completely (AtomicOutputFile::Prepare). */
  async prepare(file) {
    if (!file.handle) return;
    try {
      await file.handle.sync();
    } catch (error) {
      throw ioFailure('cannot sync', file.temp, error);
    }
    const handle = file.handle;
    file.handle = null;
    try {
      await handle.close();
    } catch (error) {
      throw ioFailure('cannot close', file.temp, error);
    }
  }

  async moveAside(path, asides) {
    if (!(await lstat(path).catch(() => null))) return; // nothing there (any more)
    const temp = `${path}.old-${randomSuffix()}`;
    try {
      await (await open(temp, 'wx', 0o600)).close(); // reserves the name; the rename replaces it
    } catch (error) {
      throw ioFailure('cannot move aside', path, error);
    }
    try {
      await rename(path, temp);
    } catch (error) {
      await unlink(temp).catch(() => {});
      throw ioFailure('cannot move aside', path, error);
    }
    asides.push({ original: path, temp });
  }

  static async restore(asides) {
    for (const a of asides.reverse()) await rename(a.temp, a.original).catch(() => {});
  }

  async commit() {
    for (const f of this.files) await this.prepare(f);
    // Every final name is checked before anything is renamed: a directory in the way fails the whole commit.
    for (const f of this.files) {
      const st = await lstat(f.final).catch(() => null);
      if (st && !st.isFile() && !st.isSymbolicLink())
        throw new IoFailure(`cannot replace \`${f.final}\`: ${st.isDirectory() ? 'it is a directory' : 'it is not a regular file'}`);
    }
    const asides = [];
    try {
      for (const f of this.files) await this.moveAside(f.final, asides);
      for (const name of this.plan.remove) await this.moveAside(this.pathOf(name), asides);
    } catch (error) {
      await OutputTransaction.restore(asides);
      throw error;
    }
    for (let i = 0; i < this.files.length; ++i) {
      const f = this.files[i];
      try {
        await rename(f.temp, f.final);
      } catch (error) {
        for (const g of this.files.slice(0, i)) await unlink(g.final).catch(() => {}); // undo: the new files go,
        await OutputTransaction.restore(asides); // what they replaced comes back
        throw ioFailure('cannot rename into', f.final, error);
      }
      f.renamed = true;
    }
    for (const a of asides) await unlink(a.temp).catch(() => {});
    this.committed = true;
  }

  async close() {
    for (const f of this.files) await f.handle?.close().catch(() => {});
    if (!this.committed) {
      for (const f of this.files) if (!f.renamed) await unlink(f.temp).catch(() => {});
      if (this.created) await rmdir(this.dir).catch(() => {}); // only if still empty, as natively
    }
    for (const s of Object.keys(SIGNAL_STATUS)) process.off(s, this.onSignal);
  }
}

async function runTranslate(line) {
  const o = {
    ...commonOptions(line),
    to: option(line, 'to'),
    dryRun: flag(line, 'dry-run'),
    oldPeft: flag(line, 'old-peft'),
    force: flag(line, 'force'),
    allowPartial: flag(line, 'allow-partial'),
    followLinks: flag(line, 'follow-links'),
  };

  let output = null;
  let files = null;
  let result = null;
  let progress = null;
  try {
    o.namingTables = await namingTables(line);
    files = await loadAdapterDir(o.positional[0], o.baseConfig);
    // The plan now, the weights' bytes once the output is accepted (where the native CLI makes them).
    result = await callAdapter('translateAdapter', files, { ...o, deferWrite: true });
    // The policy: no link out of IN_DIR, no silent loss, no output over an input or into a non-empty directory.
    const inputs = await adapterFacts('IN_DIR', o.positional[0], files.weightsPath);
    if (o.baseConfig !== null) inputs.push(await fileFact('--base-config', o.baseConfig, null));
    planOutput('translate', inputs, null, o);
    const summary = JSON.parse(result.json);
    const dropped = summary.tensors.filter((t) => t.to === null).map((t) => ({ tensor: t.from, reason: t.reason }));
    const warnings = checkDropped('translate', dropped, o.allowPartial);
    if (warnings) await err(warnings);
    if (!o.dryRun) {
      const outDir = o.positional[1];
      const names = [result.weightsName, ...(result.config ? [result.config.name] : [])];
      output = await OutputTransaction.begin(outDir, planOutput('translate', inputs, await describeOutputDirectory('OUT_DIR', outDir, names), o));
      const weights = await output.add(result.weightsName);
      // Progress counts the adapter's tensor bytes read for the output, of its weights file's size.
      progress = stderrProgress(line, files.weights.size);
      progress.startFile(files.weightsName, 0);
      let pending = [];
      const flush = async () => {
        for (const bytes of pending) await output.write(weights, bytes);
        pending = [];
      };
      await result.writeWeights(
        (bytes) => pending.push(bytes),
        async (done) => {
          await flush();
          progress.update(done);
        },
      );
      await flush();
      progress.finish();
      if (result.config) await output.write(await output.add(result.config.name), result.config.bytes);
      await output.commit();
    }
    if (o.json || !flag(line, 'quiet')) await out(o.json ? result.json : result.text);
    return 0;
  } catch (error) {
    progress?.abandon();
    return fail(await explainInput(error, o.positional[0], 'adapter'), o.json);
  } finally {
    progress?.close();
    await output?.close();
    await result?.close?.();
    await files?.close();
  }
}

// ---- merge and unmerge (src/cli/merge_command.cc) ----

/** The progress line on stderr (src/app/progress_text.h, as src/cli/stderr_progress.cc): whether it shows, when
 * it redraws and what it says are the core's; this reads the clock, the environment and the terminal, and writes.
 * Updates before the first file starts are not drawn. close() frees the core's meter. */
function stderrProgress(line, total) {
  const environment = {
    json: flag(line, 'json'),
    quiet: flag(line, 'quiet'),
    noProgress: flag(line, 'no-progress'),
    stderrIsTerminal: process.stderr.isTTY === true,
    progressVariable: process.env.PB_PROGRESS ?? null,
    clockVariable: process.env.PB_PROGRESS_CLOCK_MS ?? null,
  };
  let meter = new module.ProgressMeter(total, JSON.stringify(environment));
  const t0 = performance.now();
  const seconds = () => (performance.now() - t0) / 1000;
  let started = false;
  const draw = (text) => text && process.stderr.write(text);
  return {
    startFile(name, done) {
      started = true;
      draw(meter?.startFile(name, done, seconds()));
    },
    update(done) {
      if (started) draw(meter?.update(done, seconds()));
    },
    finish: () => draw(meter?.finish(seconds())),
    abandon: () => draw(meter?.abandon()),
    close() {
      meter?.delete();
      meter = null;
    },
  };
}

/** OpenBase: the shard names (from the index, or the one file), config.json, and every shard's header. */
async function openMergeBase(session, path, configPath, inputs) {
  remoteChecked(module.checkLocalBase(path)); // a remote base: not streamed yet
  const base = { dir: path, names: [], inputs, config: null, index: false };
  if (await isDirectory(path)) {
    const indexPath = joinPath(path, 'model.safetensors.index.json');
    if (await isRegularFile(indexPath)) {
      base.names = session.setIndex(await readWholeFile(indexPath));
      base.index = true;
    } else if (await isRegularFile(joinPath(path, 'model.safetensors'))) {
      base.names = ['model.safetensors'];
    } else {
      throw new CliFailure('IoError', `\`${path}\` has neither model.safetensors nor model.safetensors.index.json`);
    }
  } else {
    const slash = path.lastIndexOf('/');
    base.dir = slash === -1 ? '.' : path.slice(0, slash);
    base.names = [slash === -1 ? path : path.slice(slash + 1)];
  }
  if (await isRegularFile(joinPath(base.dir, 'config.json'))) base.config = await readWholeFile(joinPath(base.dir, 'config.json'));
  if (configPath !== null) base.config = await readWholeFile(configPath);
  for (const name of base.names) {
    const input = await openInput(joinPath(base.dir, name));
    base.inputs.push(input);
    try {
      await session.addShard(name, await openSource(input.source));
    } catch (error) {
      // The core names the shard in its own errors; reading errors get the same prefix, as natively.
      if (renderedError(error, false) !== null) throw error;
      throw new CliFailure(error?.code ?? 'IoError', `${name}: ${error?.message ?? error}`);
    }
  }
  session.baseComplete();
  return base;
}

async function runMerge(line) {
  const command = line.command;
  const o = {
    base: option(line, 'base'),
    adapter: option(line, 'adapter'),
    out: option(line, 'out'),
    baseConfig: option(line, 'base-config'),
    arch: option(line, 'arch'),
    dtype: option(line, 'dtype'),
    safe: flag(line, 'safe'),
    unmerge: command === 'unmerge',
    json: flag(line, 'json'),
    dryRun: flag(line, 'dry-run'),
    force: flag(line, 'force'),
    allowPartial: flag(line, 'allow-partial'),
    followLinks: flag(line, 'follow-links'),
    copyExtra: !flag(line, 'no-copy-extra'),
  };
  const quiet = flag(line, 'quiet');
  const t0 = performance.now();

  try {
    o.namingTables = await namingTables(line);
  } catch (error) {
    return fail(error, o.json);
  }
  const session = await MergeSession.create('Merger', o);
  const inputs = []; // the shards, open for reading
  let output = null;
  let progress = null;
  let adapterFiles = null; // the adapter's weights, open for reading by range
  try {
    // Errors opening either input are told as the native ExplainInput tells them.
    const base = await openMergeBase(session, o.base, o.baseConfig, inputs).catch(async (e) => {
      throw await explainInput(e, o.base, 'base');
    });
    try {
      adapterFiles = await loadAdapterDir(o.adapter, null);
      await session.loadAdapter({ ...adapterFiles, baseConfig: base.config });
    } catch (error) {
      throw await explainInput(error, o.adapter, 'adapter');
    }
    const plan = session.plan();
    // The policy: no link out of an input directory, no silent loss, no output over an input or into a
    // non-empty directory.
    const facts = [...(await baseFacts(o.base, base, o.baseConfig)), ...(await adapterFacts('--adapter', o.adapter, adapterFiles.weightsPath))];
    const texts = [];
    if (base.index) texts.push(['model.safetensors.index.json', session.outputIndex()]);
    const config = session.configJson();
    if (config !== null) texts.push(['config.json', config]);
    const names = [...plan.shards.map((s) => s.name), ...texts.map(([name]) => name)]; // what the merge writes itself
    // The base's other files (tokenizer, generation config...) are inputs too, and outputs.
    const baseIsDirectory = await isDirectory(o.base);
    const listing = baseIsDirectory && o.copyExtra ? await listBaseDirectory(base.dir) : [];
    const extra = planExtraFiles({ basePath: o.base, baseIsDirectory, listing, written: names, writesConfig: config !== null, copyExtra: o.copyExtra });
    for (const name of extra.copy) facts.push(await fileFact('--base', joinPath(base.dir, name), base.dir));
    session.setCopiedFiles(extra.copy);
    planOutput(command, facts, null, o);
    const dropped = JSON.parse(session.summary(0, true, true)).unmatchedKeys;
    const warnings = checkDropped(command, dropped, o.allowPartial);
    if (warnings) await err(warnings);
    if (extra.warnings) await err(extra.warnings);
    if (!o.dryRun) {
      output = await OutputTransaction.begin(o.out, planOutput(command, facts, await describeOutputDirectory('--out', o.out, [...names, ...extra.copy]), o));
      // The plan is told before the work starts; the outcome line follows it.
      if (!o.json && !quiet) await out(session.planText(false));
      // Every output is written under a temporary name; any failure before commit() succeeds removes them all.
      progress = stderrProgress(line, plan.sourceBytes);
      for (const name of extra.copy) await copyInto(output, await output.add(name), joinPath(base.dir, name));
      const counts = { bytesIn: 0 };
      for (let s = 0; s < plan.shards.length; ++s) {
        const file = await output.add(plan.shards[s].name);
        progress.startFile(plan.shards[s].name, counts.bytesIn);
        for await (const bytes of session.mergeShard(s, plan.shards[s], await openSource(base.inputs[s].source), undefined, counts)) {
          await output.write(file, bytes);
          progress.update(counts.bytesIn);
        }
        await output.prepare(file);
      }
      for (const [name, text] of texts) await output.write(await output.add(name), new TextEncoder().encode(text));
      await output.commit();
      progress.finish();
    }
    const seconds = (performance.now() - t0) / 1000;
    // A dry run's plan is all it prints; a merge's plan was printed before the work.
    if (o.json || (o.dryRun && !quiet)) await out(session.summary(seconds, o.dryRun, o.json));
    else if (!quiet) await out(session.outcomeText(seconds));
    return 0;
  } catch (error) {
    progress?.abandon();
    return fail(error, o.json);
  } finally {
    progress?.close();
    await output?.close();
    for (const input of inputs) await input.handle.close();
    await adapterFiles?.close();
    session.close();
  }
}

/** The base directory's entries, kinds as links lead (a dangling link: 'other'), for the core's PlanExtraFiles. */
async function listBaseDirectory(dir) {
  const entries = [];
  for (const name of await readdir(dir).catch(() => [])) {
    const st = await stat(joinPath(dir, name)).catch(() => null);
    entries.push({ name, kind: st?.isFile() ? 'file' : st?.isDirectory() ? 'directory' : 'other' });
  }
  return entries;
}

/** The core's choice of the base's other files to copy: {copy: [names], warnings: text}. */
function planExtraFiles(request) {
  const r = module.planExtraFiles(JSON.stringify(request));
  if (!r.ok) throw coreError(r);
  return JSON.parse(r.planJson);
}

/** One of the base's other files, copied into the transaction's temporary file `file`, a chunk at a time. */
async function copyInto(output, file, path) {
  const input = await openInput(path);
  try {
    const chunk = 4 << 20;
    for (let pos = 0; pos < input.source.size; pos += chunk)
      await output.write(file, await input.source.read(pos, Math.min(chunk, input.source.size - pos)));
  } finally {
    await input.handle.close();
  }
}

/** BaseFacts: the base's directory (when one was named), every shard, the index and config.json found beside
 * them, and --base-config. */
async function baseFacts(path, base, configPath) {
  const facts = [];
  const namedDir = await isDirectory(path);
  if (namedDir) facts.push(await directoryFact('--base', path));
  for (const name of base.names)
    facts.push(namedDir ? await fileFact('--base', joinPath(base.dir, name), base.dir) : await fileFact('--base', path, null));
  for (const name of ['model.safetensors.index.json', 'config.json'])
    if ((namedDir || name === 'config.json') && (await isRegularFile(joinPath(base.dir, name))))
      facts.push(await fileFact('--base', joinPath(base.dir, name), base.dir));
  if (configPath !== null) facts.push(await fileFact('--base-config', configPath, null));
  return facts;
}

// ---- remote arguments: the shared rules say what to fetch (src/app/remote_address.h, base_layout.h); as
// src/cli/remote_adapter.cc and remote_model.cc, this fetches the same files in the same order ----

const remoteChecked = (r) => {
  if (!r.ok) throw coreError(r);
  return r;
};
const remoteAddress = (arg, ro) => remoteChecked(module.parseRemoteAddress(arg, ro.endpoint));
/** {url, label} of `name` in the folder `arg` names, or beside the file it names; at `commit` when known. */
const remoteEntry = (arg, ro, name, commit = null) => {
  const r = remoteChecked(module.remoteEntry(arg, ro.endpoint, name, commit ?? ''));
  return { url: r.url, label: r.label };
};
const decodeText = (bytes) => new TextDecoder().decode(bytes);

/** The names of the files in the folder a Hub address names (the Hub's tree API). */
async function remoteListing(address, ro) {
  const { bytes } = await readRemoteWhole({ url: address.url, label: address.label }, ro);
  return JSON.parse(remoteChecked(module.parseHubListing(decodeText(bytes), address.label)).names);
}

/** LoadRemoteAdapter: the configs and the weights fetched whole, the weights held to PB_HTTP_MAX_ADAPTER_BYTES. */
async function loadRemoteAdapter(arg, baseConfigPath) {
  const ro = remoteOptions();
  const address = remoteAddress(arg, ro);
  let chosenName = null;
  let config = null;
  let optional = false;
  if (address.folder) {
    const chosen = remoteChecked(module.chooseAdapterFiles(address.label, JSON.stringify(await remoteListing(address, ro))));
    chosenName = chosen.weights;
    if (chosen.config !== null) config = remoteEntry(arg, ro, chosen.config);
  } else {
    remoteChecked(module.checkAdapterWeightsPath(address.fileName));
    config = remoteEntry(arg, ro, module.adapterConfigName());
    optional = true;
  }
  let configBytes = null;
  let commit = null;
  if (config) {
    try {
      ({ bytes: configBytes, commit } = await readRemoteWhole(config, ro));
    } catch (error) {
      if (!optional || error?.status !== 404) throw error;
    }
  }
  const weights = address.folder ? remoteEntry(arg, ro, chosenName, commit) : { url: address.url, label: address.label };
  const { bytes } = await readRemoteWhole(weights, ro, ADAPTER_CAP);
  const baseConfig = baseConfigPath !== null ? await readWholeFile(baseConfigPath) : null;
  const source = { size: bytes.length, read: async (offset, length) => bytes.subarray(offset, offset + length) };
  const weightsName = address.folder ? chosenName : address.fileName;
  return { weights: source, weightsName, weightsPath: weights.label, config: configBytes, baseConfig, close: async () => {} };
}

/** InspectRemoteModel: the folder's index or single file, or the index named; every shard's header in order. */
async function inspectRemoteModel(arg, ro, json) {
  const address = remoteAddress(arg, ro);
  let index = null;
  let names = [];
  if (address.folder) {
    const first = remoteChecked(module.chooseBaseFile(address.label, JSON.stringify(await remoteListing(address, ro))));
    if (first.index) index = remoteEntry(arg, ro, first.name);
    else names = [first.name];
  } else {
    index = { url: address.url, label: address.label };
  }
  let indexText = null;
  let commit = null;
  if (index) {
    const whole = await readRemoteWhole(index, ro);
    indexText = decodeText(whole.bytes);
    names = JSON.parse(remoteChecked(module.modelIndexShards(indexText)).shards);
    commit = whole.commit; // every shard from the index's commit, even if the branch moves meanwhile
  }
  const reports = [];
  const held = {};
  for (const name of names) {
    let r;
    try {
      r = await withRemoteHeader(remoteEntry(arg, ro, name, commit), ro, (f) => inspectRendered(f.headerSource(), { render: 'text+json' }));
    } catch (error) {
      const e = errorFields(error); // named as a local merge names the shard
      throw Object.assign(new CliFailure(e.code, `${name}: ${e.message}`), { tensor: e.tensor, offset: e.offset });
    }
    reports.push({ name, report: json ? r.json : r.text });
    held[name] = r.header.tensors.map((t) => t.name);
  }
  if (index) remoteChecked(module.checkIndexShards(indexText, JSON.stringify(held)));
  return module.renderInspectFiles(JSON.stringify(reports), json);
}

async function main(args) {
  const line = parseCommandLine(args);
  if (line.usageError) {
    await err(line.usageError);
    return 2;
  }
  if (line.help) {
    await out(module.cliHelp(line.command));
    return 0;
  }
  if (line.version) {
    await out(`peft-bridge ${module.version()}\n`);
    return 0;
  }
  const run = { inspect: runInspect, convert: runConvert, 'adapter-info': runAdapterInfo, translate: runTranslate };
  return (run[line.command] ?? runMerge)(line); // merge or unmerge: the grammar knows no other command
}

let status = await main(process.argv.slice(2));
// A reader that closed the pipe (`| head`) wanted no more: that ends quietly, as natively.
if (stdoutError && stdoutError.code !== 'EPIPE') {
  const e = { code: 'IoError', message: `cannot write to standard output: ${strerror(stdoutError)}`, tensor: null, offset: null };
  await err(module.renderError(JSON.stringify(e), false));
  status = 1;
}
process.exitCode = status;
