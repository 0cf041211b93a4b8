// The adapter cache (docs/adapter-cache.md): LoRA adapters registered from the Hub (or any server hub.js reads),
// their headers and configs read at registration and checked against a declared base as `merge --dry-run` checks
// them; each module's factors fetched on first use as one Range request, converted once to the dtype asked for, and
// kept in an LRU bounded by `budgetBytes`; per-request compositions of several adapters in the exact cat form.
// Which module a name means, the byte span of its factors, the conversion, the composition and the merge kernel
// are the core's (src/compose/lora_serving.h, wasm/cache_bindings.cc); this file fetches, counts and evicts.
// Nothing here is Node-only: it runs in Node, browsers and workerd, with the `fetch` given or the global one.
import { SafetensorsError, errorFromHandle, throwIfAborted } from '../errors.js';
import { NativeHandle, concat } from '../handles.js';
import { getModule, trapOf } from '../init.js';
import { ModuleDiscarded } from '../module-guard.js';
import { configText, readAdapterHeader, withBytes } from '../ops/adapter.js';
import { openAdapterDirectory } from '../ops/adapter-dir.js';
import { openAdapterSource, readRange } from '../ops/adapter-source.js';
import { LIMIT_OPTIONS } from '../remote/range-client.js';
import { planRemote } from '../remote/remote.js';
import { defaultEndpoint, openFile } from '../remote/hub.js';
import { raceAbort } from '../io/sources.js';
import { writeSafetensors } from '../io/writer.js';

const DTYPES = new Set(['f32', 'bf16', 'f16']);
const HEADER_STEPS = { length: 'adapterHeaderLength', header: 'setAdapterHeader', ranges: 'adapterInlineRanges' };

const invalid = (message) => new SafetensorsError('InvalidArgument', message);

const IN_WORKERD = globalThis.navigator?.userAgent === 'Cloudflare-Workers';

// Registrations live outside the byte budget (each holds its adapter's header, config, first 64 KiB and the
// core's reading of them: docs/adapter-cache.md measures them), so their number is bounded instead.
const DEFAULT_MAX_REGISTRATIONS = 256;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `promise`, settled in the caller's request. workerd runs what follows a promise another request settled in that
 * other request's context, so a request waiting for a fetch another one shares would make its own I/O (its next
 * reads, its response) on behalf of that request, and lose it when that request ends (tests/js/adapter-router.test.mjs,
 * staggered requests). There the wait polls a timer of its own instead; elsewhere it is the promise itself.
 */
export async function inOwnRequest(promise) {
  if (!IN_WORKERD) return promise;
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  while (!settled) await sleep(1);
  return promise;
}

function checkDtype(dtype) {
  if (!DTYPES.has(dtype)) throw new TypeError("peft-bridge: dtype must be 'f32', 'bf16' or 'f16'");
  return dtype;
}

/**
 * Creates an adapter cache. Options: `budgetBytes` (required: the most bytes of converted factors, and of fetches in
 * flight, held at once), `dtype` ('f32' default, 'bf16', 'f16'), `base` (the declared base every adapter is
 * checked against unless its registration names its own), and the reading options of openRemote (`endpoint`,
 * `token`, `fetch`, the HTTP policy's limits, `http`).
 */
export function createAdapterCache(options = {}) {
  return new AdapterCache(options);
}

export class AdapterCache {
  constructor(options = {}) {
    if (!options || typeof options !== 'object')
      throw new TypeError('peft-bridge: createAdapterCache options must be an object');
    const budget = options.budgetBytes;
    if (!Number.isSafeInteger(budget) || budget <= 0)
      throw new TypeError('peft-bridge: budgetBytes must be a positive integer');
    this.budget = budget;
    this.dtype = checkDtype(options.dtype ?? 'f32');
    this.base = options.base ?? null;
    this.reading = {
      token: options.token ?? options.accessToken,
      endpoint: options.endpoint ?? options.hubUrl,
      fetch: options.fetch,
      http: options.http,
    };
    for (const name of Object.keys(LIMIT_OPTIONS)) if (options[name] !== undefined) this.reading[name] = options[name];
    this.adapters = new Map(); // id -> registration
    this.registering = new Map(); // id -> the latest register() call's promise
    this.entries = new Map(); // key -> {cost, value, id}, least recently used first
    this.inflight = new Map(); // key -> promise of the value
    this.resident = 0; // bytes of the entries
    this.reserved = 0; // bytes of fetches in flight (their span and their converted factors)
    this.waiters = [];
    this.math = null;
    // The WebAssembly instance the registrations and the math live in (module-guard.js): once it is discarded
    // after a trap, every call fails with ModuleDiscarded; `discarded` tells the owner to make a new cache.
    this.instance = null;
    this.counts = {
      hits: 0,
      misses: 0,
      shared: 0,
      evictions: 0,
      invalidated: 0,
      bytesFetched: 0,
      spanReads: 0,
      peak: 0,
    };
    // The bounds of a composition (the core's CompositionLimits; unset: its defaults).
    this.limits = {};
    for (const name of ['maxTerms', 'maxRank', 'maxComposeBytes']) {
      const v = options[name];
      if (v === undefined) continue;
      if (!Number.isSafeInteger(v) || v <= 0) throw new TypeError(`peft-bridge: ${name} must be a positive integer`);
      this.limits[name] = v;
    }
    const max = options.maxRegistrations;
    if (max !== undefined && (!Number.isSafeInteger(max) || max <= 0))
      throw new TypeError('peft-bridge: maxRegistrations must be a positive integer');
    this.maxRegistrations = max ?? DEFAULT_MAX_REGISTRATIONS;
  }

  /** True once the WebAssembly instance this cache's native state lives in was discarded after a trap. */
  get discarded() {
    return this.instance !== null && trapOf(this.instance) !== null;
  }

  /** The module to make native state with: the cache's instance (ModuleDiscarded once it is gone). */
  async nativeModule() {
    if (this.discarded) throw new ModuleDiscarded(trapOf(this.instance));
    const module = await getModule();
    this.instance ??= module;
    // A new instance while this cache holds state of the old one (discarded meanwhile): the same precise failure.
    if (module !== this.instance) throw new ModuleDiscarded(trapOf(this.instance));
    return module;
  }

  /** The limits args of the core's setLimits: maxTerms, maxRank, maxComposeBytes (0: the core's default). */
  limitArgs() {
    return [this.limits.maxTerms ?? 0, this.limits.maxRank ?? 0, this.limits.maxComposeBytes ?? 0];
  }

  /** {maxTerms, maxRank, maxComposeBytes, maxRegistrations}: the bounds this cache applies. */
  async bounds() {
    const module = await getModule(); // a pure function of the limits: no state of the cache's
    return { ...JSON.parse(module.compositionLimits(...this.limitArgs())), maxRegistrations: this.maxRegistrations };
  }

  /**
   * Refuses, before anything is read, a composition of `terms` adapters (the core's rule: InvalidArgument above
   * maxTerms). composeAdapter and compose check it themselves; a caller that looks adapters up first (the edge
   * router) checks here.
   */
  async checkTerms(terms) {
    const math = await this.mathHandle();
    if (!math.handle.checkTerms(terms)) throw errorFromHandle(math.handle);
  }

  /**
   * Registers (or re-registers) adapter `id`: a Hub repo {repo, revision?, subfolder?, endpoint?, token?, base?}.
   * Reads the folder listing, adapter_config.json and the weights' header (Range), and, when a base is declared
   * (here or in the cache's options), the base's index, config.json and shard headers, failing with the errors of
   * `merge --dry-run`. Registering an id again replaces it; if the weights' ETag changed, its cached modules go.
   * Of overlapping register() calls for one id the last decides: an earlier one's result is discarded, and if the
   * last fails the id keeps the registration it had before.
   */
  async register(id, spec) {
    if (typeof id !== 'string' || id === '')
      throw new TypeError('peft-bridge: an adapter id must be a non-empty string');
    if (!spec || typeof spec !== 'object' || typeof spec.repo !== 'string')
      throw new TypeError('peft-bridge: register(id, {repo, revision?, base?}) needs a Hub repo');
    if (
      !this.adapters.has(id) &&
      !this.registering.has(id) &&
      this.adapters.size + this.registering.size >= this.maxRegistrations
    )
      throw new SafetensorsError(
        'LimitExceeded',
        `cannot register \`${id}\`: the cache holds ${this.maxRegistrations} adapters, its maximum (maxRegistrations); unregister one first`,
      );
    const call = this.registerNow(id, spec);
    this.registering.set(id, call);
    try {
      const reg = await call;
      if (this.registering.get(id) !== call) {
        // A later register() of the same id is running: it decides what stays.
        if (this.adapters.get(id) !== reg) await closeRegistration(reg);
        return describe(reg);
      }
      this.install(id, reg);
      return describe(reg);
    } finally {
      if (this.registering.get(id) === call) this.registering.delete(id);
    }
  }

  async registerNow(id, spec) {
    const { signal } = spec;
    throwIfAborted(signal);
    const ro = { ...this.reading, signal };
    const module = await this.nativeModule();
    // The cache's token goes to the cache's endpoint only: an address naming another server reads with its own
    // token, or none ('' is "no token" to the HTTP policy).
    const home = module.urlOrigin(String(this.reading.endpoint ?? defaultEndpoint()));
    const tokenFor = (address, inherited) => {
      if (address.token !== undefined) return address.token;
      if (address.endpoint === undefined) return inherited;
      const origin = module.urlOrigin(String(address.endpoint));
      return origin !== '' && origin === home ? this.reading.token : ''; // two unreadable endpoints are not one
    };
    const address = {
      repo: spec.repo,
      revision: spec.revision,
      subfolder: spec.subfolder,
      endpoint: spec.endpoint,
      token: tokenFor(spec, undefined),
    };
    const label = `hf://${spec.repo}${spec.subfolder ? `/${spec.subfolder}` : ''}`;
    const dir = await openAdapterDirectory(address, ro);
    let handle = null;
    try {
      let base = spec.base === undefined ? this.base : spec.base;
      // A base without an endpoint of its own is read where the adapter is, with the adapter's token.
      if (base && typeof base === 'object' && !(base instanceof URL))
        base = { ...base, token: tokenFor(base, address.token) };
      let plan = null;
      if (base) {
        // The merge's own plan from headers only: the errors are merge --dry-run's.
        const { revision, adapterRevision, ...summary } = await planRemote({
          ...ro,
          endpoint: spec.endpoint ?? ro.endpoint,
          token: address.token ?? ro.token,
          base,
          adapter: { weights: dir.weights, config: dir.config, weightsName: dir.weightsName },
        });
        plan = {
          revision,
          modulesMatched: summary.modulesMatched,
          tensorsMerged: summary.tensorsMerged,
          arch: summary.arch,
          notes: summary.notes,
        };
      }
      handle = new NativeHandle(module, new module.ServedAdapter());
      const src = await openAdapterSource(dir.weights, signal);
      const inline = await readAdapterHeader(handle, src, dir.weightsName, HEADER_STEPS, signal);
      if (!withBytes(handle, 'load', inline, label, dir.weightsName, configText(dir.config, 'adapter config'), null))
        throw errorFromHandle(handle.handle);
      const { format, modules } = JSON.parse(handle.handle.modules());
      return {
        id,
        spec: { ...spec, signal: undefined }, // for refresh(); the signal was this call's
        label,
        dir,
        src,
        handle,
        format,
        modules,
        resolved: new Map(),
        active: 0, // fetches running
        closing: false,
        revision: dir.revision,
        etag: dir.weights.etag ?? null,
        // Entries are keyed by the weights' ETag (the file's content), else the commit read.
        version: dir.weights.etag ?? dir.revision ?? '',
        plan,
      };
    } catch (error) {
      handle?.close();
      await dir.close();
      throw error;
    }
  }

  install(id, reg) {
    const old = this.adapters.get(id);
    this.adapters.set(id, reg);
    if (!old) return;
    if (old.version !== reg.version) this.drop(id, old.version);
    closeRegistration(old).catch(() => {});
  }

  /** Drops the entries of adapter `id` (at `version`, or every version). */
  drop(id, version) {
    for (const [key, entry] of this.entries) {
      if (entry.id === id && (version === undefined || entry.version === version)) {
        this.entries.delete(key);
        this.resident -= entry.cost;
        this.counts.invalidated += 1;
      }
    }
    this.wake();
  }

  /** Registers `id` again with the same spec: a branch that moved, or a file with a new ETag, replaces its entries. */
  async refresh(id) {
    const reg = this.registration(id);
    const before = reg.version;
    const info = await this.register(id, reg.spec);
    return { ...info, changed: info.etag !== reg.etag || this.adapters.get(id).version !== before };
  }

  /** Forgets adapter `id` and its cached modules (fetches in flight for it land nowhere). False if it was not registered. */
  async unregister(id) {
    const reg = this.adapters.get(id);
    if (!reg) return false;
    this.adapters.delete(id);
    this.drop(id);
    await closeRegistration(reg);
    return true;
  }

  registration(id) {
    const reg = this.adapters.get(id);
    if (!reg) throw invalid(`no adapter is registered as \`${id}\``);
    return reg;
  }

  /** The registered adapter's facts: {id, repo, revision, etag, format, modules: [{name, kind, rank, alpha, scaling, aShape, bShape, sourceDtype, span, bytes}], plan}. */
  info(id) {
    const reg = this.registration(id);
    return { ...describe(reg), modules: reg.modules };
  }

  resolve(reg, name, required = true) {
    const known = reg.resolved.get(name);
    if (known !== undefined) return known;
    const text = reg.handle.handle.resolve(String(name), required);
    if (text === '') throw errorFromHandle(reg.handle.handle);
    const info = JSON.parse(text);
    if (info !== null) reg.resolved.set(name, info);
    return info;
  }

  /**
   * One module's factors: {id, name, A, B, shapes: {A, B}, rank, alpha, scaling, dtype, sourceDtype, kind}. A and B
   * are Uint8Arrays of little-endian values in `dtype` (read-only: the cache holds the same arrays). The first call
   * fetches the module's span with one Range request; later calls are hits until it is evicted.
   */
  async module(id, name, options = {}) {
    const dtype = checkDtype(options.dtype ?? this.dtype);
    const reg = this.registration(id);
    const info = this.resolve(reg, name);
    const key = `${id}\u0000${reg.version}\u0000${info.name}\u0000${dtype}`;
    const entry = this.entries.get(key);
    if (entry) {
      this.entries.delete(key); // most recently used: to the end
      this.entries.set(key, entry);
      this.counts.hits += 1;
      return entry.value;
    }
    // One fetch per entry, whoever asks; a caller's signal abandons its own wait, not the fetch the others share.
    throwIfAborted(options.signal);
    let pending = this.inflight.get(key);
    if (pending) {
      this.counts.shared += 1;
    } else {
      this.counts.misses += 1;
      pending = this.fetchModule(reg, info, dtype, key).finally(() => this.inflight.delete(key));
      this.inflight.set(key, pending);
      pending.catch(() => {}); // its callers see the failure; a fetch every caller has abandoned fails quietly
    }
    return raceAbort(inOwnRequest(pending), options.signal);
  }

  /**
   * `length` bytes of the registration's weights at `begin`. In workerd an I/O object belongs to the request that
   * made it: a file shared by the isolate's requests would send one request's reads from another's context (its
   * queue, its open body), and they break when that request ends first (tests/js/adapter-router.test.mjs, staggered
   * requests). There each span is read on a file opened for the read, in the caller's request, and held to the
   * registration's ETag; elsewhere the registration's file serves every read (its CDN URL reused).
   */
  async readSpan(reg, begin, length) {
    const shared = reg.dir.weights;
    if (!IN_WORKERD || typeof shared?.url !== 'string') return readRange(reg.src, begin, length);
    const file = await openFile(
      { url: shared.url, label: shared.label },
      { ...this.reading, token: shared.token ?? this.reading.token },
    );
    try {
      const bytes = await readRange(file, begin, length);
      if (shared.etag && file.etag && file.etag !== shared.etag)
        throw new SafetensorsError(
          'IoError',
          `\`${shared.label}\` changed while being read (ETag ${shared.etag} became ${file.etag})`,
        );
      return bytes;
    } finally {
      await file.close();
    }
  }

  async fetchModule(reg, info, dtype, key) {
    const [begin, end] = info.span;
    const cost = info.bytes[dtype];
    const need = cost + (end - begin);
    if (need > this.budget)
      throw invalid(
        `${reg.label}: module \`${info.name}\` needs ${need} bytes (${cost} of ${dtype} factors, ${end - begin} fetched), more than the cache's budget of ${this.budget} bytes`,
      );
    reg.active += 1; // the registration's file stays open until its fetches end
    let held = 0;
    try {
      await this.reserve(need);
      held = need;
      const span = await this.readSpan(reg, begin, end - begin);
      this.counts.spanReads += 1;
      this.counts.bytesFetched += span.length;
      const parts = callWindow(reg.handle, 'factors', span, info.name, dtype);
      if (parts.length !== 2)
        throw new SafetensorsError(
          'IoError',
          `${reg.label}: module \`${info.name}\`: the factors did not come back whole`,
        );
      const value = Object.freeze({
        id: reg.id,
        name: info.name,
        kind: info.kind,
        A: parts[0].bytes,
        B: parts[1].bytes,
        shapes: Object.freeze({ A: info.aShape, B: info.bShape }),
        rank: info.rank,
        alpha: info.alpha,
        scaling: info.scaling,
        dtype,
        sourceDtype: info.sourceDtype,
      });
      this.release(end - begin); // the span's bytes are gone; the factors stay reserved until they land
      held = cost;
      // Cached unless the adapter was unregistered, or re-registered at another version, meanwhile.
      if (this.adapters.get(reg.id)?.version === reg.version && !this.entries.has(key)) {
        this.reserved -= cost;
        this.resident += cost;
        held = 0;
        this.entries.set(key, { cost, value, id: reg.id, version: reg.version });
      }
      return value;
    } finally {
      if (held) this.release(held);
      reg.active -= 1;
      if (reg.closing && reg.active === 0) await closeNow(reg);
    }
  }

  /** Waits until `n` more bytes fit in the budget, evicting least recently used entries; then counts them as in flight. */
  async reserve(n) {
    for (;;) {
      while (this.resident + this.reserved + n > this.budget && this.entries.size > 0) {
        const [key, entry] = this.entries.entries().next().value;
        this.entries.delete(key);
        this.resident -= entry.cost;
        this.counts.evictions += 1;
      }
      if (this.resident + this.reserved + n <= this.budget) {
        this.reserved += n;
        this.counts.peak = Math.max(this.counts.peak, this.resident + this.reserved);
        return;
      }
      // Only fetches in flight hold the budget: wait for one to land or fail (in workerd, by polling: see inOwnRequest).
      if (IN_WORKERD) await sleep(1);
      else await new Promise((resolve) => this.waiters.push(resolve));
    }
  }

  release(n) {
    this.reserved -= n;
    this.wake();
  }

  wake() {
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }

  async mathHandle() {
    if (!this.math) {
      const module = await this.nativeModule();
      this.math = new NativeHandle(module, new module.ServingMath());
      this.math.handle.setLimits(...this.limitArgs());
    }
    return this.math;
  }

  /**
   * The composition of several adapters for one module: [{id, scale}] → {A, B, shapes, rank, dtype, scaling: 1,
   * terms, applyTo(weight, {dtype, shape, outDtype?, layout?})}, the exact cat form (A = [c₁A₁; c₂A₂; …],
   * B = [B₁ B₂ …], cᵢ = scaleᵢ·sᵢ), so that B·A = Σ scaleᵢ·sᵢ·Bᵢ·Aᵢ up to one rounding to `dtype`. Adapters without
   * the module are left out; null when none has it. The factors are read through the cache in f32 (exact for
   * f32, bf16 and f16 adapters).
   */
  async compose(list, name, options = {}) {
    if (!Array.isArray(list) || list.length === 0)
      throw new TypeError('peft-bridge: compose needs a non-empty array of {id, scale}');
    const dtype = checkDtype(options.dtype ?? this.dtype);
    await this.checkTerms(list.length); // before any factor is read
    const present = [];
    for (const item of list) {
      if (!item || typeof item !== 'object' || typeof item.id !== 'string')
        throw new TypeError('peft-bridge: compose takes [{id, scale}]');
      const scale = item.scale ?? 1;
      if (typeof scale !== 'number' || !Number.isFinite(scale))
        throw new TypeError('peft-bridge: a scale must be a finite number');
      const reg = this.registration(item.id);
      const info = this.resolve(reg, name, false);
      if (info !== null) present.push({ id: item.id, scale });
    }
    if (present.length === 0) return null;
    const factors = await Promise.all(
      present.map((p) => this.module(p.id, name, { dtype: 'f32', signal: options.signal })),
    );
    const terms = factors.map((f, i) => ({
      dtype: 'f32',
      kind: f.kind,
      aShape: f.shapes.A,
      bShape: f.shapes.B,
      weight: present[i].scale,
      scaling: f.scaling,
    }));
    const bytes = concat(factors.flatMap((f) => [f.A, f.B]));
    const math = await this.mathHandle();
    const padTo = options.rank ?? 0; // composeAdapter: a module only some adapters have, padded as combine pads it
    const out = callWindow(math, 'compose', bytes, JSON.stringify(terms), dtype, padTo);
    const rank = Math.max(
      padTo,
      terms.reduce((r, t) => r + t.aShape[0], 0),
    );
    const aShape = [rank, ...factors[0].shapes.A.slice(1)];
    const bShape = [factors[0].shapes.B[0], rank, ...factors[0].shapes.B.slice(2)];
    return {
      name: factors[0].name,
      A: out[0].bytes,
      B: out[1].bytes,
      shapes: { A: aShape, B: bShape },
      rank,
      dtype,
      scaling: 1,
      terms: present.map((p, i) => ({ id: p.id, scale: p.scale, scaling: factors[i].scaling, rank: factors[i].rank })),
      /**
       * The base weight plus this delta, by the merge kernel: `weight` (bytes in `dtype`: 'BF16', 'bf16'…, of
       * `shape`) → bytes in `outDtype` (default the weight's). One adapter at scale 1 gives `merge`'s bytes.
       * `layout`: 'auto' (default), 'out-in' (Linear, Conv), 'in-out' (Conv1D), 'embedding'.
       */
      applyTo: (weight, o = {}) => {
        if (!(weight instanceof Uint8Array))
          throw new TypeError('peft-bridge: applyTo takes the weight as a Uint8Array');
        if (!o || typeof o.dtype !== 'string' || !Array.isArray(o.shape))
          throw new TypeError('peft-bridge: applyTo needs {dtype, shape}');
        const [merged] = callWindow(
          math,
          'apply',
          concat([bytes, weight]),
          JSON.stringify(terms),
          o.dtype,
          JSON.stringify(o.shape),
          o.outDtype ?? '',
          o.layout ?? 'auto',
        );
        return merged.bytes;
      },
    };
  }

  /**
   * The PEFT adapter a composition is served as, for a runtime that loads adapter files (vLLM, LoRAX): [{id, scale}]
   * → {config (adapter_config.json text), weightsName, size (of the weights file), rank, tensors, stream()}.
   * Names, shapes, order and config are `combine --method cat`'s plan for these adapters and weights (the core's
   * PlanCombine); stream() writes the weights file module by module, each composed through the cache when the
   * reader reaches it (compose()), so it holds one module's factors besides the cache and equals the file
   * `combine --method cat --weights … --dtype …` writes.
   */
  async composeAdapter(list, options = {}) {
    if (!Array.isArray(list) || list.length === 0)
      throw new TypeError('peft-bridge: composeAdapter needs a non-empty array of {id, scale}');
    const dtype = checkDtype(options.dtype ?? this.dtype);
    const module = await this.nativeModule();
    const layout = new NativeHandle(module, new module.ComposeLayout());
    let plan;
    try {
      layout.handle.setLimits(...this.limitArgs());
      await this.checkTerms(list.length); // before the registrations are looked at
      for (const item of list) {
        if (!item || typeof item !== 'object' || typeof item.id !== 'string')
          throw new TypeError('peft-bridge: composeAdapter takes [{id, scale}]');
        layout.handle.add(this.registration(item.id).handle.handle);
      }
      const text = layout.handle.plan(JSON.stringify({ weights: list.map((i) => i.scale ?? 1), dtype }));
      if (text === '') throw errorFromHandle(layout.handle);
      plan = JSON.parse(text);
    } finally {
      layout.close();
    }
    return {
      config: plan.config,
      weightsName: plan.weightsName,
      size: plan.size,
      rank: plan.rank,
      tensors: plan.tensors,
      stream: () => {
        const pending = new Map(); // module → its composition, until both factors were written
        const factor = (t) => ({
          [Symbol.asyncIterator]: async function* () {
            let p = pending.get(t.module);
            if (!p)
              pending.set(
                t.module,
                (p = { delta: this.compose(list, t.module, { dtype, rank: t.rank, signal: options.signal }), left: 2 }),
              );
            const delta = await p.delta;
            if (--p.left === 0) pending.delete(t.module);
            yield delta[t.factor];
          }.bind(this),
        });
        return writeSafetensors({
          tensors: plan.tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape, data: factor(t) })),
          metadata: plan.metadata,
          order: plan.order,
          signal: options.signal,
        });
      },
    };
  }

  /**
   * {registered, entries, residentBytes, inFlightBytes, peakResidentBytes (resident + in flight, at most), budgetBytes,
   * hits, misses, shared (requests that joined a fetch in flight), evictions, invalidated (dropped by a revision
   * change or unregister), bytesFetched, spanReads}.
   */
  stats() {
    const { peak, ...counts } = this.counts;
    return {
      registered: this.adapters.size,
      entries: this.entries.size,
      residentBytes: this.resident,
      inFlightBytes: this.reserved,
      peakResidentBytes: peak,
      budgetBytes: this.budget,
      ...counts,
    };
  }

  /** Unregisters everything and frees the native handles. */
  async close() {
    for (const id of [...this.adapters.keys()]) await this.unregister(id);
    this.math?.close();
    this.math = null;
  }
}

/** Calls a handle's method with `bytes` (whole) in its window; returns its output chunks. */
function callWindow(math, method, bytes, ...args) {
  const native = math.handle;
  const ptr = native.window(bytes.length);
  if (!ptr) throw new SafetensorsError('IoError', `out of memory: cannot reserve ${bytes.length} bytes`);
  math.module.HEAPU8.set(bytes, ptr);
  const ok = native[method](bytes.length, ...args);
  const chunks = math.takeChunks(ptr);
  if (!ok) throw errorFromHandle(native);
  return chunks;
}

function describe(reg) {
  return {
    id: reg.id,
    repo: reg.spec.repo,
    revision: reg.revision,
    etag: reg.etag,
    format: reg.format,
    modules: reg.modules.length,
    plan: reg.plan,
  };
}

/** Closes a registration once its fetches in flight have ended (they complete for their callers). */
async function closeRegistration(reg) {
  reg.closing = true;
  if (reg.active === 0) await closeNow(reg);
}

async function closeNow(reg) {
  if (reg.closed) return;
  reg.closed = true;
  reg.handle.close();
  await reg.src.close().catch(() => {});
  await reg.dir.close();
}
