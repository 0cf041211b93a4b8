// A model chosen in a picker fieldset (the Extract and Create sections): local files (`.model-files`) when any are
// chosen, else a Hub repo id (`.model-repo`) and revision (`.model-revision`), as extractAdapter and createAdapter
// take a model. The files become a MergeBase read by Blob.slice; the repo is read by Range.

/**
 * The model `box` holds: a MergeBase over the chosen Files, or {repo, revision?}. `what` names it in the one
 * message this page words itself (nothing chosen at all).
 * @param {HTMLElement} box
 * @param {string} what
 */
export async function pickedModel(box, what) {
  const files = [...box.querySelector('.model-files').files];
  if (files.length) {
    const shards = files.filter((f) => /\.safetensors$/i.test(f.name));
    const named = (name) => files.find((f) => f.name === name);
    const bytes = async (f) => (f ? new Uint8Array(await f.arrayBuffer()) : null);
    const index = named('model.safetensors.index.json');
    return {
      index: await bytes(index),
      config: await bytes(named('config.json')),
      // One file is the model whatever its name; the index names its shards (the core checks them).
      open: (name) => {
        const file = index ? named(name) : shards.length === 1 ? shards[0] : null;
        if (!file)
          throw new Error(
            index
              ? `${name} (listed in the index) was not chosen`
              : 'choose one .safetensors file, or the shards and their index',
          );
        return file;
      },
    };
  }
  const repo = box.querySelector('.model-repo').value.trim();
  if (!repo) throw new Error(`${what}: give a repo id or choose files`);
  const revision = box.querySelector('.model-revision').value.trim();
  return revision ? { repo, revision } : { repo };
}
