// A Cloudflare-style module worker that merges a LoRA adapter into a model on the Hugging Face Hub, one output
// file per request: N requests (on N machines) merge N shards at once, each holding a few MiB, never a model.
//
//   GET /merge?base=<owner/repo | url>&adapter=<owner/repo>&shard=<name>   the merged shard (or the index,
//                                                                          config.json, or a base file the merge
//                                                                          copies - tokenizer.json... - by name)
//   GET /index?base=…&adapter=…                                            model.safetensors.index.json
//   GET /plan?base=…&adapter=…                                             the plan (JSON): modules, files, revision
// /plan's `outputs` are the folder `peft-bridge merge` writes: the merged shards, the index, config.json and the
// base repo's other files (tokenizer, generation config...: the core's rule, as the CLI copies them).
// Options: revision, adapter_revision, dtype (bf16|f16|f32), unmerge=1, safe=1, arch.
// Pass /plan's `revision` to every /merge and /index request so that all read the same commit.
//
// Bindings (env): HF_ENDPOINT (text, default https://huggingface.co); HF_TOKEN (secret, optional) and ACCESS_SECRET
// (secret, required with HF_TOKEN): the worker's token is used only for requests carrying
// `Authorization: Bearer <ACCESS_SECRET>`; another bearer value is the caller's own Hub token; none is anonymous.
import wasmModule from 'peft-bridge/peft_bridge_wasm.wasm';
import { init, mergeRemoteIndex, mergeRemoteShard, planRemote, SafetensorsError } from 'peft-bridge';
import { workerErrorStatus, workerHubAccess } from 'peft-bridge/edge';

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (request.method !== 'GET') return json(405, { ok: false, error: { code: 'MethodNotAllowed', message: 'GET only' } });
    try {
      // Workers may not compile WebAssembly at run time: the module was compiled at deploy time (a .wasm import).
      await init({ wasmModule });
      const options = mergeOptions(url.searchParams, request, env);
      if (url.pathname === '/merge') return fileResponse(await mergeRemoteShard({ ...options, shard: url.searchParams.get('shard') ?? undefined }));
      if (url.pathname === '/index') {
        const index = await mergeRemoteIndex(options);
        if (index === null) return json(404, { ok: false, error: { code: 'NotFound', message: 'the base is one file: it has no index' } });
        return new Response(index, { headers: { 'Content-Type': 'application/json' } });
      }
      if (url.pathname === '/plan') return json(200, await planRemote(options));
      return json(404, { ok: false, error: { code: 'NotFound', message: 'GET /merge, /index or /plan' } });
    } catch (error) {
      return errorResponse(error);
    }
  },
};

function mergeOptions(params, request, env) {
  const endpoint = env.HF_ENDPOINT || 'https://huggingface.co';
  const required = (name) => {
    const value = params.get(name);
    if (!value) throw new SafetensorsError('InvalidArgument', `missing query parameter \`${name}\``);
    return value;
  };
  const base = required('base');
  if (/^https?:/i.test(base) && new URL(base).origin !== new URL(endpoint).origin) {
    // Fetching any URL a caller names would make the worker an open proxy (and could send it the token).
    throw new SafetensorsError('InvalidArgument', `a base URL must be on ${new URL(endpoint).origin}`);
  }
  const { token } = workerHubAccess(request, { token: env.HF_TOKEN, secret: env.ACCESS_SECRET });
  return {
    base: /^https?:/i.test(base) ? base : { repo: base, revision: params.get('revision') ?? undefined },
    adapter: { repo: required('adapter'), revision: params.get('adapter_revision') ?? undefined },
    endpoint,
    token,
    dtype: params.get('dtype') ?? undefined,
    unmerge: params.get('unmerge') === '1',
    safe: params.get('safe') === '1',
    arch: params.get('arch') ?? undefined,
  };
}

function fileResponse(file) {
  const headers = {
    'Content-Type': file.path.endsWith('.json') ? 'application/json' : 'application/octet-stream',
    'Content-Disposition': `attachment; filename="${file.path.replace(/["\\]/g, '_')}"`,
    'Content-Length': String(file.size),
  };
  let body = file.stream;
  if (typeof FixedLengthStream === 'function') {
    // The size is known from the plan: with a fixed length, a merge that fails midway (the file changed on the
    // Hub, the network gave up) ends the response short, which every client sees as a failed download.
    const fixed = new FixedLengthStream(file.size);
    file.stream.pipeTo(fixed.writable).catch((error) => console.error(`merge of ${file.path} failed: ${error?.message ?? error}`));
    body = fixed.readable;
  }
  return new Response(body, { headers });
}

function errorResponse(error) {
  return json(workerErrorStatus(error), { ok: false, error: { code: error?.code ?? error?.name ?? 'Error', message: String(error?.message ?? error) } });
}

const json = (status, value) => new Response(`${JSON.stringify(value)}\n`, { status, headers: { 'Content-Type': 'application/json' } });
