// merge and unmerge for the npm CLI (src/cli/merge_command.cc).
import { open, readdir, stat } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { renderedError } from '../errors.js';
import { MergeSession } from '../ops/merge.js';
import { openSource } from '../io/sources.js';
import {
  CliFailure,
  coreError,
  err,
  explainInput,
  fail,
  flag,
  isRegularFile,
  joinPath,
  module,
  option,
  out,
} from './io.js';
import { stderrProgress } from './progress.js';
import { RunCopier } from './run-copier.js';
import { ShardWorkers } from './shard-workers.js';
import { WholeCopies, canCopyWhole, copyWhole } from './whole-copies.js';
import { isRemote, openRemote, readRemoteWhole } from '../remote/hub.js';
import { readAhead } from '../remote/remote.js';
import {
  chooseLocalModel,
  decodeText,
  lazyInput,
  loadAdapterDir,
  namingTables,
  openInput,
  readWholeFile,
  recordWholeReads,
  remoteAddress,
  remoteChecked,
  remoteEntry,
  remoteListing,
  remoteOptions,
} from './inputs.js';
import {
  OutputTransaction,
  adapterFacts,
  describeOutputDirectory,
  directoryFact,
  fileFact,
  namedInputFacts,
  planOutput,
} from './output.js';

// ---- merge and unmerge (src/cli/merge_command.cc) ----

// How the npm CLI moves a shard's bytes, chosen by measurement (docs/benchmarks.md, "npm CLI vs native CLI"):
// - a local shard whose layout the merge keeps is first copied whole by the kernel (WholeCopies: COPY_LANES
//   shards at a time, ahead of the merge), and the merge writes only what it changes over that copy;
// - else the tensors the merge copies unchanged go from input to output in a copy lane of their own (RunCopier:
//   COPY_LANES reads or writes of COPY_PIECE in flight), in the background, while the module merges the others;
// - the tensors it changes are read MERGE_PIECE at a time (a few reads ahead) and written from heap views; the
//   chunks that are not heap views may run WRITE_BEHIND writes behind the merge.
const MERGE_PIECE = 1 << 20;
const MERGE_READS = 3; // pieces being read or merged at once
const WRITE_BEHIND = 4;
const COPY_LANES = 2;
const COPY_PIECE = 1 << 20;
// V8 reserves a WebAssembly memory's whole range on 64-bit hosts, so growing it never moves bytes a write of a
// heap view is reading (writeShard).
const GROWS_IN_PLACE = ['x64', 'arm64', 'ppc64', 's390x', 'riscv64', 'loong64'].includes(process.arch);

/** OpenBase (src/cli/base_model.cc): the shard names (from the index, or the one file), config.json, and every
 * shard's header; a remote base by Range requests, in the order the core's ChooseRemoteBase gives. */
export async function openMergeBase(session, path, configPath, inputs) {
  const base = isRemote(path)
    ? await openRemoteBase(session, path, inputs)
    : await openLocalBase(session, path, inputs);
  base.given = path;
  if (configPath !== null) base.config = await readWholeFile(configPath);
  session.baseComplete();
  return base;
}

/** Adds shard `name` of `source` to the session, its errors named as the native CLI names them. */
async function addShard(session, name, source) {
  try {
    await session.addShard(name, await openSource(source));
  } catch (error) {
    // The core names the shard in its own errors; reading errors get the same prefix, as natively.
    if (renderedError(error, false) !== null) throw error;
    throw new CliFailure(error?.code ?? 'IoError', `${name}: ${error?.message ?? error}`);
  }
}

async function openLocalBase(session, path, inputs) {
  const model = await chooseLocalModel(path); // the rule of a remote folder's files
  const base = {
    remote: false,
    isDirectory: model.isDirectory,
    dir: model.dir,
    names: model.names,
    inputs,
    config: null,
    index: false,
  };
  if (model.indexPath !== null) {
    base.names = session.setIndex(await readWholeFile(model.indexPath));
    base.index = true;
  }
  if (await isRegularFile(joinPath(base.dir, 'config.json')))
    base.config = await readWholeFile(joinPath(base.dir, 'config.json'));
  for (const name of base.names) {
    const input = await lazyInput(joinPath(base.dir, name), await openInput(joinPath(base.dir, name))); // closed until read
    base.inputs.push(input);
    await input.acquire(); // for its header
    try {
      await addShard(session, name, input.source);
    } finally {
      await input.release();
    }
  }
  return base;
}

async function openRemoteBase(session, path, inputs) {
  const ro = remoteOptions();
  const address = remoteAddress(path, ro);
  const listing = address.folder ? await remoteListing(address, ro) : [];
  const files = remoteChecked(module.chooseRemoteBase(path, ro.endpoint, JSON.stringify(listing)));
  const base = {
    remote: true,
    isDirectory: address.folder,
    listing: JSON.parse(files.listing),
    names: [],
    inputs,
    config: null,
    index: false,
    ro,
    commit: null,
  };
  if (files.index !== null) {
    const whole = await readRemoteWhole(remoteEntry(path, ro, files.index), ro);
    base.names = session.setIndex(decodeText(whole.bytes));
    base.index = true;
    base.commit = whole.commit; // every other file from the index's commit, even if the branch moves meanwhile
  } else {
    base.names = [files.single];
  }
  if (files.config !== 'none') {
    try {
      const whole = await readRemoteWhole(remoteEntry(path, ro, 'config.json', base.commit), ro);
      base.config = decodeText(whole.bytes);
      base.commit ??= whole.commit;
    } catch (error) {
      if (files.config === 'listed' || error?.status !== 404) throw error;
    }
  }
  for (const name of base.names) {
    let file;
    try {
      file = await openRemote(remoteEntry(path, ro, name, base.commit), ro);
    } catch (error) {
      throw new CliFailure(error?.code ?? 'IoError', `${name}: ${error?.message ?? error}`);
    }
    const source = readAhead(file);
    base.inputs.push({ handle: file, source });
    await addShard(session, name, source);
  }
  return base;
}

/** The merge's options from the command line: runMerge's, and (cloned) its shard workers'. */
function mergeOptions(line) {
  const command = line.command;
  // `convert IN OUT --quantize ...`: the same pass over a model with no adapter (src/cli/merge_command.cc).
  const convert = command === 'convert';
  return {
    command,
    convert,
    base: convert ? line.positional[0] : option(line, 'base'),
    adapter: option(line, 'adapter'),
    out: convert ? line.positional[1] : option(line, 'out'),
    baseConfig: option(line, 'base-config'),
    arch: option(line, 'arch'),
    dtype: option(line, 'dtype'),
    safe: flag(line, 'safe'),
    quantize: option(line, 'quantize'),
    scheme: option(line, 'scheme'),
    groupSize: option(line, 'group-size'),
    unmerge: command === 'unmerge',
    json: flag(line, 'json'),
    dryRun: flag(line, 'dry-run'),
    force: flag(line, 'force'),
    allowPartial: flag(line, 'allow-partial'),
    followLinks: flag(line, 'follow-links'),
    copyExtra: !flag(line, 'no-copy-extra'),
    threads: line.options.threads ? Number(option(line, 'threads')) : null, // checked by the grammar
    namingTables: null,
  };
}

/**
 * Opens the base (its shards into `inputs`, open for reading) and loads the adapter into `session`, as
 * src/cli/merge_command.cc does; errors opening either are told as the native ExplainInput tells them. Returns
 * {base, adapterFiles} (the adapter's weights, open for reading by range; null for convert). The caller plans.
 */
export async function openMergeInputs(session, o, inputs) {
  const base = await openMergeBase(session, o.base, o.baseConfig, inputs).catch(async (e) => {
    throw await explainInput(e, o.base, 'base');
  });
  if (o.convert) {
    session.check(session.handle.handle.setNoAdapter(base.config ?? null));
    return { base, adapterFiles: null };
  }
  let adapterFiles = null;
  try {
    adapterFiles = await loadAdapterDir(o.adapter, null);
    await session.loadAdapter({ ...adapterFiles, baseConfig: base.config });
  } catch (error) {
    await adapterFiles?.close();
    throw await explainInput(error, o.adapter, 'adapter');
  }
  return { base, adapterFiles };
}

export async function runMerge(line) {
  const o = mergeOptions(line);
  const { command, convert } = o;
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
  let copies = null; // the shards' whole copies (WholeCopies)
  let workers = null; // the shard workers (ShardWorkers), when shards are merged at once
  let progress = null;
  let adapterFiles = null; // the adapter's weights, open for reading by range
  try {
    const wholeReads = new Map(); // the index and configs, as read: shard workers plan from the same bytes
    recordWholeReads(wholeReads);
    const opened = await openMergeInputs(session, o, inputs).finally(() => recordWholeReads(null));
    const { base } = opened;
    adapterFiles = opened.adapterFiles;
    const plan = session.plan();
    // --threads, else the core's default for worker threads (merge::DefaultWorkerThreads): shards merged at once,
    // one per thread - this one and worker threads started now, which plan again while this one goes on.
    const threads = o.threads ?? session.defaultThreads(availableParallelism());
    const atOnce = !o.dryRun && threads > 1 && plan.shards.length > 1 && ShardWorkers.canMerge(base, o);
    if (atOnce)
      workers = new ShardWorkers(Math.min(threads, plan.shards.length) - 1, o, base, adapterFiles, plan, wholeReads);
    // The policy: no link out of an input directory, no silent loss, no output over an input or into a
    // non-empty directory.
    const facts = [
      ...(await baseFacts(base, o.baseConfig)),
      ...(convert ? [] : await adapterFacts('--adapter', o.adapter, adapterFiles.weightsPath)),
      ...(await namedInputFacts(line)),
    ];
    const texts = [];
    if (base.index) texts.push(['model.safetensors.index.json', session.outputIndex()]);
    const config = session.configJson();
    if (config !== null) texts.push(['config.json', config]);
    const names = [...plan.shards.map((s) => s.name), ...texts.map(([name]) => name)]; // what the merge writes itself
    // The base's other files (tokenizer, generation config...) are inputs too, and outputs.
    const baseIsDirectory = base.isDirectory;
    const listing =
      !baseIsDirectory || !o.copyExtra ? [] : base.remote ? base.listing : await listBaseDirectory(base.dir);
    const extra = planExtraFiles({
      basePath: o.base,
      baseIsDirectory,
      listing,
      written: names,
      writesConfig: config !== null,
      copyExtra: o.copyExtra,
    });
    if (!base.remote)
      for (const name of extra.copy) facts.push(await fileFact('--base', joinPath(base.dir, name), base.dir));
    session.setCopiedFiles(extra.copy);
    planOutput(command, facts, null, o);
    const quantizeWarnings = session.planWarnings();
    if (quantizeWarnings) await err(quantizeWarnings);
    if (extra.warnings) await err(extra.warnings);
    if (!o.dryRun) {
      output = await OutputTransaction.begin(
        o.out,
        planOutput(command, facts, await describeOutputDirectory('--out', o.out, [...names, ...extra.copy]), o),
      );
      // The plan is told before the work starts; the outcome line follows it.
      if (!o.json && !quiet) await out(session.planText(false));
      // Every output is written under a temporary name; any failure before commit() succeeds removes them all.
      progress = stderrProgress(line, plan.sourceBytes);
      for (const name of extra.copy) {
        const file = await output.add(name);
        await copyBaseFile(output, file, base, name);
        await output.prepare(file);
      }
      const counts = { bytesIn: 0 };
      const memory = shardMemory();
      // Every shard's file is created now but open (as its input) only while it is copied or merged: a descriptor
      // per shard at once would not do for a base of thousands.
      const files = [];
      for (const shard of plan.shards) {
        const file = await output.add(shard.name);
        files.push(file);
        await output.park(file);
      }
      // Shard s's input and output open for `body`, closed after (the output synced and closed by prepare, once merged).
      const withShard = async (s, body, done) => {
        const input = base.inputs[s];
        await input.acquire?.();
        try {
          await output.resume(files[s]);
          const result = await body();
          await done(files[s]);
          return result;
        } finally {
          await input.release?.();
        }
      };
      const keepsLayout = (shard, s) => canCopyWhole && !base.remote && shard.outputSize === base.inputs[s].source.size;
      const copy = (s) => () =>
        withShard(
          s,
          () => copyWhole(base.inputs[s].handle, files[s]),
          (f) => output.park(f),
        );
      copies = new WholeCopies(
        plan.shards.map((shard, s) => (keepsLayout(shard, s) ? copy(s) : null)),
        COPY_LANES,
      );
      const mergeHere = async (s) => {
        const copied = await copies.results[s];
        await withShard(
          s,
          () =>
            writeShard(
              session,
              s,
              plan.shards[s],
              base.inputs[s].source,
              output,
              files[s],
              counts,
              progress,
              memory,
              copied,
            ),
          (f) => output.prepare(f),
        );
      };
      if (workers) {
        // One progress line for all, as natively.
        progress.startFilesAtOnce(plan.shards.length, counts.bytesIn);
        const mergeThere = async (worker, s) => {
          const copied = await copies.results[s];
          await output.resume(files[s]);
          const quantErrors = await worker.merge(s, files[s], copied, (n) => progress.update((counts.bytesIn += n)));
          session.setQuantErrors(s, quantErrors);
          await output.prepare(files[s]);
        };
        await workers.mergeShards(plan.shards.length, mergeHere, mergeThere);
      } else {
        for (let s = 0; s < plan.shards.length; ++s) {
          progress.startFile(plan.shards[s].name, counts.bytesIn);
          await mergeHere(s);
        }
      }
      for (const [name, text] of texts) await output.write(await output.add(name), new TextEncoder().encode(text));
      await output.commit();
      progress.finish();
    }
    const seconds = (performance.now() - t0) / 1000;
    // Peak memory is the process's RSS (Node's own, the heap's pages, the workers') and the module's heap, named.
    session.setPeakRss(process.resourceUsage().maxRSS * 1024);
    // A dry run's plan is all it prints; a merge's plan was printed before the work.
    if (o.json || (o.dryRun && !quiet)) await out(session.summary(seconds, o.dryRun, o.json));
    else if (!quiet) await out(session.outcomeText(seconds));
    return 0;
  } catch (error) {
    progress?.abandon();
    return fail(error, o.json);
  } finally {
    progress?.close();
    await workers?.stop();
    await copies?.stop(); // before the temporary files go: a copy still running would write one anew
    await output?.close();
    for (const input of inputs) await (input.release ? input.release() : input.handle.close());
    await adapterFiles?.close();
    session.close();
  }
}

const pieceBuffers = (count, size) => Array.from({ length: count }, () => new Uint8Array(size));

/** The read buffers of the local shards one thread merges, one shard at a time: its merge's, and its copy
 * lanes' once needed. */
export const shardMemory = () => ({ copy: null, merge: pieceBuffers(MERGE_READS, MERGE_PIECE) });

/**
 * Writes shard `s`'s merged bytes into the transaction's file `file`: the chunks the merge gives, each at its
 * offset, and - for a local shard - the runs of unchanged tensors: in place already where `copied` (the file holds
 * a whole copy of the input) and the run's offset is the same in both, else handed to a copy lane that runs beside
 * the merge; returns (or throws) once that lane has stopped. A remote shard's runs come through the merge.
 */
export async function writeShard(session, s, shard, source, output, file, counts, progress, memory, copied) {
  const src = await openSource(source);
  let offset = 0; // the output offset of the next chunk (and of the next forwarded run)
  let copier = null;
  let forward = null;
  if (src.readInto) {
    forward = (from, length) => {
      if (copied && from === offset) {
        progress.update((counts.bytesIn += length));
      } else {
        if (!copier) {
          memory.copy ??= pieceBuffers(COPY_LANES, COPY_PIECE);
          copier = new RunCopier(src.readInto, (at, bytes) => output.writeAt(file, at, bytes), memory.copy);
          copier.onCopied = (n) => progress.update((counts.bytesIn += n));
        }
        copier.add(from, offset, length);
        if (copier.failure) throw copier.failure; // the merge stops at the next run once a copy has failed
      }
      offset += length;
    };
  }
  try {
    // Writes run behind the merge, each at its offset: WRITE_BEHIND at most of chunks that are not heap views,
    // and the view of one call into the module (one per call: MergeSession.pushed) while it produces the next
    // call's output into its other buffer (flipOutput): before it flips back, every earlier write is done. The
    // view's write starts first: once anything else runs (a progress update may grow the memory), a view taken
    // before is empty. A memory grows in place only on a 64-bit host, so a 32-bit one writes each view first.
    const writes = [];
    const native = session.handle;
    const reading = forward ? { buffers: memory.merge, forward } : { keep: WRITE_BEHIND, pieceSize: MERGE_PIECE };
    const pieces = session.mergeShard(s, shard, src, undefined, counts, { reuse: true, ...reading });
    for await (const bytes of pieces) {
      const view = bytes.buffer === session.module.HEAPU8.buffer;
      const write = output.writeAt(file, offset, bytes);
      offset += bytes.length;
      write.catch(() => {}); // awaited in order, here or below
      writes.push(write);
      if (view) {
        if (!GROWS_IN_PLACE) while (writes.length) await writes.shift();
        else {
          while (writes.length > 1) await writes.shift();
          native.flipOutput();
        }
      } else if (writes.length > WRITE_BEHIND) await writes.shift();
      progress.update(counts.bytesIn);
    }
    while (writes.length) await writes.shift();
  } catch (error) {
    await copier?.finish().catch(() => {}); // nothing is written to the file once its removal may begin
    throw error;
  }
  await copier?.finish();
}

/** The base directory's entries, kinds as links lead (a dangling link: 'other'), for the core's PlanExtraFiles. */
export async function listBaseDirectory(dir) {
  const entries = [];
  for (const name of await readdir(dir).catch(() => [])) {
    const st = await stat(joinPath(dir, name)).catch(() => null);
    entries.push({ name, kind: st?.isFile() ? 'file' : st?.isDirectory() ? 'directory' : 'other' });
  }
  return entries;
}

/** The core's choice of the base's other files to copy: {copy: [names], warnings: text}. */
export function planExtraFiles(request) {
  const r = module.planExtraFiles(JSON.stringify(request));
  if (!r.ok) throw coreError(r);
  return JSON.parse(r.planJson);
}

/** One of the base's other files, copied into the transaction's temporary file `file`, a chunk at a time. */
export async function copyBaseFile(output, file, base, name) {
  const input = base.remote
    ? await openRemoteInput(remoteEntry(base.given, base.ro, name, base.commit), base.ro)
    : await openInput(joinPath(base.dir, name));
  try {
    const chunk = 4 << 20;
    for (let pos = 0; pos < input.source.size; pos += chunk)
      await output.write(file, await input.source.read(pos, Math.min(chunk, input.source.size - pos)));
  } finally {
    await input.handle.close();
  }
}

/** A remote file as openInput gives a local one: {handle (close), source (size, read)}. */
async function openRemoteInput(entry, ro) {
  const file = await openRemote(entry, ro);
  if (file.size === null) {
    await file.close();
    const { bytes } = await readRemoteWhole(entry, ro, Number.MAX_SAFE_INTEGER);
    return {
      handle: { close: async () => {} },
      source: { size: bytes.length, read: async (offset, length) => bytes.subarray(offset, offset + length) },
    };
  }
  return { handle: file, source: readAhead(file) };
}

/** BaseFacts: the base's directory (when one was named), every shard, the index and config.json found beside
 * them, and --base-config; a remote base has no local file but the last. */
export async function baseFacts(base, configPath) {
  const facts = [];
  if (!base.remote) {
    const namedDir = base.isDirectory;
    const indexFile = !namedDir && base.index; // --base names an index: its shards are in its folder
    if (namedDir) facts.push(await directoryFact('--base', base.given));
    if (indexFile) facts.push(await fileFact('--base', base.given, null));
    for (const name of base.names)
      facts.push(
        namedDir || indexFile
          ? await fileFact('--base', joinPath(base.dir, name), base.dir)
          : await fileFact('--base', base.given, null),
      );
    for (const name of ['model.safetensors.index.json', 'config.json'])
      if ((namedDir || name === 'config.json') && (await isRegularFile(joinPath(base.dir, name))))
        facts.push(await fileFact('--base', joinPath(base.dir, name), base.dir));
  }
  if (configPath !== null) facts.push(await fileFact('--base-config', configPath, null));
  return facts;
}
