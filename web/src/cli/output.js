// The npm CLI's output policy facts and its one atomic multi-file write (src/app/output_policy.h decides;
// src/cli/input_facts.cc and output_transaction.cc are the native counterparts).
import { randomBytes } from 'node:crypto';
import { unlinkSync } from 'node:fs';
import { lstat, mkdir, open, readdir, realpath, rename, rmdir, stat, unlink } from 'node:fs/promises';
import { isRemote } from '../hub.js';
import { IoFailure, coreError, ioFailure, isDirectory, isRegularFile, joinPath, module, out, write } from './io.js';

// ---- the output policy and the one atomic multi-file write (src/app/output_policy.h, src/cli/input_facts.cc,
// src/cli/output_transaction.cc) ----

export const stripTrailingSlashes = (path) => {
  let p = path;
  while (p.length > 1 && p.endsWith('/')) p = p.slice(0, -1);
  return p;
};
export const baseName = (path) => path.slice(path.lastIndexOf('/') + 1);
/** DirectoryOf: the directory part of a path as the commands take it ("." when there is none). */
export function directoryOf(path) {
  const p = stripTrailingSlashes(path);
  const slash = p.lastIndexOf('/');
  if (slash === -1) return '.';
  return slash === 0 ? '/' : p.slice(0, slash);
}

/** The canonical path of `path`, which may not exist: its deepest existing ancestor resolved, the rest appended. */
export async function canonical(given) {
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

export const idOf = (st) => `${st.dev}:${st.ino}`;
export const identity = async (path) => {
  const st = await stat(path, { bigint: true }).catch(() => null);
  return st ? idOf(st) : '';
};
export const kindOf = (st) => (st.isFile() ? 'file' : st.isDirectory() ? 'directory' : st.isSymbolicLink() ? 'symlink' : 'other');

/** A directory the user named (IN_DIR, --adapter DIR, --base DIR). */
export const directoryFact = async (label, path) => {
  const real = await canonical(path);
  return { label, path, real, entry: real, id: await identity(path), directory: true, within: null, withinPath: '' };
};

/** A file the command reads; `within`: the directory it was found in (null for a file named directly). */
export async function fileFact(label, path, within) {
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
export async function adapterFacts(label, given, weightsPath) {
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
export async function describeOutputDirectory(label, path, writes) {
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
export async function describeOutputFile(path) {
  const name = baseName(stripTrailingSlashes(path));
  const request = { label: 'OUT', path, real: await canonical(directoryOf(path)), exists: true, listing: [], writes: [name], singleFile: true };
  const st = await lstat(path, { bigint: true }).catch(() => null);
  if (st) request.listing.push({ name, kind: kindOf(st), id: idOf(st), targetId: st.isSymbolicLink() ? await identity(path) : '' });
  return request;
}

/** The core's decision: the plan {commit, replace, remove}, or its refusal thrown. `out` null checks links only. */
export function planOutput(command, inputs, out, { force = false, followLinks = false }) {
  const r = module.planOutput(JSON.stringify({ command, inputs, out, force, followLinks }));
  if (!r.ok) throw coreError(r);
  return JSON.parse(r.planJson);
}

/** No silent loss: the warning lines for stderr, or the core's refusal thrown. `dropped`: [{tensor, reason}]. */
export function checkDropped(command, dropped, allowPartial) {
  const r = module.checkDropped(JSON.stringify({ command, dropped, allowPartial }));
  if (!r.ok) throw coreError(r);
  return r.warnings;
}

export const SIGNAL_STATUS = { SIGHUP: 129, SIGINT: 130, SIGTERM: 143 };

/** Every file a transaction of this process committed, in order: {path (its name in the output: the repo path
 * --push-to gives it), file (where it was written)}. */
export const committedOutputs = [];
export const randomSuffix = () => randomBytes(6).toString('base64url').slice(0, 6);

/** Writes `bytes` at `offset` of a transaction's file `file` ({temp, handle}; a shard worker's handle is a
 * descriptor-handle.js one), leaving its end where it is. */
export async function writeFileAt(file, offset, bytes) {
  try {
    for (let done = 0; done < bytes.length; ) done += (await file.handle.write(bytes, done, bytes.length - done, offset + done)).bytesWritten;
  } catch (error) {
    throw ioFailure('cannot write', file.temp, error);
  }
}

/**
 * All-or-nothing output of several files into one directory, as the native OutputTransaction: every file under
 * a temporary name (PATH.tmp-XXXXXX, mode 0666 minus the umask); commit() checks every final name, moves aside
 * what the new files replace and the stale files --force removes, renames, and deletes what was moved aside only
 * once all renames succeeded, undoing the steps before a failure. close() (always, in a finally) removes the
 * temporary files of an uncommitted transaction and the directory if it created it; SIGHUP/SIGINT/SIGTERM remove
 * them too and exit 128 + the signal.
 */
export class OutputTransaction {
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
    const file = { temp: `${final}.tmp-${randomSuffix()}`, final, name: this.singleFile ? baseName(final) : name, handle: null, renamed: false };
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

  /** Writes `bytes` at `offset` of a file being written (a region reserved before), leaving its end where it is. */
  writeAt(file, offset, bytes) {
    return writeFileAt(file, offset, bytes);
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
    for (const f of this.files) committedOutputs.push({ path: f.name, file: f.final });
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
