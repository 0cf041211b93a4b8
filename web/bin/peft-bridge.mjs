#!/usr/bin/env node
// peft-bridge CLI for Node: the native CLI (src/cli) over the WebAssembly build. Same commands, options, exit
// statuses and output bytes: help, version, reports and errors are all rendered by the core.
//   0 success, 1 invalid input or I/O failure, 2 usage error; 130 / 143 when convert is interrupted by SIGINT /
//   SIGTERM (the temporary output file is removed first).
import { randomBytes } from 'node:crypto';
import { unlinkSync } from 'node:fs';
import { mkdir, open, readdir, rename, rmdir, stat, unlink } from 'node:fs/promises';
import { callAdapter, writeErrorFile } from '../src/adapter.js';
import { createConversion } from '../src/convert.js';
import { errorFromHandle, renderedError } from '../src/errors.js';
import { hubUrl, isRemote } from '../src/hub.js';
import { inspectRendered } from '../src/inspect.js';
import { getModule } from '../src/init.js';
import { MergeSession } from '../src/merge.js';
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

async function usageError(command, message) {
  await err(`error: ${message}\n\n${module.cliHelp(command)}`);
  return 2;
}

// glibc's strerror texts, so I/O errors read as the native CLI prints them.
const STRERROR = {
  ENOENT: 'No such file or directory',
  EACCES: 'Permission denied',
  EPERM: 'Operation not permitted',
  EISDIR: 'Is a directory',
  ENOTDIR: 'Not a directory',
  EEXIST: 'File exists',
  ENOSPC: 'No space left on device',
  EROFS: 'Read-only file system',
  EMFILE: 'Too many open files',
  ENFILE: 'Too many open files in system',
  EIO: 'Input/output error',
  ELOOP: 'Too many levels of symbolic links',
  ENAMETOOLONG: 'File name too long',
  EBUSY: 'Device or resource busy',
  EXDEV: 'Invalid cross-device link',
  EDQUOT: 'Disk quota exceeded',
  EFBIG: 'File too large',
  EINVAL: 'Invalid argument',
  ETXTBSY: 'Text file busy',
  EAGAIN: 'Resource temporarily unavailable',
  EPIPE: 'Broken pipe',
  ECONNRESET: 'Connection reset by peer',
};

function strerror(error) {
  if (error?.code && STRERROR[error.code]) return STRERROR[error.code];
  const m = /^[A-Z0-9]+: ([^,]+)/.exec(String(error?.message ?? error));
  const text = m ? m[1] : String(error?.message ?? error);
  return text.charAt(0).toUpperCase() + text.slice(1);
}

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

// HF_TOKEN goes to the Hub only: hf:// addresses and URLs on HF_ENDPOINT's origin, never to another server.
function hubToken(arg) {
  const token = process.env.HF_TOKEN || undefined;
  if (!token || /^hf:\/\//i.test(arg)) return token;
  try {
    return new URL(arg).origin === new URL(hubUrl({ repo: 'o/r', path: 'f' })).origin ? token : undefined;
  } catch {
    return undefined;
  }
}

async function runInspect(args) {
  let json = false;
  const positional = [];
  for (const a of args) {
    if (a === '--help' || a === '-h') {
      await out(module.cliHelp('inspect'));
      return 0;
    }
    if (a === '--json') json = true;
    else if (a.length > 1 && a[0] === '-') return usageError('inspect', `unknown option \`${a}\``);
    else positional.push(a);
  }
  if (positional.length !== 1) return usageError('inspect', 'expected exactly one FILE');
  let input;
  try {
    const arg = positional[0];
    const render = json ? 'json' : 'text';
    const report = isRemote(arg)
      ? await inspectRendered(arg, { render, token: hubToken(arg) })
      : await inspectRendered((input = await openInput(arg)).source, { render });
    await out(json ? report.json : report.text);
    return 0;
  } catch (error) {
    return fail(error, json);
  } finally {
    await input?.handle.close();
  }
}

const DTYPES = new Set(['bf16', 'f16', 'f32']);

async function runConvert(args) {
  let json = false;
  let dtype = null;
  let order = 'reference';
  const positional = [];
  for (let i = 0; i < args.length; ++i) {
    const a = args[i];
    if (a === '--help' || a === '-h') {
      await out(module.cliHelp('convert'));
      return 0;
    }
    if (a === '--json') {
      json = true;
    } else if (a === '--dtype' || a === '--order') {
      if (i + 1 >= args.length) return usageError('convert', `${a} needs a value`);
      const v = args[++i];
      if (a === '--dtype') {
        if (!DTYPES.has(v)) return usageError('convert', `unknown dtype \`${v}\` (expected bf16, f16 or f32)`);
        dtype = v;
      } else if (v === 'reference' || v === 'input') {
        order = v;
      } else {
        return usageError('convert', `unknown order \`${v}\` (expected reference or input)`);
      }
    } else if (a.length > 1 && a[0] === '-') {
      return usageError('convert', `unknown option \`${a}\``);
    } else {
      positional.push(a);
    }
  }
  if (positional.length !== 2) return usageError('convert', 'expected IN and OUT');
  if (dtype === null) return usageError('convert', '--dtype is required');
  const [inPath, outPath] = positional;

  let input;
  let temp = null;
  let tempPath = null;
  let creating = null; // the temporary file's open(), while it runs
  let committed = false;
  // SIGINT / SIGTERM: remove the temporary file (once its creation has settled) and exit 128 + the signal.
  const onSignal = (signal) => {
    const code = signal === 'SIGINT' ? 130 : 143;
    const removeAndExit = () => {
      if (tempPath && !committed) {
        try {
          unlinkSync(tempPath);
        } catch {
          // not created, or already gone
        }
      }
      process.exit(code);
    };
    if (creating) creating.then(removeAndExit, removeAndExit);
    else removeAndExit();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    input = await openInput(inPath);
    const outStat = await stat(outPath).catch(() => null);
    if (outStat && outStat.dev === input.stat.dev && outStat.ino === input.stat.ino)
      return await usageError('convert', 'OUT must not be the same file as IN');

    const { readable, summary } = createConversion(input.source, { dtype, order });
    const reader = readable.getReader();
    try {
      // The first chunk is the output header: the input header is valid and the plan made before OUT is touched.
      let next = await reader.read();
      tempPath = `${outPath}.tmp-${randomBytes(6).toString('base64url').slice(0, 6)}`;
      try {
        creating = open(tempPath, 'wx', 0o666);
        temp = await creating;
      } catch (error) {
        tempPath = null;
        throw ioFailure('cannot create a temporary file for', outPath, error);
      } finally {
        creating = null;
      }
      while (!next.done) {
        const bytes = next.value;
        try {
          for (let done = 0; done < bytes.length; ) done += (await temp.write(bytes, done, bytes.length - done)).bytesWritten;
        } catch (error) {
          throw ioFailure('cannot write', tempPath, error);
        }
        next = await reader.read();
      }
    } catch (error) {
      await reader.cancel(error).catch(() => {});
      throw error;
    }
    const report = await summary;
    try {
      await temp.sync();
    } catch (error) {
      throw ioFailure('cannot sync', tempPath, error);
    }
    const t = temp;
    temp = null;
    try {
      await t.close();
    } catch (error) {
      throw ioFailure('cannot close', tempPath, error);
    }
    try {
      await rename(tempPath, outPath);
    } catch (error) {
      throw ioFailure('cannot rename into', outPath, error);
    }
    committed = true;
    await out(json ? report.json : report.text);
    return 0;
  } catch (error) {
    return fail(error, json);
  } finally {
    await temp?.close().catch(() => {});
    if (tempPath && !committed) await unlink(tempPath).catch(() => {});
    await input?.handle.close();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
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

async function readWholeFile(path) {
  const input = await openInput(path);
  try {
    return input.source.size ? await input.source.read(0, input.source.size) : new Uint8Array(0);
  } finally {
    await input.handle.close();
  }
}

/** Regular files in `dir` named *`suffix`, in byte order (as std::sort on the native names); none if unreadable. */
async function listFiles(dir, suffix) {
  const names = [];
  for (const name of await readdir(dir).catch(() => [])) {
    if (name.length > suffix.length && name.endsWith(suffix) && (await isRegularFile(joinPath(dir, name)))) names.push(name);
  }
  return names.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
}

const ADAPTER_FILES = ['adapter_model.safetensors', 'adapters.safetensors', 'pytorch_lora_weights.safetensors'];

/** The adapter's files, picked and read by LoadAdapterDir's rules. Configs stay raw bytes: the core gets them as
 * the native CLI reads them. */
async function loadAdapterDir(path, baseConfigPath) {
  let weightsPath = null;
  let folder = path;
  if (await isDirectory(path)) {
    for (const name of ADAPTER_FILES) {
      if (await isRegularFile(joinPath(path, name))) {
        weightsPath = joinPath(path, name);
        break;
      }
    }
    if (weightsPath === null) {
      const files = await listFiles(path, '.safetensors');
      if (files.length === 1) weightsPath = joinPath(path, files[0]);
      else if (files.length > 1)
        throw new CliFailure('InvalidArgument', `\`${path}\` holds several .safetensors files and none has an adapter's usual name; pass the file itself`);
    }
    if (weightsPath === null) {
      if (await isRegularFile(joinPath(path, 'adapter_model.bin'))) throw coreError(module.pickleAdapterError('adapter_model.bin'));
      throw new CliFailure('IoError', `\`${path}\` holds no adapter_model.safetensors (or other .safetensors file)`);
    }
  } else {
    if (path.endsWith('.bin') || path.endsWith('.pt') || path.endsWith('.pth')) throw coreError(module.pickleAdapterError(path));
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
    return { weights: input.source, weightsName: weightsPath.slice(weightsPath.lastIndexOf('/') + 1), config, baseConfig, close };
  } catch (error) {
    await input.handle.close().catch(() => {});
    throw error;
  }
}

// Formats that can be written (--to); --from also reads diffusers' attention-processor files.
const FORMATS = new Set(['peft', 'mlx', 'kohya', 'gguf-names']);
const READ_FORMATS = new Set([...FORMATS, 'diffusers-attnproc']);
const unknownFormat = (command, v) => usageError(command, `unknown format \`${v}\` (expected peft, mlx, kohya or gguf-names)`);
const unknownReadFormat = (command, v) =>
  usageError(command, `unknown format \`${v}\` (expected peft, mlx, kohya, gguf-names or diffusers-attnproc)`);

// Like the native CLI, --help anywhere (even as an option's value) shows the help.
const wantsHelp = (args) => args.some((a) => a === '--help' || a === '-h');

/** Parses the option at args[c.i] the two commands share into `o`: 0 if consumed, 1 if unknown, else the usage
 * error's status (as ParseCommon). */
async function parseCommon(command, args, c, o) {
  const a = args[c.i];
  if (a === '--json') o.json = true;
  else if (a === '--strict') o.strict = true;
  else if (a === '--arch' || a === '--base-config' || a === '--from') {
    if (c.i + 1 >= args.length) return usageError(command, `${a} needs a value`);
    const v = args[++c.i];
    if (a === '--arch') o.arch = v;
    else if (a === '--base-config') o.baseConfig = v;
    else if (READ_FORMATS.has(v)) o.from = v;
    else return unknownReadFormat(command, v);
  } else if (a.length > 1 && a[0] === '-') {
    return 1;
  } else {
    o.positional.push(a);
  }
  return 0;
}

const commonOptions = () => ({ json: false, strict: false, arch: null, baseConfig: null, from: null, positional: [] });

async function runAdapterInfo(args) {
  if (wantsHelp(args)) {
    await out(module.cliHelp('adapter-info'));
    return 0;
  }
  const o = commonOptions();
  for (const c = { i: 0 }; c.i < args.length; ++c.i) {
    const r = await parseCommon('adapter-info', args, c, o);
    if (r === 1) return usageError('adapter-info', `unknown option \`${args[c.i]}\``);
    if (r !== 0) return r;
  }
  if (o.positional.length !== 1) return usageError('adapter-info', 'expected exactly one DIR');
  try {
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
    return fail(error, o.json);
  }
}

/** A temporary file beside `path` (as mkstemp: PATH.tmp-XXXXXX, mode 0666 minus the umask). */
async function createTemp(path) {
  const temp = `${path}.tmp-${randomBytes(6).toString('base64url').slice(0, 6)}`;
  try {
    return { temp, final: path, handle: await open(temp, 'wx', 0o666) };
  } catch (error) {
    throw ioFailure('cannot create a temporary file for', path, error);
  }
}

/** Writes, syncs and closes a temporary file (AtomicOutputFile::Prepare). */
async function prepare(file, bytes) {
  try {
    for (let done = 0; done < bytes.length; ) done += (await file.handle.write(bytes, done, bytes.length - done)).bytesWritten;
  } catch (error) {
    throw ioFailure('cannot write', file.temp, error);
  }
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

async function runTranslate(args) {
  if (wantsHelp(args)) {
    await out(module.cliHelp('translate'));
    return 0;
  }
  const o = { ...commonOptions(), to: null, dryRun: false, oldPeft: false };
  for (const c = { i: 0 }; c.i < args.length; ++c.i) {
    const a = args[c.i];
    if (a === '--dry-run') o.dryRun = true;
    else if (a === '--old-peft') o.oldPeft = true;
    else if (a === '--to') {
      if (c.i + 1 >= args.length) return usageError('translate', '--to needs a value');
      o.to = args[++c.i];
      if (!FORMATS.has(o.to)) return unknownFormat('translate', o.to);
    } else {
      const r = await parseCommon('translate', args, c, o);
      if (r === 1) return usageError('translate', `unknown option \`${a}\``);
      if (r !== 0) return r;
    }
  }
  if (o.positional.length !== 2) return usageError('translate', 'expected IN_DIR and OUT_DIR');
  if (o.to === null) return usageError('translate', '--to is required');

  let result;
  // An error producing the output bytes is reported where the native CLI meets it: after OUT_DIR is created.
  let writeError = null;
  try {
    const files = await loadAdapterDir(o.positional[0], o.baseConfig);
    try {
      result = await callAdapter('translateAdapter', files, o);
    } finally {
      await files.close();
    }
  } catch (error) {
    if (writeErrorFile(error) === undefined) return fail(error, o.json);
    writeError = error;
  }
  if (!o.dryRun) {
    const outDir = o.positional[1];
    let created = false;
    if (!(await isDirectory(outDir))) {
      try {
        await mkdir(outDir);
      } catch (error) {
        return fail(ioFailure('cannot create directory', outDir, error), o.json);
      }
      created = true;
    }
    // Every file is written and closed under a temporary name before any is renamed into place; a failure
    // before the first rename leaves nothing under the final names and removes the directory if it is new.
    const prepared = [];
    let renamed = 0;
    const removeTemps = () => {
      for (const f of prepared.slice(renamed)) {
        try {
          unlinkSync(f.temp);
        } catch {
          // already gone
        }
      }
    };
    const onSignal = (signal) => {
      removeTemps();
      process.exit(signal === 'SIGINT' ? 130 : 143);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    try {
      for (const file of writeError ? [{ name: writeErrorFile(writeError) }] : result.files) {
        prepared.push(await createTemp(joinPath(outDir, file.name)));
        if (writeError) throw writeError;
        await prepare(prepared.at(-1), file.bytes);
      }
      for (const f of prepared) {
        try {
          await rename(f.temp, f.final);
        } catch (error) {
          throw ioFailure('cannot rename into', f.final, error);
        }
        ++renamed;
      }
    } catch (error) {
      for (const f of prepared) await f.handle?.close().catch(() => {});
      removeTemps();
      if (created && renamed === 0) await rmdir(outDir).catch(() => {});
      return fail(error, o.json);
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  }
  await out(o.json ? result.json : result.text);
  return 0;
}

// ---- merge and unmerge (src/cli/merge_command.cc) ----

/** The native CLI's progress bar on stderr: only on a terminal and without --json. */
function mergeProgress(total, enabled) {
  let last = -1;
  return {
    update(done) {
      if (!enabled || total === 0) return;
      const pct = Math.floor((100 * done) / total);
      if (pct === last) return;
      last = pct;
      const filled = Math.floor((pct * 30) / 100);
      process.stderr.write(
        `\r[${'#'.repeat(filled)}${' '.repeat(30 - filled)}] ${String(pct).padStart(3)}%  ${(done / 1e9).toFixed(1)} / ${(total / 1e9).toFixed(1)} GB`,
      );
    },
    done() {
      if (enabled && last >= 0) process.stderr.write('\n');
    },
  };
}

/** OpenBase: the shard names (from the index, or the one file), config.json, and every shard's header. */
async function openMergeBase(session, path, configPath, inputs) {
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
      await session.addShard(name, openSource(input.source));
    } catch (error) {
      // The core names the shard in its own errors; reading errors get the same prefix, as natively.
      if (renderedError(error, false) !== null) throw error;
      throw new CliFailure(error?.code ?? 'IoError', `${name}: ${error?.message ?? error}`);
    }
  }
  session.baseComplete();
  return base;
}

async function runMerge(args, unmerge) {
  const command = unmerge ? 'unmerge' : 'merge';
  if (wantsHelp(args)) {
    await out(module.cliHelp(command));
    return 0;
  }
  const o = { base: null, adapter: null, out: null, baseConfig: null, arch: null, dtype: null, safe: false, unmerge, json: false, dryRun: false };
  const keys = { '--base': 'base', '--adapter': 'adapter', '--out': 'out', '--base-config': 'baseConfig', '--arch': 'arch', '--dtype': 'dtype' };
  for (let i = 0; i < args.length; ++i) {
    const a = args[i];
    if (a === '--json') o.json = true;
    else if (a === '--safe') o.safe = true;
    else if (a === '--dry-run') o.dryRun = true;
    else if (Object.hasOwn(keys, a)) {
      if (i + 1 >= args.length) return usageError(command, `${a} needs a value`);
      const v = args[++i];
      if (a === '--dtype' && !DTYPES.has(v)) return usageError(command, `unknown dtype \`${v}\` (expected bf16, f16 or f32)`);
      o[keys[a]] = v;
    } else {
      return usageError(command, `unexpected argument \`${a}\``);
    }
  }
  if (o.base === null || o.adapter === null) return usageError(command, '--base and --adapter are required');
  if (o.out === null && !o.dryRun) return usageError(command, '--out is required (or --dry-run)');
  const t0 = performance.now();

  const session = await MergeSession.create('Merger', o);
  const inputs = []; // the shards, open for reading
  let base = null;
  let adapterFiles = null; // the adapter's weights, open for reading by range
  const prepared = []; // temporary files, in the order they are renamed into place
  let renamed = 0;
  const removeTemps = () => {
    for (const f of prepared.slice(renamed)) {
      try {
        unlinkSync(f.temp);
      } catch {
        // already gone
      }
    }
  };
  const onSignal = (signal) => {
    removeTemps();
    process.exit(128 + ({ SIGHUP: 1, SIGINT: 2, SIGTERM: 15 })[signal]);
  };
  try {
    base = await openMergeBase(session, o.base, o.baseConfig, inputs);
    adapterFiles = await loadAdapterDir(o.adapter, null);
    await session.loadAdapter({ ...adapterFiles, baseConfig: base.config });
    const plan = session.plan();
    if (!o.dryRun) {
      const first = await stat(joinPath(o.out, base.names[0])).catch(() => null);
      if (first && first.dev === base.inputs[0].stat.dev && first.ino === base.inputs[0].stat.ino)
        return await usageError(command, "--out must not be the base model's directory");
      let created = false;
      if (!(await isDirectory(o.out))) {
        try {
          await mkdir(o.out);
        } catch (error) {
          throw ioFailure('cannot create directory', o.out, error);
        }
        created = true;
      }
      // Every output is written and closed under a temporary name; only when all are complete are they renamed.
      for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(s, onSignal);
      const progress = mergeProgress(plan.sourceBytes, !o.json && process.stderr.isTTY);
      try {
        const counts = { bytesIn: 0 };
        for (let s = 0; s < plan.shards.length; ++s) {
          const file = await createTemp(joinPath(o.out, plan.shards[s].name));
          prepared.push(file);
          for await (const bytes of session.mergeShard(s, plan.shards[s], openSource(base.inputs[s].source), undefined, counts)) {
            try {
              for (let done = 0; done < bytes.length; ) done += (await file.handle.write(bytes, done, bytes.length - done)).bytesWritten;
            } catch (error) {
              throw ioFailure('cannot write', file.temp, error);
            }
            if (counts.bytesIn) progress.update(counts.bytesIn); // as natively: from the first bytes read
          }
          await prepare(file, new Uint8Array(0));
        }
        const texts = [];
        if (base.index) texts.push(['model.safetensors.index.json', session.outputIndex()]);
        const config = session.configJson();
        if (config !== null) texts.push(['config.json', config]);
        for (const [name, text] of texts) {
          prepared.push(await createTemp(joinPath(o.out, name)));
          await prepare(prepared.at(-1), new TextEncoder().encode(text));
        }
        for (const f of prepared) {
          try {
            await rename(f.temp, f.final);
          } catch (error) {
            throw ioFailure('cannot rename into', f.final, error);
          }
          ++renamed;
        }
        progress.done();
      } catch (error) {
        progress.done();
        for (const f of prepared) await f.handle?.close().catch(() => {});
        removeTemps();
        if (created) await rmdir(o.out).catch(() => {}); // only if still empty, as natively
        throw error;
      }
    }
    await out(session.summary((performance.now() - t0) / 1000, o.dryRun, o.json));
    return 0;
  } catch (error) {
    return fail(error, o.json);
  } finally {
    for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.off(s, onSignal);
    for (const input of inputs) await input.handle.close();
    await adapterFiles?.close();
    session.close();
  }
}

async function main(args) {
  if (args.length === 0) return usageError('', 'missing command');
  const command = args[0];
  if (command === '--help' || command === '-h' || command === 'help') {
    await out(module.cliHelp(''));
    return 0;
  }
  if (command === '--version') {
    await out(`peft-bridge ${module.version()}\n`);
    return 0;
  }
  const rest = args.slice(1);
  if (command === 'inspect') return runInspect(rest);
  if (command === 'convert') return runConvert(rest);
  if (command === 'adapter-info') return runAdapterInfo(rest);
  if (command === 'translate') return runTranslate(rest);
  if (command === 'merge' || command === 'unmerge') return runMerge(rest, command === 'unmerge');
  return usageError('', `unknown command \`${command}\``);
}

let status = await main(process.argv.slice(2));
if (stdoutError) {
  const e = { code: 'IoError', message: `cannot write to standard output: ${strerror(stdoutError)}`, tensor: null, offset: null };
  await err(module.renderError(JSON.stringify(e), false));
  status = 1;
}
process.exitCode = status;
