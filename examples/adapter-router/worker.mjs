// An edge router that serves LoRA adapters to inference servers (vLLM's load_lora_adapter, LoRAX, llama-server):
// a registry of adapters (id → Hub repo, revision, base, default scale) in a SQLite-backed Durable Object, and
// every adapter, or a per-request weighted composition of several, served in the format the engine loads. Tensor
// bytes come through one adapter cache per isolate (createAdapterCache): fetched by Range on first use, one request
// per module, held in an LRU bounded by CACHE_BUDGET_MB, so a worker serves many adapters larger in sum than its
// memory.
//
//   GET    /adapters                               the registry, and the cache's figures
//   POST   /adapters  {id, repo, revision?, base, scale?}   register: the adapter is read (headers and config only)
//                                                  and validated against its base; the commit read is pinned
//   GET    /adapters/{id}                          one entry
//   DELETE /adapters/{id}                          unregister
//   GET    /adapters/{id}/peft/adapter_config.json     the adapter as PEFT loads it (its scale folded into B,
//   GET    /adapters/{id}/peft/adapter_model.safetensors   r = lora_alpha so the runtime scaling is 1)
//   GET    /adapters/{id}/gguf                     a llama.cpp GGUF LoRA (llama-server --lora), ?outtype=f32|f16|bf16|q8_0
//   GET    /compose/peft/adapter_config.json?adapters=sql:0.7,chat:0.3      Σ scaleᵢ·sᵢ·Bᵢ·Aᵢ exactly, as one PEFT
//   GET    /compose/peft/adapter_model.safetensors?adapters=sql:0.7,chat:0.3  adapter (the cat form)
// Options: dtype=f32|bf16|f16 on the safetensors routes (default: the cache's, CACHE_DTYPE).
//
// Access: with ACCESS_SECRET set, every route needs `Authorization: Bearer <ACCESS_SECRET>` (HF_TOKEN, the Hub token
// the cache reads with, requires it: workerHubAccess). Without one, the registry is read-only and public adapters
// only are served. A registration reads from HF_ENDPOINT; its `endpoint` (the adapter's) or `base.endpoint` may name
// another server only if ALLOWED_ENDPOINTS lists it (workerEndpoint), and HF_TOKEN goes to HF_ENDPOINT only.
// Bindings (README.md has the defaults and why): REGISTRY (Durable Object namespace of AdapterRegistry),
// HF_ENDPOINT, HF_TOKEN, ACCESS_SECRET, ALLOWED_ENDPOINTS, CACHE_BUDGET_MB, CACHE_DTYPE, MAX_ADAPTERS, MAX_TERMS,
// MAX_RANK, MAX_RESPONSE_MB, MAX_ACTIVE, SLOT_WAIT_MS, RESPONSE_DEADLINE_MS, STALL_MS.
import { DurableObject } from 'cloudflare:workers';
import wasmModule from 'peft-bridge/peft_bridge_wasm.wasm';
import { init, openRemote, SafetensorsError, translateAdapter } from 'peft-bridge';
import { createAdapterCache, inOwnRequest, workerEndpoint, workerErrorStatus, workerHubAccess } from 'peft-bridge/edge';

/** The registry: one SQLite-backed object holds every entry, so all isolates and regions see one list. */
export class AdapterRegistry extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(`CREATE TABLE IF NOT EXISTS adapters (
      id TEXT PRIMARY KEY, repo TEXT NOT NULL, revision TEXT NOT NULL, base TEXT NOT NULL,
      base_revision TEXT NOT NULL, scale REAL NOT NULL, registered_at TEXT NOT NULL)`);
    // Servers other than HF_ENDPOINT (ALLOWED_ENDPOINTS): null for HF_ENDPOINT. Added to a registry made before.
    for (const column of ['endpoint', 'base_endpoint']) {
      try {
        this.sql.exec(`ALTER TABLE adapters ADD COLUMN ${column} TEXT`);
      } catch {
        // the column exists
      }
    }
  }

  count() {
    return this.sql.exec('SELECT COUNT(*) AS n FROM adapters').one().n;
  }

  list() {
    return this.sql.exec('SELECT * FROM adapters ORDER BY id').toArray().map(entryOf);
  }

  get(id) {
    const rows = this.sql.exec('SELECT * FROM adapters WHERE id = ?', id).toArray();
    return rows.length ? entryOf(rows[0]) : null;
  }

  put(e) {
    this.sql.exec(
      `INSERT OR REPLACE INTO adapters (id, repo, revision, base, base_revision, scale, registered_at, endpoint, base_endpoint)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      e.id, e.repo, e.revision, e.base.repo, e.base.revision, e.scale, e.registeredAt, e.endpoint ?? null, e.base.endpoint ?? null,
    );
  }

  remove(id) {
    const existed = this.get(id) !== null;
    this.sql.exec('DELETE FROM adapters WHERE id = ?', id);
    return existed;
  }
}

const entryOf = (r) => ({
  id: r.id,
  repo: r.repo,
  revision: r.revision,
  ...(r.endpoint ? { endpoint: r.endpoint } : {}),
  base: { repo: r.base, revision: r.base_revision, ...(r.base_endpoint ? { endpoint: r.base_endpoint } : {}) },
  scale: r.scale,
  registeredAt: r.registered_at,
});

/** A positive whole-number binding, or its default (a bad value fails every request: WorkerMisconfigured). */
function setting(env, name, fallback) {
  const text = env[name];
  if (text === undefined || text === '') return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n <= 0) {
    const error = new Error(`${name} must be a positive whole number, got \`${text}\``);
    error.code = 'WorkerMisconfigured';
    throw error;
  }
  return n;
}

const hubOf = (env) => env.HF_ENDPOINT || 'https://huggingface.co';

/**
 * Where an entry's adapter and base are read: {adapter, base}, each {endpoint, own} (workerEndpoint: HF_ENDPOINT, or
 * a server ALLOWED_ENDPOINTS lists, checked again at every use, so removing one from the list stops its entries).
 */
async function endpointsOf(env, entry) {
  const worker = { endpoint: hubOf(env), allowed: env.ALLOWED_ENDPOINTS };
  return { adapter: await workerEndpoint(entry.endpoint, worker), base: await workerEndpoint(entry.base?.endpoint, worker) };
}

/** The cache's registration spec of an entry: another server than HF_ENDPOINT is read without HF_TOKEN. */
async function specOf(env, entry) {
  const at = await endpointsOf(env, entry);
  // '': no token (the cache's own rule too: its token goes to its endpoint only)
  const where = (e) => ({ endpoint: e.endpoint, ...(e.own ? {} : { token: '' }) });
  return { repo: entry.repo, revision: entry.revision, ...where(at.adapter), base: { repo: entry.base.repo, revision: entry.base.revision, ...where(at.base) } };
}

// One cache per isolate, shared by its requests (workerd runs many requests in one isolate).
let cache = null;
const registering = new Map(); // id@revision → the registration in flight or done, shared by concurrent requests

function cacheFor(env) {
  if (cache?.discarded) {
    // A trap inside the WebAssembly module (a failure of ours, never an input error) discarded the instance the
    // cache's registrations lived in: a new cache, registered again from the registry as requests need them, so
    // that one failing request does not fail every later one.
    cache = null;
    registering.clear();
  }
  cache ??= createAdapterCache({
    budgetBytes: setting(env, 'CACHE_BUDGET_MB', 64) * 2 ** 20,
    endpoint: hubOf(env),
    token: env.HF_TOKEN || undefined,
    dtype: env.CACHE_DTYPE || 'f32',
    // The bounds of a composition (the core's rule, CompositionLimits): terms, rank, the weights file's size.
    maxTerms: setting(env, 'MAX_TERMS', 8),
    maxRank: setting(env, 'MAX_RANK', 512),
    maxComposeBytes: setting(env, 'MAX_RESPONSE_MB', 256) * 2 ** 20,
    maxRegistrations: setting(env, 'MAX_ADAPTERS', 64),
  });
  return cache;
}

/** Registers `entry` in this isolate's cache (once per id and revision): registry entries outlive isolates. */
function ensureRegistered(env, entry) {
  const key = `${entry.id}@${entry.revision}`;
  let p = registering.get(key);
  if (!p) {
    p = specOf(env, entry).then((spec) => cacheFor(env).register(entry.id, spec));
    registering.set(key, p);
    p.catch(() => registering.delete(key));
  }
  return inOwnRequest(p); // another request's registration: resume in this request's context
}

const registry = (env) => env.REGISTRY.get(env.REGISTRY.idFromName('registry'));
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export default {
  async fetch(request, env) {
    try {
      await init({ wasmModule }); // compiled at deploy time: workers may not compile WebAssembly at run time
      const { trusted } = workerHubAccess(request, { token: env.HF_TOKEN, secret: env.ACCESS_SECRET });
      if (env.ACCESS_SECRET && !trusted) return json(401, failure('Unauthorized', 'this router needs `Authorization: Bearer <ACCESS_SECRET>`'));
      const url = new URL(request.url);
      let parts;
      try {
        parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
      } catch {
        return json(400, failure('InvalidArgument', `the path \`${url.pathname.slice(0, 200)}\` has a malformed percent-encoding`));
      }
      const method = request.method;
      if (parts[0] === 'adapters') {
        if (parts.length === 1 && method === 'GET') return json(200, { adapters: await registry(env).list(), cache: cacheFor(env).stats() });
        if (parts.length === 1 && method === 'POST') return await register(request, env, trusted);
        const entry = await registry(env).get(parts[1] ?? '');
        if (!entry) return json(404, failure('NotFound', `no adapter \`${parts[1]}\` is registered`));
        if (parts.length === 2 && method === 'GET') return json(200, entry);
        if (parts.length === 2 && method === 'DELETE') {
          if (!trusted) return json(403, failure('Forbidden', 'unregistering needs ACCESS_SECRET'));
          await registry(env).remove(entry.id);
          registering.delete(`${entry.id}@${entry.revision}`);
          cacheFor(env).unregister(entry.id);
          return json(200, { ok: true, removed: entry.id });
        }
        if (method !== 'GET') return json(405, failure('MethodNotAllowed', `${method} ${url.pathname}`));
        if (parts[2] === 'peft' && parts.length === 4) return await servePeft(env, [{ entry, scale: entry.scale }], parts[3], url, request);
        if (parts[2] === 'gguf' && parts.length === 3) return await serveGguf(env, entry, url);
      }
      if (parts[0] === 'compose' && parts[1] === 'peft' && parts.length === 3 && method === 'GET')
        return await servePeft(env, await composition(env, url.searchParams.get('adapters')), parts[2], url, request);
      return json(404, failure('NotFound', 'see the routes at the top of examples/adapter-router/worker.mjs'));
    } catch (error) {
      return errorResponse(error);
    }
  },
};

/** POST /adapters: validate against the base (headers and configs only) and pin the commits read. */
async function register(request, env, trusted) {
  if (!trusted) return json(403, failure('Forbidden', 'registering needs ACCESS_SECRET (the router holds none: set one to allow it)'));
  let body;
  try {
    body = await request.json();
  } catch {
    return json(400, failure('InvalidArgument', 'the body must be JSON: {id, repo, revision?, base, scale?}'));
  }
  const { id, repo, revision = 'main', scale = 1, endpoint } = body ?? {};
  const given = typeof body?.base === 'string' ? { repo: body.base } : (body?.base ?? {});
  if (typeof id !== 'string' || !ID.test(id)) return json(400, failure('InvalidArgument', '`id` must be 1-64 letters, digits, `.`, `_` or `-`'));
  if (typeof repo !== 'string' || typeof given.repo !== 'string')
    return json(400, failure('InvalidArgument', '`repo` and `base` (a repo id or {repo, revision?, endpoint?}) are required'));
  if (typeof scale !== 'number' || !Number.isFinite(scale)) return json(400, failure('InvalidArgument', '`scale` must be a finite number'));
  // Only the fields read: anything else in `base` (a token...) is not passed on.
  const proposed = { id, repo, revision, endpoint, base: { repo: given.repo, revision: given.revision ?? 'main', endpoint: given.endpoint } };
  const at = await endpointsOf(env, proposed); // InvalidArgument (400) for a server ALLOWED_ENDPOINTS does not list
  const max = setting(env, 'MAX_ADAPTERS', 64);
  if (!(await registry(env).get(id)) && (await registry(env).count()) >= max)
    return json(507, failure('LimitExceeded', `the registry holds ${max} adapters, its maximum (MAX_ADAPTERS): unregister one first`));
  const c = cacheFor(env);
  const info = await c.register(id, await specOf(env, proposed));
  const entry = {
    id,
    repo,
    revision: info.revision ?? revision, // the commit read: every later fetch reads the same files
    ...(at.adapter.own ? {} : { endpoint: at.adapter.endpoint }),
    base: { repo: given.repo, revision: info.plan?.revision ?? proposed.base.revision, ...(at.base.own ? {} : { endpoint: at.base.endpoint }) },
    scale,
    registeredAt: new Date().toISOString(),
  };
  registering.set(`${id}@${entry.revision}`, Promise.resolve(info));
  await registry(env).put(entry);
  return json(201, { ...entry, format: info.format, modules: info.modules });
}

/** `adapters=sql:0.7,chat:0.3` (a missing scale is the entry's default) → [{entry, scale}]. */
async function composition(env, text) {
  if (!text) throw new SafetensorsError('InvalidArgument', 'say which adapters: ?adapters=id[:scale],id[:scale]...');
  const items = text.split(',');
  await cacheFor(env).checkTerms(items.length); // MAX_TERMS (the core's rule), before any look-up
  const out = [];
  for (const item of items) {
    const m = /^([^:]+)(?::(.+))?$/.exec(item.trim());
    const entry = m && (await registry(env).get(m[1]));
    if (!entry) throw new SafetensorsError('InvalidArgument', `no adapter \`${m?.[1] ?? item}\` is registered`);
    const scale = m[2] === undefined ? entry.scale : Number(m[2]);
    if (!Number.isFinite(scale)) throw new SafetensorsError('InvalidArgument', `the scale of \`${entry.id}\` is not a number: \`${m[2]}\``);
    out.push({ entry, scale });
  }
  return out;
}

/**
 * A PEFT adapter directory's file for Σ scaleᵢ·sᵢ·Bᵢ·Aᵢ over `parts`: `combine --method cat`'s layout and config,
 * the weights streamed module by module, each composed through the cache when the response reaches it (memory: one
 * module's factors, plus the cache). The composition is bounded by MAX_TERMS, MAX_RANK and MAX_RESPONSE_MB (400 / 413).
 */
async function servePeft(env, parts, file, url, request) {
  const c = cacheFor(env);
  await Promise.all(parts.map(({ entry }) => ensureRegistered(env, entry)));
  const list = parts.map(({ entry, scale }) => ({ id: entry.id, scale }));
  const composed = await c.composeAdapter(list, { dtype: url.searchParams.get('dtype') ?? undefined });
  if (file === 'adapter_config.json') return new Response(composed.config, { headers: { 'Content-Type': 'application/json' } });
  if (file !== composed.weightsName) return json(404, failure('NotFound', `a PEFT adapter has adapter_config.json and ${composed.weightsName}`));
  const slot = await takeSlot(env, request);
  if (!slot) {
    const wait = setting(env, 'SLOT_WAIT_MS', 30_000);
    return json(503, failure('Busy', `every one of the ${setting(env, 'MAX_ACTIVE', 4)} slots (MAX_ACTIVE) stayed busy for ${wait} ms (SLOT_WAIT_MS): retry later`), {
      'Retry-After': String(Math.max(1, Math.ceil(wait / 1000))),
    });
  }
  return fixedLength(gated(env, slot, () => composed.stream()), composed.size, composed.weightsName);
}

// At most MAX_ACTIVE weights files are produced at once (default 4); later requests wait for a slot, at most
// SLOT_WAIT_MS (then 503). Each one in production holds a module's factors and its writer's buffers besides the shared
// cache, so this bounds the isolate's memory whatever the number of concurrent requests (the load test:
// tests/js/adapter-router.test.mjs). A slot is held until its response body is done, and no longer than
// RESPONSE_DEADLINE_MS, nor than STALL_MS while the client reads nothing (a client that never reads would hold it
// forever), nor once the client has gone: then the body is ended with an error and the slot released.
// A waiting request polls a timer of its own: woken by the request that releases a slot, it would run (and fetch)
// in that request's context, which workerd ends with it (see inOwnRequest in web/src/edge/adapter-cache.js).
let active = 0;

/** A slot ({release()}), or null when none came free within SLOT_WAIT_MS (or the client left meanwhile). */
async function takeSlot(env, request) {
  const limit = setting(env, 'MAX_ACTIVE', 4);
  const until = Date.now() + setting(env, 'SLOT_WAIT_MS', 30_000);
  while (active >= limit) {
    if (Date.now() >= until || request.signal?.aborted) return null;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  active += 1;
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      active -= 1;
    },
  };
}

function gated(env, slot, open) {
  const deadline = setting(env, 'RESPONSE_DEADLINE_MS', 300_000);
  const stall = setting(env, 'STALL_MS', 30_000);
  let reader;
  try {
    reader = open().getReader();
  } catch (error) {
    slot.release();
    throw error;
  }
  let stallTimer = null;
  let deadlineTimer = null;
  const finish = () => {
    clearTimeout(stallTimer);
    clearTimeout(deadlineTimer);
    slot.release();
  };
  let controller;
  const giveUp = (why) => {
    finish();
    const error = new Error(why);
    reader.cancel(error).catch(() => {});
    try {
      controller.error(error);
    } catch {
      // already closed
    }
    console.error(why);
  };
  // STALL_MS counts from the last time the client took a chunk (the stream pulls only when it does).
  const armStall = () => {
    clearTimeout(stallTimer);
    stallTimer = setTimeout(() => giveUp(`the client read nothing for ${stall} ms (STALL_MS): the response was ended`), stall);
  };
  return new ReadableStream(
    {
      start(c) {
        controller = c;
        deadlineTimer = setTimeout(() => giveUp(`the response took more than ${deadline} ms (RESPONSE_DEADLINE_MS): it was ended`), deadline);
        armStall();
      },
      async pull(c) {
        clearTimeout(stallTimer);
        try {
          const { done, value } = await reader.read();
          if (done) {
            finish();
            c.close();
          } else {
            c.enqueue(value);
            armStall();
          }
        } catch (error) {
          finish();
          throw error;
        }
      },
      async cancel(reason) {
        finish(); // the client went away
        await reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

/** A GGUF LoRA for llama-server: the core translates the adapter (read by Range), with the base's head counts. */
async function serveGguf(env, entry, url) {
  const spec = await specOf(env, entry);
  const reading = { endpoint: spec.endpoint, token: spec.token ?? (env.HF_TOKEN || undefined) };
  const r = await translateAdapter(
    { repo: entry.repo, revision: entry.revision },
    { to: 'gguf', outtype: url.searchParams.get('outtype') ?? undefined, baseConfig: await baseConfig(spec.base, env), ...reading },
  );
  const file = r.files.find((f) => f.name.endsWith('.gguf'));
  return new Response(file.bytes, {
    headers: { 'Content-Type': 'application/octet-stream', 'Content-Length': String(file.bytes.length), 'Content-Disposition': `attachment; filename="${entry.id}.gguf"` },
  });
}

/** The base's config.json text (llama.cpp's q/k row order needs its head counts), or null when it has none. */
async function baseConfig(base, env) {
  const reading = { endpoint: base.endpoint, token: base.token ?? (env.HF_TOKEN || undefined) };
  let file;
  try {
    file = await openRemote({ repo: base.repo, revision: base.revision, path: 'config.json', ...reading }, reading);
    return new TextDecoder().decode(await file.read(0, file.size));
  } catch (error) {
    if (error?.status === 404) return null;
    throw error;
  } finally {
    await file?.close();
  }
}

/** A response of a known size: a stream that fails midway ends it short of Content-Length, which clients see. */
function fixedLength(stream, size, name) {
  let body = stream;
  if (typeof FixedLengthStream === 'function') {
    const fixed = new FixedLengthStream(size);
    stream.pipeTo(fixed.writable).catch((error) => console.error(`${name} failed: ${error?.message ?? error}`));
    body = fixed.readable;
  }
  return new Response(body, { headers: { 'Content-Type': 'application/octet-stream', 'Content-Length': String(size) } });
}

const failure = (code, message) => ({ ok: false, error: { code, message } });

function errorResponse(error) {
  return json(workerErrorStatus(error), { ok: false, error: { code: error?.code ?? error?.name ?? 'Error', message: String(error?.message ?? error) } });
}

const json = (status, value, headers = {}) =>
  new Response(`${JSON.stringify(value)}\n`, { status, headers: { 'Content-Type': 'application/json', ...headers } });
