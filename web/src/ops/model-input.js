// A model given to createAdapter or extractAdapter, as the MergeBase they read: a local path (Node), a Hub repo or
// a URL (read by Range), or a MergeBase as given; and the name the config records for it, as the CLI's --base
// names it. One place, so both take a base the same way. Internal.
import { SafetensorsError } from '../errors.js';
import { openRemoteModel } from '../remote/remote.js';
import { isLocalPath, requireLocalFiles } from '../io/sources.js';

const INDEX_NAME = 'model.safetensors.index.json';

/** A local folder or file (Node) as the MergeBase mergeShards takes. */
export async function localBase(path) {
  const files = requireLocalFiles(path);
  const given = String(path);
  const join = (dir, name) => (dir.endsWith('/') ? dir + name : `${dir}/${name}`);
  let dir = given;
  let single = null;
  if (!(await files.isDirectory(given))) {
    const slash = given.lastIndexOf('/');
    dir = slash === -1 ? '.' : given.slice(0, slash);
    single = slash === -1 ? given : given.slice(slash + 1);
  }
  const text = async (name) =>
    (await files.isFile(join(dir, name))) ? new TextDecoder().decode(await files.readWhole(join(dir, name))) : null;
  const index = single === null ? await text(INDEX_NAME) : single.endsWith('.index.json') ? await text(single) : null;
  if (single === null && index === null && !(await files.isFile(join(dir, 'model.safetensors'))))
    throw new SafetensorsError(
      'IoError',
      `\`${given}\` has neither model.safetensors nor model.safetensors.index.json`,
    );
  const file = single !== null && index === null ? single : null;
  return { index, config: await text('config.json'), open: (name) => join(dir, file ?? name) };
}

/** Whether `v` is read remotely: a Hub repo {repo, revision?}, or a URL / string that is not a local path. */
export const isRemoteModel = (v) =>
  (typeof v === 'string' && !isLocalPath(v)) ||
  (typeof URL !== 'undefined' && v instanceof URL && !isLocalPath(v)) ||
  (!!v && typeof v === 'object' && typeof v.repo === 'string' && typeof v.open !== 'function');

/**
 * `given` as {model: MergeBase, name}: remote models are read through `reading` (remote.js's remoteReading, under
 * the key `${what}\0`); `api` names the caller in the TypeError for a value of no supported kind.
 */
export async function modelOf(given, what, reading, api) {
  if (isRemoteModel(given)) {
    const { base } = await openRemoteModel(given, reading, `${what}\u0000`);
    const repo = typeof given === 'object' && !(given instanceof URL) ? given : null;
    const name = repo
      ? `hf://${repo.repo}${repo.subfolder ? `/${repo.subfolder}` : ''}${repo.revision ? `@${repo.revision}` : ''}`
      : String(given);
    return { model: base, name };
  }
  if (typeof given === 'string' || (typeof URL !== 'undefined' && given instanceof URL))
    return { model: await localBase(given), name: String(given) };
  if (!given || typeof given !== 'object' || typeof given.open !== 'function')
    throw new TypeError(
      `peft-bridge: ${api}'s ${what} must be a MergeBase {open(name), index?, config?}, a Hub repo {repo, revision?}, a URL or, in Node, a local path`,
    );
  return { model: given, name: null };
}
