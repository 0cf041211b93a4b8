// An adapter given as a directory: a local folder or weights file (.safetensors or .gguf; Node), or a Hub repo. Which file of the
// directory holds the weights, and whether a config is beside it, is the core's rule (src/app/adapter_files.h,
// shared with both CLIs); this file only lists the directory and opens what the core chose. Internal.
import { errorFromValue, throwIfAborted } from '../errors.js';
import { getModule } from '../init.js';
import { defaultEndpoint, hubAliases, hubTreeUrl, openRemote, readRemoteWhole } from '../remote/hub.js';
import { isLocalPath, requireLocalFiles } from '../io/sources.js';

const checked = (r) => {
  if (!r.ok) throw errorFromValue(r);
  return r;
};

// The native Join: no normalisation, so messages name paths exactly as given.
const joinPath = (dir, name) => (dir === '' || dir.endsWith('/') ? dir + name : `${dir}/${name}`);

/** A Hub repo naming an adapter directory: {repo, revision?, subfolder?, endpoint?, token?}, no file path. */
export function isHubRepo(input) {
  return (
    !!input &&
    typeof input === 'object' &&
    !(input instanceof URL) &&
    typeof input.repo === 'string' &&
    input.path === undefined &&
    input.weights === undefined &&
    typeof input.read !== 'function' &&
    typeof input.getReader !== 'function'
  );
}

/** True for what {@link openAdapterDirectory} takes: a local path or file: URL, or a Hub repo. */
export const isAdapterDirectory = (input) => isLocalPath(input) || isHubRepo(input);

/**
 * The adapter's files: {weights ({size, read, close}), weightsName, config (bytes or null), revision (the Hub
 * commit read, null for a local folder), close()}. The weights stay open for range reads until close().
 */
export async function openAdapterDirectory(input, options = {}) {
  throwIfAborted(options.signal);
  return isHubRepo(input) ? openHubAdapter(input, options) : openLocalAdapter(input);
}

async function openLocalAdapter(input) {
  const fs = requireLocalFiles(input);
  const module = await getModule();
  const path = fs.toPath(input);
  let weightsPath;
  let configPath = null;
  if (await fs.isDirectory(path)) {
    const chosen = checked(module.chooseAdapterFiles(path, JSON.stringify(await fs.list(path))));
    weightsPath = joinPath(path, chosen.weights);
    if (chosen.config !== null) configPath = joinPath(path, chosen.config);
  } else {
    checked(module.checkAdapterWeightsPath(path));
    weightsPath = path;
    const slash = path.lastIndexOf('/');
    const beside = joinPath(slash === -1 ? '.' : path.slice(0, slash), module.adapterConfigName());
    if (await fs.isFile(beside)) configPath = beside;
  }
  const weights = await fs.open(weightsPath);
  try {
    const config = configPath === null ? null : await fs.readWhole(configPath);
    return {
      weights,
      weightsName: weightsPath.slice(weightsPath.lastIndexOf('/') + 1),
      config,
      revision: null,
      close: () => weights.close(),
    };
  } catch (error) {
    await weights.close();
    throw error;
  }
}

/**
 * translateAdapter to gguf / gguf-names of a directory without `baseConfig`: the base config by the core's rule
 * (app::ChooseBaseConfig, as both CLIs): the adapter config's base_model_name_or_path as a local folder (Node), else,
 * for an adapter read from the Hub, that Hub repo's config.json. {baseConfig (bytes or null), note, hint}.
 */
export async function findBaseConfig(input, dir, options = {}) {
  const module = await getModule();
  const configText = dir.config === null ? null : new TextDecoder().decode(dir.config);
  const base = configText !== null ? module.adapterBaseModel(configText) : null;
  const hub = isHubRepo(input);
  const files = base !== null && !hub ? requireLocalFiles(input) : null;
  const localExists = files !== null && (await files.isFile(base.localConfigPath));
  const o = hub ? hubAliases(options) : options;
  const endpoint = (hub ? hubAliases(input).endpoint : null) ?? o.endpoint ?? defaultEndpoint();
  const choice = checked(module.chooseBaseConfig(null, configText, localExists, hub, endpoint));
  let baseConfig = null;
  if (choice.kind === 'local') baseConfig = await files.readWhole(choice.path);
  else if (choice.kind === 'remote') {
    // The token, if any, goes to the endpoint's origin only, as for the adapter's files.
    const token = (hub ? hubAliases(input).token : null) ?? o.token;
    baseConfig = (await readRemoteWhole(choice.url, { ...o, endpoint, token })).bytes;
  }
  return { baseConfig, note: choice.note, hint: choice.hint };
}

/** The names of the files directly in a Hub repo's folder, from the Hub's tree API. Internal (remote.js too). */
export async function listHubFolder(repo, options) {
  const endpoint = repo.endpoint ?? options.endpoint;
  const url = hubTreeUrl({ repo: repo.repo, revision: repo.revision, folder: repo.subfolder, endpoint });
  // A plain URL: the token goes to the endpoint's origin only, as for the files.
  const { bytes } = await readRemoteWhole(url, { ...options, endpoint, token: repo.token ?? options.token });
  // Which entries are the folder's files is the core's rule (src/net/remote_address.h), as in both CLIs.
  const label = `hf://${repo.repo}${repo.subfolder ? `/${repo.subfolder}` : ''}`;
  return JSON.parse(checked((await getModule()).parseHubListing(new TextDecoder().decode(bytes), label)).names);
}

/**
 * The names of the files directly in a Hub repo's folder ({repo, revision?, subfolder?, endpoint?, token?}), as the
 * CLIs read the Hub's listing: for a MergeBase's `files`, so that the merge copies a Hub model's tokenizer and other
 * files as `peft-bridge merge` does.
 */
export async function listRepoFiles(repo, options = {}) {
  if (!repo || typeof repo !== 'object' || typeof repo.repo !== 'string')
    throw new TypeError('peft-bridge: listRepoFiles takes {repo, revision?, subfolder?}');
  return listHubFolder(hubAliases(repo), hubAliases(options));
}

async function openHubAdapter(givenRepo, givenOptions) {
  const repo = hubAliases(givenRepo);
  const options = hubAliases(givenOptions);
  const module = await getModule();
  const label = `hf://${repo.repo}${repo.subfolder ? `/${repo.subfolder}` : ''}`;
  const chosen = checked(module.chooseAdapterFiles(label, JSON.stringify(await listHubFolder(repo, options))));
  const at = (name, revision) => ({
    repo: repo.repo,
    revision,
    path: repo.subfolder ? `${repo.subfolder}/${name}` : name,
    endpoint: repo.endpoint ?? options.endpoint,
    token: repo.token ?? options.token,
  });
  let revision = repo.revision ?? 'main';
  let config = null;
  if (chosen.config !== null) {
    // The config's commit pins the weights: a branch that moves meanwhile cannot mix two versions.
    const whole = await readRemoteWhole(at(chosen.config, revision), options);
    config = whole.bytes;
    revision = whole.commit ?? revision;
  }
  const file = await openRemote(at(chosen.weights, revision), options);
  revision = file.commit ?? revision;
  if (file.size !== null)
    return { weights: file, weightsName: chosen.weights, config, revision, close: () => file.close() };
  // A server that does not tell the size: the weights whole (not held to the JSON cap).
  await file.close();
  const { bytes } = await readRemoteWhole(at(chosen.weights, revision), options, Number.MAX_SAFE_INTEGER);
  const whole = {
    size: bytes.length,
    read: async (offset, length) => bytes.subarray(offset, offset + length),
    close: async () => {},
  };
  return { weights: whole, weightsName: chosen.weights, config, revision, close: whole.close };
}
