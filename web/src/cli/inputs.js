// The npm CLI's inputs: local files read by position, adapter folders, --naming-table files, and remote
// arguments (the shared rules say what to fetch; this fetches it, as src/cli/file_io.cc, adapter_dir.cc,
// naming_table_files.cc, remote_adapter.cc and remote_model.cc do natively).
import { readFileSync } from 'node:fs';
import { open, readdir, stat } from 'node:fs/promises';
import { DEFAULT_ENDPOINT, isRemote, readRemoteWhole, withRemoteHeader } from '../remote/hub.js';
import { inspectRendered } from '../ops/inspect.js';
import { uninitialized } from '../io/node-files.js';
import { ADAPTER_CAP, LIMIT_OPTIONS } from '../remote/range-client.js';
import { descriptorHandle } from './descriptor-handle.js';
import {
  CliFailure,
  IoFailure,
  coreError,
  errorFields,
  flag,
  ioFailure,
  isDirectory,
  isRegularFile,
  joinPath,
  module,
  option,
} from './io.js';

// In a shard worker (shard-worker.js): the main thread's descriptors of the inputs it opened, and the bytes of the
// small files it read whole (index, configs), by path - so the worker plans from exactly what the main thread read.
const inherited = new Map();
const inheritedFiles = new Map();
const inheritedIdentities = new Map(); // path -> {dev, ino, size} of the shard the main thread planned from
let recording = null; // the main thread's whole reads, while recordWholeReads has a map

/** Makes openInput(path) use the main thread's descriptor of `path` ({path: fd}) instead of opening it again,
 * readWholeFile(path) return the bytes the main thread read ({path: bytes}), and lazyInput(path) accept only the
 * file the main thread read ({path: {dev, ino, size}}). */
export function inheritDescriptors(descriptors, files = {}, identities = {}) {
  for (const [path, fd] of Object.entries(descriptors)) inherited.set(path, fd);
  for (const [path, bytes] of Object.entries(files)) inheritedFiles.set(path, bytes);
  for (const [path, identity] of Object.entries(identities)) inheritedIdentities.set(path, identity);
}

/** Records every readWholeFile into `map` (path -> bytes) until called with null: what shard workers inherit. */
export function recordWholeReads(map) {
  recording = map;
}

/** A local file opened for reading by position: {handle (close), source ({size, read, readInto}), stat}. */
export async function openInput(path) {
  const handle = inherited.has(path) ? descriptorHandle(inherited.get(path)) : await openRegularFile(path);
  try {
    let st;
    try {
      st = await handle.stat();
    } catch (error) {
      throw ioFailure('cannot stat', path, error);
    }
    if (!st.isFile()) throw new IoFailure(`\`${path}\` is not a regular file`);
    // readInto fills a buffer the caller reuses (the merge's pieces); read allocates one.
    const readInto = async (offset, buffer) => {
      const length = buffer.length;
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
    };
    const source = { size: st.size, read: (offset, length) => readInto(offset, uninitialized(length)), readInto };
    return { handle, source, stat: st };
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/**
 * A local shard opened by openInput, closed now and opened again only while it is read: a base of thousands of
 * shards must not hold a descriptor per shard (the default limit is 1,024), as natively (LocalShard in
 * src/cli/base_model.cc). {path, source, handle (while acquired, else null), acquire(), release()}: between
 * acquire and release reads use one descriptor; otherwise each read opens the file for itself. Opened again, it
 * must be the same file (device, inode, size) as the one whose header was read.
 */
export async function lazyInput(path, opened) {
  const identity = inheritedIdentities.get(path) ?? {
    dev: opened.stat.dev,
    ino: opened.stat.ino,
    size: opened.stat.size,
  };
  const { dev, ino, size } = identity;
  const same = (st) => st.dev === dev && st.ino === ino && st.size === size;
  const changed = () =>
    new IoFailure(`\`${path}\` changed while the command ran (it is not the file whose header was read)`);
  await opened.handle.close();
  if (!same(opened.stat)) throw changed(); // a shard worker's open: not the main thread's file
  let current = null; // the input open between acquire and release
  const reopen = async () => {
    const input = await openInput(path);
    if (!same(input.stat)) {
      await input.handle.close();
      throw changed();
    }
    return input;
  };
  const readInto = async (offset, buffer) => {
    if (current) return current.source.readInto(offset, buffer);
    const input = await reopen();
    try {
      return await input.source.readInto(offset, buffer);
    } finally {
      await input.handle.close();
    }
  };
  return {
    path,
    identity,
    source: { size, read: (offset, length) => readInto(offset, uninitialized(length)), readInto },
    get handle() {
      return current?.handle ?? null;
    },
    async acquire() {
      current ??= await reopen();
    },
    async release() {
      const input = current;
      current = null;
      await input?.handle.close();
    },
  };
}

async function openRegularFile(path) {
  // Checked before opening: opening a FIFO for reading blocks until a writer appears.
  let pathStat;
  try {
    pathStat = await stat(path);
  } catch (error) {
    throw ioFailure('cannot open', path, error);
  }
  if (!pathStat.isFile()) throw new IoFailure(`\`${path}\` is not a regular file`);
  try {
    return await open(path, 'r');
  } catch (error) {
    throw ioFailure('cannot open', path, error);
  }
}

// What the native CLI reads too (src/cli/http_source.cc): the token is HF_TOKEN, else the file huggingface_hub
// writes ($HF_TOKEN_PATH, else $HF_HOME/token, else $XDG_CACHE_HOME/huggingface/token, else
// ~/.cache/huggingface/token); the endpoint HF_ENDPOINT; the HTTP limits the PB_HTTP_* variables. The policy sends
// the token to the endpoint's origin only, on every redirect hop.
export function remoteOptions() {
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

export async function readWholeFile(path) {
  if (inheritedFiles.has(path)) return inheritedFiles.get(path);
  const input = await openInput(path);
  try {
    const bytes = input.source.size ? await input.source.read(0, input.source.size) : new Uint8Array(0);
    recording?.set(path, bytes);
    return bytes;
  } finally {
    await input.handle.close();
  }
}

/** --naming-table FILE..., read and checked before any input, as natively (src/cli/naming_table_files.cc). */
export async function namingTables(line) {
  const paths = line.options['naming-table'] ?? [];
  if (paths.length === 0) return null;
  const tables = [];
  for (const path of paths) tables.push({ path, text: decodeText(await readWholeFile(path)) });
  const errorJson = module.namingTablesError(JSON.stringify({ namingTables: tables }));
  if (errorJson)
    throw coreError({ errorJson, errorText: module.renderError(JSON.stringify(JSON.parse(errorJson).error), false) });
  return tables;
}

/** Regular files in `dir` named *`suffix`, in byte order (as std::sort on the native names); none if unreadable. */
export async function listFiles(dir, suffix) {
  const names = [];
  for (const name of await readdir(dir).catch(() => [])) {
    if (name.length > suffix.length && name.endsWith(suffix) && (await isRegularFile(joinPath(dir, name))))
      names.push(name);
  }
  return names.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
}

/** The adapter's files, picked and read by LoadAdapterDir's rules. Configs stay raw bytes: the core gets them as
 * the native CLI reads them. */
export async function loadAdapterDir(path, baseConfigPath) {
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
    const descriptor = input.handle.fd;
    return {
      weights: input.source,
      weightsName: weightsPath.slice(weightsPath.lastIndexOf('/') + 1),
      weightsPath,
      descriptor,
      config,
      baseConfig,
      close,
    };
  } catch (error) {
    await input.handle.close().catch(() => {});
    throw error;
  }
}

/** The options adapter-info and translate share. */
export const commonOptions = (line) => ({
  json: flag(line, 'json'),
  strict: flag(line, 'strict'),
  arch: option(line, 'arch'),
  baseConfig: option(line, 'base-config'),
  from: option(line, 'from'),
  positional: line.positional,
});

// ---- remote arguments: the shared rules say what to fetch (src/net/remote_address.h, base_layout.h); as
// src/cli/remote_adapter.cc and remote_model.cc, this fetches the same files in the same order ----

export const remoteChecked = (r) => {
  if (!r.ok) throw coreError(r);
  return r;
};
export const remoteAddress = (arg, ro) => remoteChecked(module.parseRemoteAddress(arg, ro.endpoint));
/** {url, label} of `name` in the folder `arg` names, or beside the file it names; at `commit` when known. */
export const remoteEntry = (arg, ro, name, commit = null) => {
  const r = remoteChecked(module.remoteEntry(arg, ro.endpoint, name, commit ?? ''));
  return { url: r.url, label: r.label };
};
export const decodeText = (bytes) => new TextDecoder().decode(bytes);

/** The names of the files in the folder a Hub address names (the Hub's tree API). */
export async function remoteListing(address, ro) {
  const { bytes } = await readRemoteWhole({ url: address.url, label: address.label }, ro);
  return JSON.parse(remoteChecked(module.parseHubListing(decodeText(bytes), address.label)).names);
}

/** LoadRemoteAdapter: the configs and the weights fetched whole, the weights held to PB_HTTP_MAX_ADAPTER_BYTES. */
export async function loadRemoteAdapter(arg, baseConfigPath) {
  const ro = remoteOptions();
  const address = remoteAddress(arg, ro);
  let chosenName = null;
  let config = null;
  let optional = false;
  if (address.folder) {
    const chosen = remoteChecked(
      module.chooseAdapterFiles(address.label, JSON.stringify(await remoteListing(address, ro))),
    );
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
  const weights = address.folder
    ? remoteEntry(arg, ro, chosenName, commit)
    : { url: address.url, label: address.label };
  const { bytes } = await readRemoteWhole(weights, ro, ADAPTER_CAP);
  const baseConfig = baseConfigPath !== null ? await readWholeFile(baseConfigPath) : null;
  const source = { size: bytes.length, read: async (offset, length) => bytes.subarray(offset, offset + length) };
  const weightsName = address.folder ? chosenName : address.fileName;
  return {
    weights: source,
    weightsName,
    weightsPath: weights.label,
    config: configBytes,
    baseConfig,
    close: async () => {},
  };
}

/**
 * translate --to gguf|gguf-names: the base config by the core's rule (app::ChooseBaseConfig, as
 * src/cli/adapter_commands.cc ResolveBaseConfig): --base-config, else the adapter's base_model_name_or_path as a
 * local folder, else its Hub repo when the adapter came from the Hub. Sets files.baseConfig; returns {note, hint}
 * for the core and the local file read ({label, path}) for the input checks, or null.
 */
export async function resolveBaseConfig(baseConfigFlag, files, adapterArg) {
  const ro = remoteOptions();
  const configText =
    files.config === null || files.config === undefined
      ? null
      : typeof files.config === 'string'
        ? files.config
        : decodeText(files.config);
  const base = configText !== null ? module.adapterBaseModel(configText) : null;
  const localExists = baseConfigFlag === null && base !== null && (await isRegularFile(base.localConfigPath));
  const choice = remoteChecked(
    module.chooseBaseConfig(baseConfigFlag, configText, localExists, isRemote(adapterArg), ro.endpoint),
  );
  let local = null;
  if (choice.kind === 'local') {
    files.baseConfig = await readWholeFile(choice.path);
    local = { label: baseConfigFlag !== null ? '--base-config' : 'base_model_name_or_path', path: choice.path };
  } else if (choice.kind === 'remote') {
    files.baseConfig = (await readRemoteWhole({ url: choice.url, label: choice.label }, ro)).bytes;
  }
  return { note: choice.note, hint: choice.hint, local };
}

/** InspectRemoteModel: the folder's index or single file, or the index named; every shard's header in order. */
/** ChooseLocalModel (src/cli/local_model.cc): a local model's folder (its index, else its model.safetensors, by the
 * core's rule for a folder's files, as a Hub folder's), an index (its shards beside it) or its one file:
 * {isDirectory, dir, indexPath (null for none), names (the one file's, when no index)}. */
export async function chooseLocalModel(path) {
  const model = { isDirectory: await isDirectory(path), dir: path, indexPath: null, names: [] };
  let first = path;
  if (model.isDirectory) {
    const chosen = remoteChecked(module.chooseBaseFile(path, JSON.stringify(await listFiles(path, ''))));
    first = chosen.index ? joinPath(path, chosen.name) : chosen.name;
  } else {
    const slash = path.lastIndexOf('/');
    model.dir = slash === -1 ? '.' : path.slice(0, slash);
  }
  const name = first.slice(first.lastIndexOf('/') + 1);
  if (module.isModelIndexName(name))
    model.indexPath = first; // the index of a sharded model: its shards are beside it
  else model.names = [name];
  return model;
}

/** `inspect DIR` or `inspect DIR/model.safetensors.index.json` (src/cli/local_model.cc): every shard's report and
 * the totals, as inspectRemoteModel gives for a Hub repo. */
export async function inspectLocalModel(path, json) {
  const model = await chooseLocalModel(path);
  let indexText = null;
  let names = model.names;
  if (model.indexPath !== null) {
    indexText = decodeText(await readWholeFile(model.indexPath));
    names = JSON.parse(remoteChecked(module.modelIndexShards(indexText)).shards);
  }
  const reports = [];
  const held = {};
  for (const name of names) {
    const input = await openInput(joinPath(model.dir, name));
    try {
      const r = await namedAsShard(name, () => inspectRendered(input.source, { render: 'text+json' }));
      reports.push({ name, report: json ? r.json : r.text, json: r.json }); // the totals are counted from the JSON
      held[name] = r.header.tensors.map((t) => t.name);
    } finally {
      await input.handle.close();
    }
  }
  if (indexText !== null) remoteChecked(module.checkIndexShards(indexText, JSON.stringify(held)));
  return module.renderInspectFiles(JSON.stringify(reports), json);
}

/** `read()`, its error prefixed with the shard's name as a merge names it. */
async function namedAsShard(name, read) {
  try {
    return await read();
  } catch (error) {
    const e = errorFields(error);
    throw Object.assign(new CliFailure(e.code, `${name}: ${e.message}`), { tensor: e.tensor, offset: e.offset });
  }
}

export async function inspectRemoteModel(arg, ro, json) {
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
    const r = await namedAsShard(name, () =>
      withRemoteHeader(remoteEntry(arg, ro, name, commit), ro, (f) =>
        inspectRendered(f.headerSource(), { render: 'text+json' }),
      ),
    );
    reports.push({ name, report: json ? r.json : r.text, json: r.json }); // the totals are counted from the JSON
    held[name] = r.header.tensors.map((t) => t.name);
  }
  if (index) remoteChecked(module.checkIndexShards(indexText, JSON.stringify(held)));
  return module.renderInspectFiles(JSON.stringify(reports), json);
}
