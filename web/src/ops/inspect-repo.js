// inspectRepo(): the headers of every shard of a Hub model repo, read by Range, checked against its index.
import { SafetensorsError, abortReason, errorFromValue } from '../errors.js';
import { getModule } from '../init.js';
import { hubAliases, readRemoteWhole } from '../remote/hub.js';
import { inspectRendered } from './inspect.js';

const INDEX = 'model.safetensors.index.json';

// The index rules live in the core (src/merge/model_index.cc), shared with both merges: the JSON limits, a
// non-empty weight_map of plain .safetensors names, and, once the headers are read, every entry in its shard.
const checked = (r) => {
  if (!r.ok) throw errorFromValue(r);
  return r;
};

async function parseIndex(bytes) {
  let text;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new SafetensorsError('InvalidConfig', `${INDEX} is not valid UTF-8`);
  }
  const { shards } = checked((await getModule()).modelIndexShards(text));
  return { text, index: JSON.parse(text), names: JSON.parse(shards) };
}

/**
 * Inspects every shard of a model repo, given as `'owner/name'` (then the options second) or in the options'
 * `repo`: reads model.safetensors.index.json (or, without one, takes the single
 * model.safetensors), checks the shard names, and inspects each shard's header, `concurrency` at a time, at the
 * commit the index came from when the server says which. Errors name the shard; the first one stops the rest.
 * @param {{repo: string, revision?: string, endpoint?: string, token?: string, concurrency?: number,
 *   signal?: AbortSignal, retries?: number, retryDelay?: number, fetch?: typeof fetch}} options
 */
export async function inspectRepo(repoOrOptions, moreOptions = {}) {
  if (typeof repoOrOptions !== 'string' && (!repoOrOptions || typeof repoOrOptions !== 'object'))
    throw new TypeError("peft-bridge: inspectRepo takes a repo id ('owner/name') or {repo, ...options}");
  const options = hubAliases(
    typeof repoOrOptions === 'string' ? { ...moreOptions, repo: repoOrOptions } : repoOrOptions,
  );
  const { repo, revision = 'main', endpoint, token, concurrency = 4, signal } = options;
  const address = (path, rev) => ({ repo, revision: rev, path, endpoint, token });
  let index = null;
  let indexText = null;
  let names;
  let pinned = revision;
  let commit = null;
  try {
    const whole = await readRemoteWhole(address(INDEX, revision), options);
    ({ text: indexText, index, names } = await parseIndex(whole.bytes));
    commit = whole.commit;
    pinned = commit ?? revision; // every shard from the index's commit, even if the branch moves meanwhile
  } catch (error) {
    if (error?.status !== 404) throw error;
    names = ['model.safetensors'];
  }

  const controller = new AbortController();
  const onAbort = () => controller.abort(abortReason(signal));
  signal?.addEventListener('abort', onAbort, { once: true });
  if (signal?.aborted) onAbort();
  const shards = new Array(names.length);
  let next = 0;
  let failure = null;
  const worker = async () => {
    while (next < names.length && !failure) {
      const i = next++;
      try {
        const { header } = await inspectRendered(address(names[i], pinned), { ...options, signal: controller.signal });
        shards[i] = { path: names[i], header };
      } catch (error) {
        if (!failure) {
          failure =
            error instanceof SafetensorsError && !signal?.aborted
              ? new SafetensorsError(error.code, `${names[i]}: ${error.message}`, {
                  tensor: error.tensor,
                  offset: error.offset,
                  cause: error,
                })
              : error;
          controller.abort(failure);
        }
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, names.length)) }, worker));
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
  if (failure) throw failure;

  if (index) {
    const held = Object.fromEntries(shards.map((s) => [s.path, s.header.tensors.map((t) => t.name)]));
    checked((await getModule()).checkIndexShards(indexText, JSON.stringify(held)));
  }
  return { repo, revision: pinned, commit, index, shards };
}
