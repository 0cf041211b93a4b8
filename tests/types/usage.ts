// Compile-only check of the published types (web/src/index.d.ts): `tsc -p tests/types` must pass, and
// `tsc -p tests/types/tsconfig.es2022.json` (the same file under `lib: ["es2022"]`, without esnext.disposable).
// Each line is how an application would use the API; wrong types here fail the test suite. Every exported
// function and type is used at least once; the `@ts-expect-error` lines prove that wrong usages are rejected
// (tsc fails if such a line compiles).
import {
  // Files: init, reading, writing, conversion
  init,
  inspect,
  readSafetensors,
  createWriter,
  writeSafetensors,
  convert,
  SafetensorsError,
  SafetensorsWriter,
  // Remote files and the Hub
  hubUrl,
  openRemote,
  readTensor,
  inspectRepo,
  // LoRA adapters
  adapterInfo,
  translateAdapter,
  createAdapter,
  type CreateAdapterOptions,
  type CreatedAdapter,
  // LoRA merge, local and remote
  createMergeStream,
  mergeShards,
  planMerge,
  mergeRemote,
  mergeRemoteShard,
  mergeRemoteIndex,
  planRemote,
  saveStreams,
  type InitOptions,
  type SafetensorsErrorCode,
  type RandomAccessSource,
  type Source,
  type Dtype,
  type TensorInfo,
  type Header,
  type ReadOptions,
  type HubAddress,
  type RemoteSource,
  type RemoteOptions,
  type RemoteFile,
  type InspectRepoOptions,
  type RepoInfo,
  type ReadEvent,
  type ReadProgress,
  type ReadSafetensorsOptions,
  type TensorOrder,
  type TensorSpec,
  type WriteSpec,
  type PlannedTensor,
  type WriteLayout,
  type TensorWithData,
  type ConvertProgress,
  type ConvertOptions,
  type AdapterFormat,
  type AdapterReadFormat,
  type ConfigInput,
  type AdapterInput,
  type AdapterReadOptions,
  type AdapterModule,
  type AdapterInfo,
  type TranslateOptions,
  type TranslatePlanEntry,
  type AdapterFile,
  type TranslateResult,
  type MergeOptions,
  type MergeStreamOptions,
  type ShardSource,
  type MergeBase,
  type MergeShardsOptions,
  type MergedFile,
  type PlanMergeOptions,
  type PlannedMergeTensor,
  type MergePlanSummary,
  type HubRepo,
  type RemoteMergeOptions,
  type DirectoryHandle,
  type LocalPath,
  type AdapterDirectory,
  // Pushing to the Hub
  pushToHub,
  type PushFile,
  type PushOptions,
  type PushProgress,
  type PushResult,
} from '../../web/src/index.js';

// ---- Files ----

export async function usage(
  bytes: Uint8Array,
  blob: Blob,
  stream: ReadableStream<Uint8Array>,
  module: WebAssembly.Module,
) {
  await init({ wasmModule: module });
  await init({ wasmBinary: new ArrayBuffer(8) });
  const fromUrl: InitOptions = { wasmUrl: new URL('https://cdn.example/peft_bridge_wasm.wasm') };
  await init(fromUrl);
  await init();

  const header: Header = await inspect(blob);
  const sizes: number[] = [header.headerSize, header.dataSize, header.fileSize, header.totalParameters];
  for (const t of header.tensors) {
    const info: TensorInfo = t;
    const dtype: Dtype = info.dtype;
    const shape: number[] = t.shape;
    const [begin, end]: [number, number] = t.dataOffsets;
    sizes.push(begin, end, t.byteLength, ...shape, header.parameters[dtype] ?? 0);
  }
  const meta: Record<string, string> | null = header.metadata;

  // Every kind of Source.
  const ranged: RandomAccessSource = {
    size: bytes.length,
    read: (offset, length) => bytes.subarray(offset, offset + length),
  };
  const asyncRanged: RandomAccessSource = {
    size: blob.size,
    read: async (o, n) => new Uint8Array(await blob.slice(o, o + n).arrayBuffer()),
  };
  async function* chunks(): AsyncGenerator<Uint8Array> {
    yield bytes.subarray(0, 8);
    yield bytes.subarray(8);
  }
  const sources: Source[] = [
    bytes,
    new ArrayBuffer(8),
    new DataView(bytes.buffer),
    blob,
    stream,
    chunks(),
    [bytes],
    ranged,
    asyncRanged,
  ];
  const readOptions: ReadOptions = { signal: AbortSignal.timeout(1000) };
  for (const s of sources) sizes.push((await inspect(s, readOptions)).tensors.length);

  const controller = new AbortController();
  let progress: ReadProgress | null = null;
  const readOpts: ReadSafetensorsOptions = { signal: controller.signal, onProgress: (p) => (progress = p) };
  for await (const ev of readSafetensors(stream, readOpts)) {
    const e: ReadEvent = ev;
    if (e.type === 'data') sizes.push(e.offset, e.bytes.byteLength, e.tensorIndex, e.tensor.length);
    else if (e.type === 'header') sizes.push(e.header.tensors.length);
    else if (e.type === 'end') break;
  }
  const total: number | null = progress === null ? null : (progress as ReadProgress).totalBytes;

  const order: TensorOrder = 'reference';
  const specs: TensorSpec[] = [{ name: 'w', dtype: 'F32', shape: [2] }];
  const spec: WriteSpec = { tensors: specs, metadata: { format: 'pt' }, order };
  const writer: SafetensorsWriter = await createWriter(spec);
  const layout: WriteLayout = writer.layout;
  const planned: PlannedTensor[] = layout.tensors;
  sizes.push(layout.headerSize, layout.dataSize, layout.totalSize, planned[0].index, planned[0].dataOffsets[1]);
  const out: ReadableStream<Uint8Array> = writer.readable;
  await writer.write(new Float32Array([1, 2]));
  await writer.close();
  sizes.push(writer.bytesWritten);
  writer[Symbol.dispose]();
  // @ts-expect-error: writers come from createWriter(), never `new`
  new SafetensorsWriter();

  const withData: TensorWithData[] = [
    { name: 'b', dtype: 'BF16', shape: [1], data: new Uint8Array(2) },
    { name: 's', dtype: 'U8', shape: [3], data: stream },
    { name: 'e', dtype: 'F16', shape: [0] },
  ];
  const whole: ReadableStream<Uint8Array> = writeSafetensors({ tensors: withData, signal: controller.signal });

  const convertOptions: ConvertOptions = {
    dtype: 'F16',
    order: 'input',
    onProgress: (p: ConvertProgress) => sizes.push(p.bytesRead, p.bytesWritten, p.inputSize ?? 0, p.outputSize ?? 0),
  };
  const converted: ReadableStream<Uint8Array> = convert(bytes, {
    dtype: 'bf16',
    order: 'reference',
    onProgress: (p) => p.bytesWritten,
  });
  await convert(stream, convertOptions).pipeTo(new WritableStream());
  // @ts-expect-error: the target dtype is required
  convert(bytes, { order: 'input' });
  // @ts-expect-error: convert has no F64 target
  convert(bytes, { dtype: 'f64' });

  try {
    await inspect(new Uint8Array(3));
  } catch (error) {
    if (error instanceof SafetensorsError) {
      const code: SafetensorsErrorCode = error.code;
      const where: number | null = error.offset;
      const tensor: string | null = error.tensor;
      // @ts-expect-error: not one of the codes
      if (error.code === 'HeaderTooBig') return null;
      return [code, where, tensor, layout, out, whole, converted, meta, sizes, total];
    }
  }
  // @ts-expect-error: a misspelled init option
  await init({ wasmPath: '/peft_bridge_wasm.wasm' });
  return null;
}

// ---- Remote files and the Hub ----

export async function remote(token: string) {
  const address: HubAddress = {
    repo: 'meta-llama/Llama-3.2-1B',
    path: 'model.safetensors',
    revision: 'refs/pr/1',
    token,
  };
  const url: string = hubUrl({
    repo: address.repo,
    path: address.path,
    revision: 'main',
    endpoint: 'https://hf-mirror.example',
  });
  const targets: RemoteSource[] = [url, new URL(url), 'hf://meta-llama/Llama-3.2-1B/model.safetensors@main', address];
  const options: RemoteOptions = {
    token,
    endpoint: 'https://huggingface.co',
    retries: 3,
    retryDelay: 100,
    signal: AbortSignal.timeout(30_000),
    fetch: (input, init) => fetch(input, init),
  };
  const headers: Header[] = [];
  for (const target of targets) headers.push(await inspect(target, options));
  headers.push(await inspect('https://example.com/model.safetensors', { fetch }));

  const first: Uint8Array = await readTensor('hf://owner/repo/model.safetensors', 'lm_head.weight', { token });
  const second: Uint8Array = await readTensor(address, 'model.norm.weight');
  const local: Uint8Array = await readTensor(new Blob([]), 'w');

  const file: RemoteFile = await openRemote(address, { retries: 1 });
  try {
    const prefix: Uint8Array = await file.read(0, 8);
    const meta: [string, string | null, string | null, number] = [file.url, file.etag, file.commit, file.requests];
    // A RemoteFile of known size is read by ranges like any RandomAccessSource.
    if (file.size !== null) {
      const size: number = file.size;
      headers.push(await inspect({ size, read: (o, n) => file.read(o, n) }));
    }
    // @ts-expect-error: the size is null when the server gave no usable Content-Length
    const unchecked: number = file.size;
    sizes(prefix.length, meta.length, unchecked);
  } finally {
    await file.close();
  }

  const repoOptions: InspectRepoOptions = { repo: 'meta-llama/Llama-3.2-1B', revision: 'main', concurrency: 8, token };
  const repo: RepoInfo = await inspectRepo(repoOptions);
  const pinned: string = repo.revision;
  const commit: string | null = repo.commit;
  const shardOf: string | undefined = repo.index?.weight_map['lm_head.weight'];
  for (const { path, header } of repo.shards) sizes(path.length, header.tensors.length);

  // @ts-expect-error: a Hub address needs the file's path
  hubUrl({ repo: 'owner/name' });
  // @ts-expect-error: readTensor needs random access, not a stream
  await readTensor(new Blob([]).stream(), 'w');
  // @ts-expect-error: a misspelled remote option
  await inspect(url, { retry: 3 });
  return [headers, first, second, local, pinned, commit, shardOf] as const;
}

function sizes(...n: number[]): number {
  return n.reduce((a, b) => a + b, 0);
}

// ---- LoRA adapters ----

export async function adapters(weights: Blob, stream: ReadableStream<Uint8Array>, config: string) {
  const info: AdapterInfo = await adapterInfo({ weights, config }, { arch: 'llama', strict: true });
  const ranks: number[] = info.modules.map((m) => m.rank * m.scaling);
  for (const m of info.modules) {
    const module: AdapterModule = m;
    const kind: 'linear' | 'embedding' | 'conv' | 'experts' = module.shape;
    const norm: number = module.deltaNorm;
    const pattern: string = module.rankPattern ?? module.alphaPattern ?? '';
    if (module.dora || module.loraBias)
      ranks.push(norm, module.inFeatures, module.outFeatures, module.alpha, pattern.length, kind.length);
  }
  const dtype: Dtype = info.modules[0].dtype;
  const summary = [
    info.arch,
    info.peftType,
    info.taskType,
    info.baseModel,
    info.r,
    info.loraAlpha,
    info.useRslora,
    info.useDora,
    info.parameters,
  ];
  for (const r of info.rejected) ranks.push(r.tensor.length, r.reason.length);
  for (const e of info.extras) ranks.push(e.key.length, e.kind.length, ...e.shape);
  const counts: number = Object.values(info.dtypes).reduce((a, b) => a + (b ?? 0), 0);
  const unknown: string[] = info.unknownConfigKeys;

  const input: AdapterInput = {
    weights: stream,
    config: { peft_type: 'LORA', r: 8 },
    baseConfig: new Uint8Array(2),
    weightsName: 'adapters.safetensors',
  };
  const configs: ConfigInput[] = [config, new TextEncoder().encode(config), { model_type: 'llama' }];
  const from: AdapterReadFormat = 'diffusers-attnproc';
  const readOptions: AdapterReadOptions = { from, baseConfig: configs[2], signal: AbortSignal.timeout(5000) };
  const diffusers: AdapterInfo = await adapterInfo({ weights: await weights.arrayBuffer() }, readOptions);
  // A llama.cpp LoRA .gguf is an adapter input like any other; read back, its format is 'gguf'.
  const fromGguf: AdapterInfo = await adapterInfo({ weights: new Uint8Array(0), weightsName: 'adapter_model.gguf' });
  const ggufFormat: AdapterReadFormat = fromGguf.format;
  const q8: TranslateResult = await translateAdapter(input, { to: 'gguf', outtype: 'q8_0' });

  const result: TranslateResult = await translateAdapter(input, {
    to: 'gguf-names',
    from: 'mlx',
    dryRun: false,
    oldPeft: false,
  });
  for (const p of result.plan) ranks.push(p.to === null ? p.reason.length : p.action.length);
  const plan: TranslatePlanEntry[] = result.plan;
  const written: number = result.mapped + result.rejected;
  const readAs: AdapterReadFormat = result.from; // diffusers-attnproc inputs are read, not written
  const bytes: Uint8Array[] = result.files.map((f: AdapterFile) => f.bytes);
  const names: string[] = result.files.map((f) => f.name);

  // Every writable convention, as a dry run.
  const formats: AdapterFormat[] = ['peft', 'mlx', 'kohya', 'gguf-names', 'gguf'];
  for (const to of formats) {
    const options: TranslateOptions = { to, strict: true, dryRun: true, arch: 'llama' };
    const dry = await translateAdapter({ weights, config }, options);
    ranks.push(dry.files.length, dry.plan.length);
  }

  try {
    await adapterInfo({ weights }, { strict: true });
  } catch (error) {
    if (error instanceof SafetensorsError) {
      switch (error.code) {
        case 'InvalidConfig':
        case 'UnsupportedAdapter':
        case 'UnresolvedTensor':
        case 'ShapeMismatch':
          ranks.push(error.message.length);
          break;
        default:
          ranks.push(0);
      }
    }
  }

  // @ts-expect-error: diffusers attention-processor files are read only
  await translateAdapter(input, { to: 'diffusers-attnproc' });
  // @ts-expect-error: `to` is required
  await translateAdapter(input, { from: 'peft' });
  // @ts-expect-error: a misspelled option (`strict`)
  await adapterInfo(input, { strcit: true });
  // @ts-expect-error: the input needs `weights`
  await adapterInfo({ config });
  for (const p of result.plan) {
    // @ts-expect-error: `action` exists only on written entries: narrow on `to` first
    ranks.push(p.action.length);
  }
  return [
    info.format,
    info.extras[0]?.kind,
    ranks,
    bytes,
    names,
    result.notes,
    dtype,
    summary,
    counts,
    unknown,
    diffusers,
    plan,
    written,
    readAs,
  ] as const;
}

// ---- LoRA merge ----

export async function merge(
  base: Blob,
  adapterWeights: Blob,
  adapterConfig: string,
  baseConfig: Record<string, unknown>,
  dir: DirectoryHandle,
) {
  const adapter: AdapterInput = { weights: adapterWeights, config: adapterConfig };
  const controller = new AbortController();

  // One file, as a TransformStream.
  const streamOptions: MergeStreamOptions = {
    adapter,
    baseConfig,
    dtype: 'bf16',
    safe: true,
    arch: 'llama',
    signal: controller.signal,
    onProgress: ({ bytesIn, bytesOut }) => bytesIn - bytesOut,
  };
  const merged: ReadableStream<Uint8Array> = base.stream().pipeThrough(createMergeStream(streamOptions));
  const reader = merged.getReader();
  for (let r = await reader.read(); !r.done; r = await reader.read()) r.value.byteLength;
  const unmerge: TransformStream<Uint8Array, Uint8Array> = createMergeStream({ adapter, unmerge: true });

  // A sharded model: each shard fetched by name.
  const shardUrl = (name: string) => `https://models.example/llama/${name}`;
  const opened: MergeBase = {
    open: async (name: string): Promise<ShardSource> => (await fetch(shardUrl(name))).blob(),
    index: await (await fetch(shardUrl('model.safetensors.index.json'))).text(),
    config: baseConfig,
  };
  const sources: ShardSource[] = [
    new Uint8Array(0),
    new ArrayBuffer(0),
    base,
    base.stream(),
    { size: 0, read: () => new Uint8Array(0) },
  ];
  const inMemory: MergeBase = { open: (name) => sources[name.length % sources.length] };

  const shared: MergeOptions = { adapter, dtype: 'f16', arch: 'llama', signal: controller.signal };
  const planOptions: PlanMergeOptions = { ...shared, base: opened };
  const plan: MergePlanSummary = await planMerge(planOptions);
  const counts: number[] = [plan.modulesMatched, plan.tensorsMerged, plan.totalSize, plan.bytesOut, plan.sourceBytes];
  const arch: string | null = plan.arch;
  const direction: boolean = plan.unmerge;
  for (const t of plan.tensors) {
    const entry: PlannedMergeTensor = t;
    const module: string = entry.module ?? '(copied from the adapter)';
    const change: Dtype[] = [entry.dtype, entry.outDtype];
    counts.push(entry.shard.length, entry.tensor.length, entry.op.length, module.length, change.length, ...entry.shape);
  }
  for (const { tensor, reason } of plan.unmatchedKeys) counts.push(tensor.length + reason.length);
  for (const f of plan.files) counts.push(f.name.length, f.bytes);
  for (const o of plan.outputs) counts.push(o.path.length, o.size);

  const shardsOptions: MergeShardsOptions = {
    ...shared,
    base: opened,
    onProgress: (p) => counts.push(p.bytesIn / p.totalIn, p.bytesOut),
  };
  for await (const file of mergeShards(shardsOptions)) {
    const f: MergedFile = file;
    const sink = new WritableStream<Uint8Array>({ write: (chunk) => void counts.push(chunk.byteLength) });
    await f.stream.pipeTo(sink); // each file read to its end before the next
    counts.push(f.path.length, f.size);
  }
  // Straight into a directory (File System Access API), the DOM's own handle type included.
  const saved: { path: string; size?: number }[] = await saveStreams(mergeShards({ adapter, base: inMemory }), {
    directoryHandle: dir,
  });
  const opfs: FileSystemDirectoryHandle = await navigator.storage.getDirectory();
  await saveStreams([{ path: 'a.json', stream: new Blob(['{}']).stream() }], { directoryHandle: opfs });

  // Quantized for deployment (`merge --quantize int4 --scheme per-group --group-size 64`).
  const quantized: MergeShardsOptions = {
    adapter,
    base: inMemory,
    quantize: 'int4',
    scheme: 'per-group',
    groupSize: 64,
  };
  for await (const f of mergeShards(quantized)) await f.stream.cancel();
  await saveStreams(mergeShards({ adapter, base: inMemory, quantize: 'fp8', scheme: 'block' }), {
    directoryHandle: dir,
  });
  // @ts-expect-error: nf4 is not a --quantize method
  mergeShards({ adapter, base: inMemory, quantize: 'nf4' });
  // @ts-expect-error: mergeShards needs a base
  mergeShards({ adapter });
  // Any case of the CLI's dtype names (the core reads them case-insensitively)...
  createMergeStream({ adapter, dtype: 'BF16' });
  // @ts-expect-error: ...but only float dtypes
  createMergeStream({ adapter, dtype: 'f8' });
  // @ts-expect-error: a misspelled option (`unmerge`)
  createMergeStream({ adapter, unmerged: true });
  // @ts-expect-error: a plan entry's module is null for copies the adapter carries
  const path: string = plan.tensors[0].module;
  // @ts-expect-error: saveStreams needs a directory handle
  await saveStreams([], {});
  return [counts, arch, direction, saved, unmerge, path] as const;
}

// ---- Remote merge ----

export async function remoteMerge(token: string, dir: DirectoryHandle, adapterBytes: Uint8Array) {
  const base: HubRepo = { repo: 'meta-llama/Llama-3.2-1B', revision: 'main', token };
  const adapterRepo: HubRepo = {
    repo: 'me/llama-lora',
    subfolder: 'checkpoint-500',
    endpoint: 'https://huggingface.co',
  };
  const options: RemoteMergeOptions = {
    base,
    adapter: adapterRepo,
    dtype: 'bf16',
    token,
    concurrency: 8,
    retries: 3,
    retryDelay: 500,
    signal: AbortSignal.timeout(600_000),
  };

  // Plan once, then give every worker the same revision.
  const plan = await planRemote(options);
  const revision: string | null = plan.revision;
  const adapterRevision: string | null = plan.adapterRevision;
  const summary: MergePlanSummary = plan;
  const pinned: RemoteMergeOptions = {
    ...options,
    base: { ...base, revision: revision ?? 'main' },
    adapter: { ...adapterRepo, revision: adapterRevision ?? 'main' },
  };

  // One machine: every file.
  let done = 0;
  for await (const { path, size, stream } of mergeRemote({
    ...pinned,
    onProgress: (p) => (done = p.bytesIn / p.totalIn),
  })) {
    await stream.pipeTo(new WritableStream());
    done += path.length + size;
  }
  await saveStreams(mergeRemote(pinned), { directoryHandle: dir });

  // N workers: one output file each, plus the index.
  const files: MergedFile[] = await Promise.all(
    summary.files.map(({ name }) => mergeRemoteShard({ ...pinned, shard: name, onProgress: (p) => p.bytesOut })),
  );
  for (const f of files) await f.stream.pipeTo(new WritableStream());
  const index: string | null = await mergeRemoteIndex(pinned);
  if (index !== null) JSON.parse(index);

  // A one-file base by URL, the adapter by URLs or as bytes.
  const single: MergedFile = await mergeRemoteShard({
    base: 'hf://openai-community/gpt2/model.safetensors',
    baseConfig: { model_type: 'gpt2' },
    adapter: {
      weights: 'https://example.com/lora/adapter_model.safetensors',
      config: new URL('https://example.com/lora/adapter_config.json'),
    },
  });
  const fromBytes = await planRemote({
    base: new URL('https://example.com/model.safetensors'),
    adapter: { weights: adapterBytes, config: '{"r": 8}' },
    unmerge: true,
  });

  // @ts-expect-error: mergeRemoteShard resolves to one file, not an iterator of files
  for await (const f of mergeRemoteShard(pinned)) f;
  // @ts-expect-error: a HubRepo names no file path
  await mergeRemote({ ...options, base: { repo: 'x/y', path: 'model.safetensors' } }).next();
  // @ts-expect-error: a misspelled option (`concurrency`)
  await planRemote({ ...options, concurency: 2 });
  return [done, files, index, single, fromBytes.tensors.length] as const;
}

// ---- Node paths, directories, huggingface.js option names ----

export async function inputs(bytes: Uint8Array) {
  // A path or file: URL is a Source (Node); a RandomAccessSource may have close().
  const paths: LocalPath[] = ['model.safetensors', new URL('file:///models/model.safetensors')];
  for (const p of paths) await inspect(p);
  const closable: RandomAccessSource = {
    size: bytes.length,
    read: (o, n) => bytes.subarray(o, o + n),
    close: async () => {},
  };
  const viaPath: Uint8Array = await readTensor('model.safetensors', 'w');
  const converted: ReadableStream<Uint8Array> = convert('model.safetensors', { dtype: 'bf16' });
  for await (const ev of readSafetensors(new URL('file:///m.safetensors'))) ev.type;

  // Adapters as directories: a path, a file: URL, a Hub repo; weights as a path.
  const dirs: AdapterDirectory[] = [
    'my-lora/',
    new URL('file:///loras/mine/'),
    { repo: 'owner/lora', revision: 'v1', subfolder: 'mlx' },
  ];
  for (const d of dirs) (await adapterInfo(d)).modules.length;
  await adapterInfo({ repo: 'owner/lora' }, { hubUrl: 'http://localhost:8080', accessToken: 'hf_x', retries: 2 });
  await adapterInfo({ weights: 'adapter_model.safetensors', config: { r: 8 } });
  const mlx: TranslateResult = await translateAdapter('my-lora/adapter_model.safetensors', { to: 'mlx', dryRun: true });

  // inspectRepo('owner/repo'), and huggingface.js's option names everywhere the Hub is read.
  const repo: RepoInfo = await inspectRepo('owner/model', {
    revision: 'main',
    hubUrl: 'http://localhost:8080',
    accessToken: 'hf_x',
  });
  await inspect('hf://owner/model/model.safetensors', { accessToken: 'hf_x', hubUrl: 'http://localhost:8080' });
  await inspect({ repo: 'owner/model', path: 'model.safetensors', accessToken: 'hf_x' });
  await planRemote({
    base: { repo: 'o/m', accessToken: 'hf_x' },
    adapter: { repo: 'o/l', hubUrl: 'http://h' },
    hubUrl: 'http://h',
  });

  // Merge shards given as paths or closable sources; a file's stream may be cancelled to skip it.
  for await (const f of mergeShards({
    base: { open: (name) => (name.endsWith('1') ? name : closable) },
    adapter: { weights: 'a.safetensors' },
  }))
    await f.stream.cancel();

  // @ts-expect-error: inspectRepo's second argument has no repo of its own
  await inspectRepo('owner/model', { repo: 'other/model' });
  // @ts-expect-error: a path is no adapter option
  await adapterInfo('my-lora/', 'adapter_config.json');
  return [viaPath, converted, mlx, repo] as const;
}

// A fresh adapter (create): a path, a MergeBase or a Hub repo, the files as streams; dryRun: the plan's text.
export async function createUsage(bytes: Uint8Array): Promise<number> {
  const options: CreateAdapterOptions = {
    base: 'my-model/',
    targetModules: ['q_proj', 'v_proj'],
    r: 8,
    alpha: 16,
    seed: 7n,
    dtype: 'bf16',
  };
  const created: CreatedAdapter = await createAdapter(options);
  const fromBase = await createAdapter({
    base: { open: () => bytes, config: '{}' },
    targetModules: 'all-linear',
    dora: true,
    onProgress: ({ bytesIn, totalIn }) => void (bytesIn / totalIn),
  });
  // @ts-expect-error init is kaiming or gaussian
  await createAdapter({ base: 'm/', targetModules: 'q_proj', init: 'xavier' });
  const planned = await createAdapter({
    base: { repo: 'owner/model', revision: 'main' },
    targetModules: 'all-linear',
    dryRun: true,
    token: 'hf_x',
  });
  let n = created.summary.modules.length + fromBase.files.length + planned.text.length;
  for (const f of created.files) n += f.size + (f.path === 'adapter_config.json' ? 1 : 0) + (f.stream.locked ? 1 : 0);
  return n + created.config.length;
}

// The adapter cache: register against a base, a module in a dtype, a composition applied to a weight, stats.
import {
  createAdapterCache,
  AdapterCache,
  type AdapterCacheOptions,
  type AdapterRegistration,
  type RegisteredAdapter,
  type CachedModule,
  type CachedModuleInfo,
  type ComposedDelta,
  type AdapterCacheStats,
  type CacheDtype,
} from '../../web/src/index.js';

export async function adapterCacheUsage(weight: Uint8Array, fetchImpl: typeof fetch): Promise<number> {
  const options: AdapterCacheOptions = {
    budgetBytes: 64 << 20,
    dtype: 'bf16',
    fetch: fetchImpl,
    base: { repo: 'owner/base' },
  };
  const cache: AdapterCache = createAdapterCache(options);
  const spec: AdapterRegistration = { repo: 'owner/sql-lora', revision: 'main', base: null };
  const registered: RegisteredAdapter = await cache.register('sql', spec);
  const dtype: CacheDtype = 'f16';
  const m: CachedModule = await cache.module('sql', 'model.layers.3.self_attn.q_proj', { dtype });
  const infos: CachedModuleInfo[] = cache.info('sql').modules;
  const d: ComposedDelta | null = await cache.compose(
    [{ id: 'sql', scale: 0.7 }, { id: 'chat' }],
    'model.layers.3.self_attn.q_proj',
  );
  const merged = d ? d.applyTo(weight, { dtype: 'BF16', shape: [4096, 4096], layout: 'out-in' }) : weight;
  // @ts-expect-error budgetBytes is required
  createAdapterCache({ dtype: 'f32' });
  // @ts-expect-error no such dtype
  await cache.module('sql', 'x', { dtype: 'f64' });
  const s: AdapterCacheStats = cache.stats();
  const { changed } = await cache.refresh('sql');
  await cache.unregister('sql');
  await cache.close();
  return m.A.length + infos.length + merged.length + s.peakResidentBytes + registered.modules + (changed ? 1 : 0);
}

// Pushing outputs to the Hub (pushToHub): bytes, a Blob, a file path, or a deterministic output replayed.
export async function pushUsage(bytes: Uint8Array, blob: Blob): Promise<string> {
  const files: PushFile[] = [
    { path: 'config.json', content: bytes },
    { path: 'README.md', content: blob },
    { path: 'adapter_model.safetensors', content: './out/adapter_model.safetensors' },
    {
      path: 'model.safetensors',
      content: () =>
        mergeRemoteShard({ base: { repo: 'owner/base' }, adapter: { repo: 'owner/lora' } }).then((f) => f.stream),
      size: 1 << 30,
    },
  ];
  const options: PushOptions = {
    repo: 'owner/merged',
    files,
    token: 'hf_x',
    createPr: true,
    branch: 'dev',
    retries: 3,
    onProgress: (p: PushProgress) => void (p.phase === 'uploading' ? p.bytes / p.total : 0),
  };
  const result: PushResult = await pushToHub(options);
  // @ts-expect-error the repo is required
  await pushToHub({ files, token: 'hf_x' });
  return result.pullRequestUrl ?? result.commit + result.files.filter((f) => f.lfs).length;
}

// The subpath entries, resolved as an application resolves them (the package's exports and their `types`): the
// edge helpers with the adapter cache, and the browser's save helper.
import * as edge from 'peft-bridge/edge';
import { saveStreams as saveInBrowser, type DirectoryHandle as BrowserDirectory } from 'peft-bridge/browser';
// @ts-expect-error the worker helpers are exported by peft-bridge/edge only
import { workerHubAccess as notInRoot } from '../../web/src/index.js';

export async function edgeUsage(request: Request, error: unknown, dir: BrowserDirectory): Promise<number> {
  const { token, trusted } = edge.workerHubAccess(request, { token: 'hf_x', secret: 's' });
  const status: number = edge.workerErrorStatus(error);
  const allowed = 'https://hub.example';
  const { endpoint, own } = await edge.workerEndpoint(null, { endpoint: 'https://huggingface.co', allowed });
  const cache: edge.AdapterCache = edge.createAdapterCache({ budgetBytes: 1 << 20 });
  const stats: edge.AdapterCacheStats = await edge.inOwnRequest(Promise.resolve(cache.stats()));
  // @ts-expect-error workerEndpoint needs the worker's endpoint
  void edge.workerEndpoint(null, {});
  const saved = await saveInBrowser([{ path: 'a.json', stream: new Blob(['{}']).stream() }], { directoryHandle: dir });
  const flags = (trusted ? 1 : 0) + (own ? 1 : 0);
  return status + flags + (token ?? endpoint).length + stats.peakResidentBytes + saved.length;
}
