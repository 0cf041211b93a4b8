// The npm CLI's output policy facts and its one atomic multi-file write (src/app/output_policy.h decides;
// src/cli/input_facts.cc and output_transaction.cc are the native counterparts).
import { randomBytes } from 'node:crypto';
import { rmdirSync, unlinkSync } from 'node:fs';
import { lstat, mkdir, open, readdir, readFile, realpath, rename, rmdir, stat, unlink } from 'node:fs/promises';
import { isRemote } from '../remote/hub.js';
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
export const kindOf = (st) =>
  st.isFile() ? 'file' : st.isDirectory() ? 'directory' : st.isSymbolicLink() ? 'symlink' : 'other';

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

/** Every path the command line names as an input (the core's NamedInputs: --naming-table, --base-config, ...
 * whatever the flag), as directory or file facts. */
export async function namedInputFacts(line) {
  const r = module.namedInputs(
    JSON.stringify({ command: line.command, positional: line.positional, options: line.options }),
  );
  if (!r.ok) throw coreError(r);
  const facts = [];
  for (const { label, path } of JSON.parse(r.inputsJson))
    facts.push((await isDirectory(path)) ? await directoryFact(label, path) : await fileFact(label, path, null));
  return facts;
}

const JOURNAL = '.peft-bridge-commit'; // app::kCommitJournalName
const exists = async (path) => (await lstat(path).catch(() => null)) !== null;

async function syncDirectory(dir) {
  try {
    const handle = await open(dir, 'r');
    await handle.sync().catch(() => {}); // best effort, as natively
    await handle.close();
  } catch {
    // not openable: the renames are durable on most file systems without it
  }
}

/**
 * RecoverOutputDirectory: completes the commit an earlier run was killed in, if `dir` holds its journal (the
 * core's CommitJournal): its new files renamed into place, what it moved aside and the stale files it removes
 * deleted, then the journal. Throws for a journal that is not ours, or a step that failed (the journal stays).
 */
export async function recoverOutputDirectory(dir) {
  const journalPath = joinPath(dir, JOURNAL);
  if (!(await exists(journalPath))) return;
  // Its size before reading it: a file too large to be ours is refused unread.
  const info = await stat(journalPath).catch(() => null);
  const size = info ? module.checkCommitJournalSize(info.size, journalPath) : { ok: true };
  if (!size.ok) throw coreError(size);
  let text;
  try {
    text = await readFile(journalPath, 'latin1');
  } catch (error) {
    throw ioFailure('cannot open', journalPath, error);
  }
  const r = module.parseCommitJournal(Buffer.from(text, 'latin1').toString('utf8'), journalPath);
  if (!r.ok) throw coreError(r);
  const journal = JSON.parse(r.journalJson);
  await OutputTransaction.critical(async () => {
    for (const { temp, final } of journal.renames) {
      if (!(await exists(joinPath(dir, temp)))) continue;
      try {
        await rename(joinPath(dir, temp), joinPath(dir, final));
      } catch (error) {
        throw ioFailure('cannot complete the interrupted commit: cannot rename into', joinPath(dir, final), error);
      }
    }
    for (const name of journal.remove) await unlink(joinPath(dir, name)).catch(() => {});
    await syncDirectory(dir);
    try {
      await unlink(journalPath);
    } catch (error) {
      if (error?.code !== 'ENOENT') throw ioFailure('cannot remove', journalPath, error);
    }
    for (const name of journal.asides) await unlink(joinPath(dir, name)).catch(() => {});
    await syncDirectory(dir);
  });
}

/** The output directory `path` (which may not exist yet), its entries, and the names the command writes. A commit
 * an earlier run was killed in is completed first (recoverOutputDirectory). */
export async function describeOutputDirectory(label, path, writes) {
  const request = {
    label,
    path,
    real: await canonical(path),
    exists: await isDirectory(path),
    listing: [],
    writes,
    singleFile: false,
  };
  if (!request.exists) return request;
  await recoverOutputDirectory(path);
  for (const name of await readdir(path).catch(() => [])) {
    const st = await lstat(joinPath(path, name), { bigint: true }).catch(() => null);
    // else vanished meanwhile
    if (st)
      request.listing.push({
        name,
        kind: kindOf(st),
        id: idOf(st),
        targetId: st.isSymbolicLink() ? await identity(joinPath(path, name)) : '',
      });
  }
  return request;
}

/** convert's OUT: one file in a directory the command shares with others. */
export async function describeOutputFile(path) {
  const name = baseName(stripTrailingSlashes(path));
  const request = {
    label: 'OUT',
    path,
    real: await canonical(directoryOf(path)),
    exists: true,
    listing: [],
    writes: [name],
    singleFile: true,
  };
  const st = await lstat(path, { bigint: true }).catch(() => null);
  if (st)
    request.listing.push({
      name,
      kind: kindOf(st),
      id: idOf(st),
      targetId: st.isSymbolicLink() ? await identity(path) : '',
    });
  return request;
}

/** The core's decision: the plan {commit, replace, remove}, or its refusal thrown. `out` null checks links only. */
export function planOutput(command, inputs, out, { force = false, followLinks = false }) {
  const r = module.planOutput(JSON.stringify({ command, inputs, out, force, followLinks }));
  if (!r.ok) throw coreError(r);
  return JSON.parse(r.planJson);
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
    for (let done = 0; done < bytes.length;)
      done += (await file.handle.write(bytes, done, bytes.length - done, offset + done)).bytesWritten;
  } catch (error) {
    throw ioFailure('cannot write', file.temp, error);
  }
}

/**
 * All-or-nothing output of several files into one directory, as the native OutputTransaction: every file under
 * a temporary name (PATH.tmp-XXXXXX, mode 0666 minus the umask); commit() checks every final name, then, in a
 * critical section that SIGHUP/SIGINT/SIGTERM wait for, writes the commit journal (the core's CommitJournal), moves
 * aside what the new files replace and the stale files --force removes, renames, removes the journal and deletes
 * what was moved aside, undoing the steps before a failure. A run killed outright leaves the journal, which the
 * next run completes (recoverOutputDirectory). close() (always, in a finally) removes the temporary files of an
 * uncommitted transaction and the directory if it created it; a signal outside the critical section removes them
 * too and exits 128 + the signal, one during it once the commit is done or undone. begin() removes the stale
 * temporaries a killed run left (the plan's `stale`). A single file is renamed over its destination in one step.
 */
export class OutputTransaction {
  static criticalDepth = 0; // > 0 while the files on disk must not be left half-changed
  static pendingSignal = null; // a signal that came meanwhile, acted on when the critical section ends
  static exitActions = new Set(); // what each live transaction removes when a signal ends the process

  /** Runs `body` with signals held off: one that comes meanwhile ends the process once `body` has finished. */
  static async critical(body) {
    OutputTransaction.criticalDepth += 1;
    try {
      return await body();
    } finally {
      OutputTransaction.criticalDepth -= 1;
      if (OutputTransaction.criticalDepth === 0 && OutputTransaction.pendingSignal)
        OutputTransaction.exitOnSignal(OutputTransaction.pendingSignal);
    }
  }

  static exitOnSignal(signal) {
    for (const action of OutputTransaction.exitActions) action();
    process.exit(SIGNAL_STATUS[signal]);
  }

  static async begin(dir, plan) {
    // The signal handlers first: a signal once the directory exists finds it to remove.
    const transaction = new OutputTransaction(dir, plan, false, false);
    if (!(await isDirectory(dir))) {
      transaction.created = true; // before it exists: a signal as mkdir ends removes it (only ever if empty)
      try {
        await mkdir(dir);
      } catch (error) {
        transaction.created = false;
        await transaction.close();
        throw ioFailure('cannot create directory', dir, error);
      }
    }
    for (const name of plan.stale ?? []) await unlink(joinPath(dir, name)).catch(() => {}); // what a killed run left
    return transaction;
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
    // On a signal: the temporary files not renamed into place go, and the directory this run created, if empty.
    this.exitAction = () => {
      for (const f of this.files) {
        try {
          if (!f.renamed) unlinkSync(f.temp);
        } catch {
          // not created, or already gone
        }
      }
      if (this.created && !this.committed) {
        try {
          rmdirSync(this.dir);
        } catch {
          // not empty (files of others), or gone
        }
      }
    };
    OutputTransaction.exitActions.add(this.exitAction);
    this.onSignal = (signal) => {
      if (OutputTransaction.criticalDepth > 0) {
        OutputTransaction.pendingSignal ??= signal;
        return;
      }
      const exit = () => {
        if (OutputTransaction.criticalDepth > 0) OutputTransaction.pendingSignal ??= signal;
        else OutputTransaction.exitOnSignal(signal);
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
    const file = {
      temp: `${final}.tmp-${randomSuffix()}`,
      final,
      name: this.singleFile ? baseName(final) : name,
      handle: null,
      renamed: false,
    };
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
      for (let done = 0; done < bytes.length;)
        done += (await file.handle.write(bytes, done, bytes.length - done)).bytesWritten;
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

  /** Closes a file being written without syncing it (AtomicOutputFile::Park): reopened by resume() for more
   * writes, so that a command writing many files holds a descriptor only for those it is writing. */
  async park(file) {
    if (!file.handle) return;
    const handle = file.handle;
    file.handle = null;
    try {
      await handle.close();
    } catch (error) {
      throw ioFailure('cannot close', file.temp, error);
    }
  }

  async resume(file) {
    if (file.handle) return;
    try {
      file.handle = await open(file.temp, 'r+');
    } catch (error) {
      throw ioFailure('cannot reopen', file.temp, error);
    }
  }

  async commit() {
    for (const f of this.files) await this.prepare(f);
    // Every final name is checked before anything is renamed: a directory in the way fails the whole commit.
    for (const f of this.files) {
      const st = await lstat(f.final).catch(() => null);
      if (st && !st.isFile() && !st.isSymbolicLink())
        throw new IoFailure(
          `cannot replace \`${f.final}\`: ${st.isDirectory() ? 'it is a directory' : 'it is not a regular file'}`,
        );
    }
    await OutputTransaction.critical(async () => {
      if (this.singleFile) {
        // One rename replaces the destination at once: nothing to move aside.
        const f = this.files[0];
        try {
          await rename(f.temp, f.final);
        } catch (error) {
          throw ioFailure('cannot rename into', f.final, error);
        }
        f.renamed = true;
      } else {
        await this.commitDirectory();
      }
      this.committed = true;
    });
    for (const f of this.files) committedOutputs.push({ path: f.name, file: f.final });
  }

  /** The journal first, then the moves aside, the renames, the journal's removal, the deletions; undone on failure. */
  async commitDirectory() {
    const asides = []; // {original, temp, moved}
    const dropReserved = async () => {
      for (const a of asides) if (!a.moved) await unlink(a.temp).catch(() => {});
    };
    // The names the files moved aside get, reserved now so that the journal can list them.
    for (const path of [...this.files.map((f) => f.final), ...this.plan.remove.map((name) => this.pathOf(name))]) {
      if (!(await exists(path))) continue; // nothing there (any more)
      const temp = `${path}.old-${randomSuffix()}`;
      try {
        await (await open(temp, 'wx', 0o600)).close();
      } catch (error) {
        await dropReserved();
        throw ioFailure('cannot move aside', path, error);
      }
      asides.push({ original: path, temp, moved: false });
    }
    const journal = {
      renames: this.files.map((f) => ({ temp: baseName(f.temp), final: f.name })),
      remove: this.plan.remove,
      asides: asides.map((a) => baseName(a.temp)),
    };
    const rendered = module.renderCommitJournal(JSON.stringify(journal));
    if (!rendered.ok) throw coreError(rendered);
    const journalPath = joinPath(this.dir, JOURNAL);
    const journalTemp = `${journalPath}.tmp-${randomSuffix()}`;
    try {
      const handle = await open(journalTemp, 'wx', 0o666);
      try {
        await handle.writeFile(rendered.text);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(journalTemp, journalPath);
    } catch (error) {
      await unlink(journalTemp).catch(() => {});
      await dropReserved();
      throw ioFailure('cannot write', journalPath, error);
    }
    await syncDirectory(this.dir);
    let renamed = 0;
    const undo = async () => {
      for (const f of this.files.slice(0, renamed)) await rename(f.final, f.temp).catch(() => {});
      for (const a of [...asides].reverse()) if (a.moved) await rename(a.temp, a.original).catch(() => {});
      await dropReserved();
      await unlink(journalPath).catch(() => {});
      await syncDirectory(this.dir);
    };
    for (const a of asides) {
      try {
        await rename(a.original, a.temp);
      } catch (error) {
        await undo();
        throw ioFailure('cannot move aside', a.original, error);
      }
      a.moved = true;
    }
    for (; renamed < this.files.length; ++renamed) {
      const f = this.files[renamed];
      try {
        await rename(f.temp, f.final);
      } catch (error) {
        await undo();
        throw ioFailure('cannot rename into', f.final, error);
      }
    }
    for (const f of this.files) f.renamed = true;
    await syncDirectory(this.dir);
    await unlink(journalPath).catch(() => {}); // the commit point: the new files are all in place
    for (const a of asides) await unlink(a.temp).catch(() => {});
  }

  async close() {
    for (const f of this.files) await f.handle?.close().catch(() => {});
    if (!this.committed) {
      for (const f of this.files) if (!f.renamed) await unlink(f.temp).catch(() => {});
      if (this.created) await rmdir(this.dir).catch(() => {}); // only if still empty, as natively
    }
    for (const s of Object.keys(SIGNAL_STATUS)) process.off(s, this.onSignal);
    OutputTransaction.exitActions.delete(this.exitAction);
  }
}
