// Public API of peft-bridge. Sizes, offsets and shape entries are JS numbers (exact up to 2^53 - 1; a shape
// entry above that, possible only in zero-size tensors, loses precision). Nothing here exposes the
// WebAssembly module, its heap or pointers.
//
// Errors: every failure of input (a malformed file, a config the core rejects, a missing file, an HTTP failure,
// a path outside Node) rejects with SafetensorsError and its `code`. A TypeError is thrown (or rejects) only for
// a programming error, a wrong argument type: a source that is none of the Source forms, stream chunks that are
// not bytes, a missing `options.dtype` (convert) or `options.to` (translateAdapter), an unknown `order` or merge
// `dtype` name, options or inputs that are not objects. An abort rejects with the signal's reason.
//
// A trap inside the WebAssembly module (an out-of-bounds access, an abort, running out of memory: a defect of
// ours, never an input error) fails the call with the engine's error (a `WebAssembly.RuntimeError`) and discards
// the instance: the next call of any function runs in a fresh one. Objects tied to the discarded instance (an
// open writer or merge session, an {@link AdapterCache}) then fail with an Error whose `code` is
// `ModuleDiscarded` instead of using it.

// `Symbol.dispose` (TC39 explicit resource management) is in TypeScript's `esnext.disposable` lib, not in `es2022`:
// declared here too, so that these types compile under `lib: ["es2022"]` (the writer's `[Symbol.dispose]()` is
// then still callable; `using` needs the runtime's and TypeScript's support). The same declaration as the lib's,
// which it merges with when both are present.
declare global {
  interface SymbolConstructor {
    readonly dispose: unique symbol;
  }
}

/** Options for {@link init}. Give at most one of the three; with none, the entry the package's export conditions
 * chose loads the packaged .wasm: `node` reads it with `fs`, `browser` fetches it from beside the package,
 * `workerd` imports it as a compiled module. */
export interface InitOptions {
  /** A precompiled module: required on edge runtimes that refuse to compile WebAssembly at run time. */
  wasmModule?: WebAssembly.Module;
  /** The bytes of `peft_bridge_wasm.wasm`. */
  wasmBinary?: ArrayBuffer | ArrayBufferView;
  /** Where to fetch `peft_bridge_wasm.wasm` from. */
  wasmUrl?: string | URL;
}

/** Loads the WebAssembly module once (memoized: later calls return the first call's promise and ignore their
 * options). Every other function calls it on demand. */
export function init(options?: InitOptions): Promise<void>;

/** Error codes, the same strings the CLI prints. */
export type SafetensorsErrorCode =
  | 'HeaderTooSmall'
  | 'HeaderTooLarge'
  | 'InvalidHeaderLength'
  | 'InvalidHeader'
  | 'InvalidHeaderDeserialization'
  | 'InvalidOffset'
  | 'ValidationOverflow'
  | 'MisalignedSlice'
  | 'TensorInvalidInfo'
  | 'MetadataIncompleteBuffer'
  | 'InvalidArgument'
  | 'UnsupportedDtype'
  | 'IoError'
  | 'OutOfMemory'
  | 'InvalidConfig'
  | 'UnsupportedAdapter'
  | 'UnresolvedTensor'
  | 'ShapeMismatch'
  | 'ModulesNotFound'
  | 'UnsupportedBase'
  | 'LimitExceeded';

/** One of several problems an error reports together (a merge plan's base/adapter mismatches). */
export interface SafetensorsProblem {
  /** ModulesNotFound (the base lacks the module), ShapeMismatch, UnsupportedAdapter (a refusal), UnsupportedBase
   * (the base weight the module targets is quantized). */
  readonly code: SafetensorsErrorCode;
  /** The adapter module (or tensor key) concerned, if any. */
  readonly module: string | null;
  /** One line saying what is wrong (the message lists at most 20 of them; this array has all). */
  readonly message: string;
}

/** Invalid input (or an unusable request) as reported by the core. */
export class SafetensorsError extends Error {
  constructor(
    code: SafetensorsErrorCode | string,
    message: string,
    details?: { tensor?: string | null; offset?: number | null; cause?: unknown },
  );
  readonly name: 'SafetensorsError';
  readonly code: SafetensorsErrorCode;
  /** The tensor concerned, if any. */
  readonly tensor: string | null;
  /** Absolute byte offset in the file, if any. */
  readonly offset: number | null;
  /** The HTTP status, when a remote read failed with an HTTP error (IoError). */
  readonly status?: number;
  /** Every problem, when the error reports several: a merge plan's (ModulesNotFound when the adapter's modules
   * are not all in the base, typically an adapter of another model; the message leads with a headline naming
   * both models, e.g. "adapter trained on gpt2 (GPT2LMHeadModel); base is LlamaForCausalLM: 0 of 36 modules
   * found"). Empty otherwise. Also the CLIs' `--json` error's `problems`. */
  readonly problems: readonly SafetensorsProblem[];
}

/** A source of known size read by ranges (e.g. a file read with positional reads). */
export interface RandomAccessSource {
  readonly size: number;
  /** `length` bytes at `offset` (fewer only at the end of the source). */
  read(offset: number, length: number): Promise<Uint8Array> | Uint8Array;
  /** Releases the source (a file handle, an open response). Called once when the library is done with a source
   * it asked for ({@link MergeBase.open}'s results); a source you pass to a function directly stays yours (it may
   * be read again: `inspect(file)` then `readTensor(file, name)`), close it yourself. */
  close?(): void | Promise<void>;
}

/** Node only: a local file's path, or its `file:` URL (string or URL), read with positional reads (never whole).
 * Elsewhere (browsers, workers) a path rejects with InvalidArgument. A string starting `http(s)://` or `hf://` is
 * a {@link RemoteSource} instead. Failures to open or read are IoError (`cannot open `…`: No such file or
 * directory`). */
export type LocalPath = string | URL;

/** Everything the reading functions accept. Uint8Array, ArrayBuffer, Blob and RandomAccessSource have a known
 * size (full validation, including coverage, random access); streams and iterables are read in order. */
export type Source =
  | Uint8Array
  | ArrayBuffer
  | ArrayBufferView
  | Blob
  | ReadableStream<Uint8Array>
  | AsyncIterable<Uint8Array>
  | Iterable<Uint8Array>
  | RandomAccessSource
  | LocalPath;

export type Dtype =
  | 'BOOL'
  | 'F4'
  | 'F6_E2M3'
  | 'F6_E3M2'
  | 'U8'
  | 'I8'
  | 'F8_E5M2'
  | 'F8_E4M3'
  | 'F8_E8M0'
  | 'F8_E4M3FNUZ'
  | 'F8_E5M2FNUZ'
  | 'I16'
  | 'U16'
  | 'F16'
  | 'BF16'
  | 'I32'
  | 'U32'
  | 'F32'
  | 'C64'
  | 'F64'
  | 'I64'
  | 'U64';

/** The dtype vocabulary of every `dtype` option (convert, merge, combine, create, extract), the CLIs' `--dtype`: read
 * by the core in any case ('BF16', 'BFloat16'…); anything else rejects with {@link SafetensorsError} InvalidArgument. */
export type FloatDtypeName =
  | 'bf16'
  | 'bfloat16'
  | 'f16'
  | 'fp16'
  | 'float16'
  | 'half'
  | 'f32'
  | 'fp32'
  | 'float32'
  | 'float'
  | 'BF16'
  | 'F16'
  | 'F32';

export interface TensorInfo {
  name: string;
  dtype: Dtype;
  shape: number[];
  /** [begin, end) relative to the start of the data region. */
  dataOffsets: [number, number];
  byteLength: number;
}

/** A validated header. Tensors are in data order (the order of their bytes in the file). */
export interface Header {
  /** N: the header JSON's length including padding (the file's first 8 bytes). */
  headerSize: number;
  /** Bytes of tensor data (end of the last tensor). */
  dataSize: number;
  /** 8 + headerSize + dataSize. */
  fileSize: number;
  /** `__metadata__`, or null when absent. */
  metadata: Record<string, string> | null;
  tensors: TensorInfo[];
  /** Elements per dtype. */
  parameters: Partial<Record<Dtype, number>>;
  totalParameters: number;
}

export interface ReadOptions {
  signal?: AbortSignal;
}

// ---- Remote files: http(s) URLs and the Hugging Face Hub ----

/** A file on the Hub (or a server that mirrors its API, as `HF_ENDPOINT` does). */
export interface HubAddress {
  /** `owner/name`. */
  repo: string;
  /** The file's path in the repo, `/`-separated. */
  path: string;
  /** Branch, tag or commit. Default `main`. */
  revision?: string;
  /** Default: `process.env.HF_ENDPOINT` in Node when set, else `https://huggingface.co`. */
  endpoint?: string;
  /** Sent as `Authorization: Bearer …` (private and gated repos). */
  token?: string;
  /** huggingface.js's name for {@link HubAddress.token} (`token` wins when both are given). */
  accessToken?: string;
  /** huggingface.js's name for {@link HubAddress.endpoint} (`endpoint` wins when both are given). */
  hubUrl?: string;
}

/** What the remote readers take: an `http(s)://` URL, an `hf://owner/repo/path[@revision]` address, or a
 * {@link HubAddress}. */
export type RemoteSource = string | URL | HubAddress;

export interface RemoteOptions {
  signal?: AbortSignal;
  /** Sent as `Authorization: Bearer …` (a {@link HubAddress}'s own token wins) to the endpoint's origin only (for
   * a plain URL without `endpoint`, to that URL's origin), on every redirect hop that stays there, never to
   * another origin. */
  token?: string;
  /** The endpoint `hf://` addresses resolve against (default as {@link HubAddress.endpoint}). */
  endpoint?: string;
  /** huggingface.js's name for `token` (`token` wins when both are given). */
  accessToken?: string;
  /** huggingface.js's name for `endpoint` (`endpoint` wins when both are given). */
  hubUrl?: string;
  /** Retries in a row after a network error, a truncated body, an idle or too slow answer, or a 5xx / 408 / 429
   * answer (default 5; progress resets the count). Each retry resumes at the byte reached; `Retry-After` is
   * honoured up to 10 s (a longer one fails at once). Other 4xx, redirect loops, non-HTTP(S) redirects, ETag
   * changes and wrong Content-Ranges are never retried. (PB_HTTP_RETRIES in the CLIs; docs/remote.md.) */
  retries?: number;
  /** First backoff delay in ms, doubled on each retry up to 8 s (default 250; PB_HTTP_BACKOFF_MS). */
  retryDelay?: number;
  /** An attempt with no answer, or no byte, for this many ms fails and is retried (default 10000; PB_HTTP_IDLE_MS). */
  idleTimeout?: number;
  /** Each read, every attempt and wait included, ends by this many ms (default 600000; PB_HTTP_TOTAL_MS). */
  timeout?: number;
  /** Bytes/s a body must average over each `rateWindow` (default 1024; 0 turns it off; PB_HTTP_MIN_RATE). */
  minRate?: number;
  /** The minimum rate's window in ms (default 30000; PB_HTTP_RATE_WINDOW_MS). */
  rateWindow?: number;
  /** Redirects followed per request (default 10; PB_HTTP_MAX_REDIRECTS). */
  maxRedirects?: number;
  /** The largest JSON file (an index, a config) read remotely, in bytes (default 64 MiB; PB_HTTP_MAX_JSON_BYTES). */
  maxJsonBytes?: number;
  /** The same limits by their PB_HTTP_* names, as text (what the npm CLI passes from its environment). */
  http?: Record<string, string>;
  /** The fetch to use (default the global one). */
  fetch?: typeof fetch;
  /** Ranges of one file read at once (default 4): once the first answer pinned the ETag and showed Range honoured,
   * further reads run on readers of the file's policy, straight to the CDN URL it landed at, held to the same ETag. */
  readers?: number;
  /** Bytes per Range request in a remote merge's data pass (default 4 MiB); `readers` of them are kept in flight. */
  pieceSize?: number;
}

/** A remote file read by Range requests, from {@link openRemote}. Redirects are followed hop by hop; the first answer's
 * ETag and size are pinned, and a later answer with others rejects with IoError (`… changed while being read`).
 * A server that ignores Range is read as one stream, only as far as needed. When `size` is known it is a
 * {@link RandomAccessSource} every reading function accepts. */
export interface RemoteFile {
  /** The URL fetched. */
  readonly url: string;
  /** The file's size; null only when the server answered 200 without a usable Content-Length. */
  readonly size: number | null;
  /** The pinned ETag (without `W/`), or null if the server sends none. */
  readonly etag: string | null;
  /** The first answer's `X-Repo-Commit`, when the server sent (and exposed) it. */
  readonly commit: string | null;
  /** HTTP requests made so far, by all the file's readers (each redirect hop counts). */
  readonly requests: number;
  /** The most reads that ran at the same time. */
  readonly maxInFlight: number;
  /** `length` bytes at `offset`, fewer only at the end of the file. Up to `readers` reads run at once (after the
   * first, and only when the server honours Range); further ones wait their turn. */
  read(offset: number, length: number): Promise<Uint8Array>;
  /** Cancels a response body left open. */
  close(): Promise<void>;
}

/** The Hub download URL `{endpoint}/{repo}/resolve/{revision}/{path}`, segments percent-encoded (the revision as
 * one segment, so `refs/pr/1` works). Throws InvalidArgument on empty, `.` or `..` segments. */
export function hubUrl(address: { repo: string; path: string; revision?: string; endpoint?: string }): string;

/** Opens a remote file with one request for its first 64 KiB (size and ETag come from that answer). */
export function openRemote(source: RemoteSource, options?: RemoteOptions): Promise<RemoteFile>;

/** Reads and validates a header. A stream is read only as far as the header, then cancelled. A
 * {@link RemoteSource} costs one Range request (the first 64 KiB), two when the header is longer, and is
 * validated exactly as a local file of the same size. Rejects with {@link SafetensorsError} on invalid input;
 * HTTP failures are IoError (`cannot open `…`: HTTP 404: …`). */
export function inspect(source: Source | RemoteSource, options?: ReadOptions & RemoteOptions): Promise<Header>;

/** One tensor's bytes, reading nothing else after the header: for a remote file, the header's request(s) plus one
 * Range request (none if the first request already covered it). Rejects with InvalidArgument for an unknown
 * name. */
export function readTensor(
  source: Uint8Array | ArrayBuffer | ArrayBufferView | Blob | RandomAccessSource | LocalPath | RemoteSource,
  name: string,
  options?: RemoteOptions,
): Promise<Uint8Array>;

export interface InspectRepoOptions extends RemoteOptions {
  repo: string;
  /** Default `main`. Shards are read at the commit the index came from when the server names it. */
  revision?: string;
  /** Shard headers inspected at once (default 4). */
  concurrency?: number;
}

export interface RepoInfo {
  repo: string;
  /** The revision the shards were read at (the index's commit when known). */
  revision: string;
  /** `X-Repo-Commit` of the index, when the server sent it. */
  commit: string | null;
  /** `model.safetensors.index.json` as parsed, or null for a single `model.safetensors`. */
  index: { metadata?: Record<string, unknown>; weight_map: Record<string, string> } | null;
  /** Every shard, sorted by name, with its validated header. */
  shards: { path: string; header: Header }[];
}

/** Inspects every shard of a model repo from `model.safetensors.index.json` (or the single `model.safetensors`
 * when there is no index). Shard names must be plain `.safetensors` file names (InvalidConfig otherwise, before
 * any shard is read); every tensor the index maps must be in its shard. Errors name the shard
 * (`model-00002-of-00003.safetensors: …`); the first stops the others. The repo is `options.repo`, or the first
 * argument: `inspectRepo("owner/name", {revision, hubUrl, accessToken})`. */
export function inspectRepo(options: InspectRepoOptions): Promise<RepoInfo>;
export function inspectRepo(repo: string, options?: Omit<InspectRepoOptions, 'repo'>): Promise<RepoInfo>;

/** The time of the CLIs' progress line (src/app/progress_text.h): "ETA 0:05" (the bytes left at the average rate
 * so far), "ETA --:--" while nothing has moved, "in 0:12" once `done` reaches `total`. Synchronous: call
 * {@link init} first. */
export function progressTime(done: number, total: number, seconds: number): string;

/** The names of the files directly in a Hub repo's folder (the Hub's tree API, read as the CLIs read it): a
 * {@link MergeBase}'s `files`, so that a merge copies the model's tokenizer and other files as the CLI does. */
export function listRepoFiles(
  repo: HubRepo,
  options?: { endpoint?: string; token?: string; signal?: AbortSignal },
): Promise<string[]>;

export type ReadEvent =
  | { type: 'header'; header: Header }
  | {
      type: 'data';
      /** Tensor name. */
      tensor: string;
      /** Index into header.tensors. */
      tensorIndex: number;
      /** Offset of `bytes` within the tensor. */
      offset: number;
      /** A copy the caller owns. */
      bytes: Uint8Array;
    }
  | { type: 'end' };

export interface ReadProgress {
  bytesRead: number;
  totalBytes: number | null;
}

export interface ReadSafetensorsOptions extends ReadOptions {
  onProgress?: (progress: ReadProgress) => void;
}

/** Streams a file as events: one header, tensor data spans in file order, then `end` after the check that
 * exactly the described bytes arrived. Throws {@link SafetensorsError} on invalid input; leaving the loop early
 * cancels the source. */
export function readSafetensors(
  source: Source,
  options?: ReadSafetensorsOptions,
): AsyncGenerator<ReadEvent, void, undefined>;

export type TensorOrder = 'reference' | 'input';

export interface TensorSpec {
  name: string;
  dtype: Dtype;
  shape: number[];
}

export interface WriteSpec {
  tensors: TensorSpec[];
  /** Written as `__metadata__` (keys sorted) when given, even if empty. */
  metadata?: Record<string, string> | null;
  /** 'reference' (default): Python safetensors' order, dtype descending then name, byte-identical to its
   * output; 'input': the order given. */
  order?: TensorOrder;
}

export interface PlannedTensor extends TensorInfo {
  /** Position in the spec's `tensors`. */
  index: number;
}

export interface WriteLayout {
  order: TensorOrder;
  /** N, as in {@link Header.headerSize}. */
  headerSize: number;
  dataSize: number;
  totalSize: number;
  /** In write order: the order tensor bytes must be written in. */
  tensors: PlannedTensor[];
}

/** A push writer. Write every tensor's bytes in `layout.tensors` order (chunks of any size), then close(). */
export class SafetensorsWriter {
  private constructor();
  readonly layout: WriteLayout;
  /** The file: the header is available at once, data as it is written. */
  readonly readable: ReadableStream<Uint8Array>;
  /** Tensor bytes the writer accepted so far (still correct after close(), abort() or a failure). */
  readonly bytesWritten: number;
  /** Copies `bytes` in; resolves when the readable side has room for more (or once close() has ended the
   * file). Concurrent calls are allowed; pending ones reject if the writer fails, is aborted or `readable`
   * is cancelled. Rejects with {@link SafetensorsError} past the planned size, or with IoError
   * 'out of memory: …' when the WebAssembly heap cannot hold the chunk. */
  write(bytes: Uint8Array | ArrayBuffer | ArrayBufferView): Promise<void>;
  /** Checks every planned byte was written, then ends `readable` and frees the writer. */
  close(): Promise<void>;
  /** Abandons the file: `readable` errors with `reason`. */
  abort(reason?: unknown): void;
  [Symbol.dispose](): void;
}

/** Plans the file (rejects with {@link SafetensorsError} on a repeated name, an unknown dtype, an overflow…)
 * and returns a push writer. */
export function createWriter(spec: WriteSpec): Promise<SafetensorsWriter>;

export interface TensorWithData extends TensorSpec {
  /** Exactly the tensor's byte length; may be omitted for zero-size tensors. */
  data?:
    | Uint8Array
    | ArrayBuffer
    | ArrayBufferView
    | Blob
    | ReadableStream<Uint8Array>
    | AsyncIterable<Uint8Array>
    | LocalPath;
}

/** Writes a whole file as a stream, pulling each tensor's data in write order as the stream is consumed.
 * If the file cannot be finished (bad data, cancel, abort), every data stream and iterator not read to its
 * end is cancelled, those of tensors not reached yet included (streams get the reason). */
export function writeSafetensors(
  spec: WriteSpec & { tensors: TensorWithData[]; signal?: AbortSignal },
): ReadableStream<Uint8Array>;

export interface ConvertProgress {
  bytesRead: number;
  bytesWritten: number;
  /** Input size, when the source has one. */
  inputSize: number | null;
  /** Output size, known once the header is read. */
  outputSize: number | null;
}

export interface ConvertOptions {
  /** Target dtype for F16, BF16, F32, F64, F8_E4M3 and F8_E5M2 tensors; others are copied. */
  dtype: FloatDtypeName;
  /** 'reference' (the default, as the CLI's: `convert(path, {dtype})` writes the bytes `peft-bridge convert`
   * writes) needs a random-access source (Uint8Array, ArrayBuffer, Blob, RandomAccessSource, a path in Node); a
   * stream without an explicit order errors with InvalidArgument. 'input' keeps the source's order and works with
   * streams. */
  order?: TensorOrder;
  signal?: AbortSignal;
  onProgress?: (progress: ConvertProgress) => void;
}

/** The converted file as a stream. Invalid input errors the stream with {@link SafetensorsError}. */
export function convert(source: Source, options: ConvertOptions): ReadableStream<Uint8Array>;

// ---- LoRA adapters ----

/** Adapter file conventions: PEFT (`adapter_model.safetensors` + `adapter_config.json`), mlx-lm
 * (`adapters.safetensors` + its `adapter_config.json`), kohya (`lora_te_…` / `lora_unet_…` keys),
 * llama.cpp's GGUF tensor names in a safetensors file (`gguf-names`) and llama.cpp's LoRA `.gguf` file (`gguf`:
 * written as convert_lora_to_gguf.py writes it, `outtype` f32, f16, bf16 or q8_0; read from its magic, docs/gguf.md). */
export type AdapterFormat = 'peft' | 'mlx' | 'kohya' | 'gguf-names' | 'gguf';
/** What `from` accepts: the writable formats plus diffusers' attention-processor files (read only). */
export type AdapterReadFormat = AdapterFormat | 'diffusers-attnproc';

/** A JSON config: its text, its raw bytes (passed through unchanged, as the CLI reads the file), or an object
 * (serialised with `JSON.stringify`). */
export type ConfigInput = string | Uint8Array | Record<string, unknown>;

/** An adapter's files, as {@link adapterInfo}, {@link translateAdapter} and the merge functions take them.
 * `weights` is read by range (its header, then each tensor when it is needed), so an adapter of any size is
 * handled in memory bounded by its largest module: bytes, a Blob / File (sliced) or a {@link RandomAccessSource}
 * (its `size` may also be a BigInt; sizes beyond 2^53 - 1 bytes are refused with InvalidArgument). A
 * ReadableStream or iterable cannot be read by range: it is read into memory first, up to 1 GiB
 * (InvalidArgument beyond: pass a Blob or a RandomAccessSource). */
export interface AdapterInput {
  /** The adapter's safetensors file, or a llama.cpp LoRA `.gguf` file (recognised by its magic; its tensors are
   * read by range too) (in Node also its path). */
  weights: Source | { size: bigint; read(offset: number, length: number): Promise<Uint8Array> | Uint8Array };
  /** Its `adapter_config.json` (PEFT's or mlx-lm's); kohya and GGUF-named adapters have none. */
  config?: ConfigInput | null;
  /** The base model's `config.json`: architecture, head counts (GGUF row order), layer count (mlx). */
  baseConfig?: ConfigInput | null;
  /** The weights file's name, used in messages only. Default: a File's own name, else
   * 'adapter_model.safetensors'. */
  weightsName?: string;
}

/** An adapter as a directory, its files chosen by the rule both CLIs use (the core's): the weights are
 * `adapter_model.safetensors`, `adapters.safetensors` or `pytorch_lora_weights.safetensors` (the first present),
 * else the only `.safetensors` file (several: InvalidArgument), else the only `.gguf` file (a llama.cpp LoRA adapter;
 * several: InvalidArgument; none: IoError, or the pickle refusal beside an `adapter_model.bin`), with
 * `adapter_config.json` when present.
 * - In Node, a {@link LocalPath} of the directory, or of the weights file itself (its directory's
 *   `adapter_config.json` is read).
 * - A {@link HubRepo}: the folder is listed with the Hub's tree API (`/api/models/{repo}/tree/{revision}`); the
 *   weights are read by range at the commit the config came from. */
export type AdapterDirectory = LocalPath | HubRepo;

/** One runtime naming table: a file's name and JSON text, the JSON text alone, or the table as an object. */
export type NamingTableInput = { path: string; text: string } | string | Record<string, unknown>;

/** Options of {@link adapterInfo}, as the CLI's `adapter-info` options. */
export interface AdapterReadOptions extends Omit<RemoteOptions, 'signal'> {
  /** The input's convention instead of detecting it from the config and the keys (`--from`). */
  from?: AdapterReadFormat;
  /** The naming table to use: a name (llama, gpt2, …), a `model_type` or an `architectures` value (`--arch`).
   * Default: from the base config or the keys. */
  arch?: string;
  /** Naming tables supplied at run time (`--naming-table FILE`): each `{path, text}` (a file's name and JSON
   * text), a JSON text or a table object (docs/naming-tables.md). They add a model family, or replace the
   * embedded table of the same name; a malformed one fails with InvalidConfig naming it. */
  namingTables?: NamingTableInput[];
  /** Fail with UnresolvedTensor if any tensor is not understood, instead of listing it as rejected (`--strict`). */
  strict?: boolean;
  /** Overrides {@link AdapterInput.baseConfig}. Without it, translating a directory to `gguf` or `gguf-names`
   * finds the base's config as both CLIs do (docs/gguf.md): the adapter config's `base_model_name_or_path` as a
   * local folder holding config.json (Node), else, for a Hub repo `{repo}`, that Hub repo's config.json; the
   * result's `notes` say which. */
  baseConfig?: ConfigInput | null;
  signal?: AbortSignal;
}

/** One LoRA layer, in PEFT's terms. */
export interface AdapterModule {
  /** The base model's module path, e.g. `model.layers.0.self_attn.q_proj`; for LoRA on a fused experts parameter,
   * the wrapper's path as PEFT's keys spell it (`model.layers.0.mlp.experts.base_layer`). */
  path: string;
  /** The kind of layer the factors adapt (`experts`: PEFT's target_parameters on a fused 3-D experts parameter). */
  shape: 'linear' | 'embedding' | 'conv' | 'experts';
  rank: number;
  alpha: number;
  /** What the product B·A is multiplied by: alpha / rank, or alpha / sqrt(rank) with rsLoRA. */
  scaling: number;
  inFeatures: number;
  outFeatures: number;
  dtype: Dtype;
  /** Has a DoRA magnitude vector. */
  dora: boolean;
  /** Has a bias on B (PEFT's `lora_bias`). */
  loraBias: boolean;
  /** The `rank_pattern` key that set this module's rank, if one did. */
  rankPattern: string | null;
  /** The `alpha_pattern` key that set this module's alpha, if one did. */
  alphaPattern: string | null;
  /** ‖ΔW‖_F = |scaling|·‖B·A‖_F, computed from the r×r Gram matrices (ΔW is never formed). */
  deltaNorm: number;
  /** Only for shape `experts`: the parameter (`model.layers.0.mlp.experts.gate_up_proj`), its number of experts,
   * and the wrapper's nesting level (0 = outermost, the keys' count of `.base_layer`). */
  experts?: { parameter: string; experts: number; nesting: number };
}

/** What {@link adapterInfo} reports: the fields of `peft-bridge adapter-info --json` (without `ok`). */
export interface AdapterInfo {
  /** The convention the adapter was read as. */
  format: AdapterReadFormat;
  /** The naming table used, if one was needed or given. */
  arch: string | null;
  peftType: string;
  taskType: string | null;
  /** `base_model_name_or_path`, when the config names it. */
  baseModel: string | null;
  r: number;
  loraAlpha: number;
  useRslora: boolean;
  useDora: boolean;
  modules: AdapterModule[];
  /** Tensors that are not LoRA factors but are kept (e.g. `modules_to_save` such as a classifier head). */
  extras: {
    key: string;
    kind: 'modules_to_save' | 'saved_embedding' | 'bias' | 'trainable_tokens';
    dtype: Dtype;
    shape: number[];
  }[];
  /** Tensors per dtype. */
  dtypes: Partial<Record<Dtype, number>>;
  parameters: number;
  /** Config keys peft-bridge does not know (kept when writing PEFT). */
  unknownConfigKeys: string[];
  /** Every tensor that is not understood, with the reason (an error instead with `strict`). */
  rejected: { tensor: string; reason: string }[];
  notes: string[];
}

/** Reads a LoRA adapter (PEFT, mlx-lm, kohya or llama.cpp names, or a llama.cpp LoRA `.gguf`) with PEFT's meaning
 * and describes it. Rejects with {@link SafetensorsError}: the reader's codes for a bad safetensors or GGUF file, InvalidConfig for a malformed or
 * inconsistent config, UnsupportedAdapter for adapters peft-bridge cannot reproduce (LoHa, …),
 * UnresolvedTensor under `strict`, ShapeMismatch for contradictory shapes. */
export function adapterInfo(input: AdapterInput | AdapterDirectory, options?: AdapterReadOptions): Promise<AdapterInfo>;

/** Options of {@link translateAdapter}, as the CLI's `translate` options. */
export interface TranslateOptions extends AdapterReadOptions {
  /** The convention to write. */
  to: AdapterFormat;
  /** With `strict`, also fail if any tensor cannot be written in the target convention. */
  strict?: boolean;
  /** Write a config PEFT < 0.14 accepts (fails if a newer field matters) (`--old-peft`). */
  oldPeft?: boolean;
  /** Plan only: `files` is empty. */
  dryRun?: boolean;
  /** With `to: 'gguf'`: the tensors' ggml type, as convert_lora_to_gguf.py's `--outtype` (default f32). */
  outtype?: 'f32' | 'f16' | 'bf16' | 'q8_0';
  /** Write the rest when input tensors would be dropped (`--allow-partial`); `rejected` counts them. Without it the
   * translation rejects with UnresolvedTensor listing every one, as the CLI does. */
  allowPartial?: boolean;
}

/** What happens to one input tensor. */
export type TranslatePlanEntry =
  /** Written as `to`; `action` is `copy` or what was done (`transpose`, scaling folded, rows permuted, …). */
  | { from: string; to: string; action: string }
  /** Not written, and why. */
  | { from: string; to: null; reason: string };

/** An output file; `bytes` is a copy the caller owns. */
export interface AdapterFile {
  name: string;
  bytes: Uint8Array;
}

export interface TranslateResult {
  /** The convention the input was read as. */
  from: AdapterReadFormat;
  to: AdapterFormat;
  /** Every input tensor, in input order. */
  plan: TranslatePlanEntry[];
  /** Entries of `plan` written / rejected. */
  mapped: number;
  rejected: number;
  notes: string[];
  /** The weights file first, then the config if the convention has one; empty with `dryRun`. The same bytes
   * `peft-bridge translate` writes. */
  files: AdapterFile[];
}

/** Rewrites a LoRA adapter in another convention, accounting for every tensor. Rejects with
 * {@link SafetensorsError} as {@link adapterInfo} does, and with InvalidArgument for an unknown format name. */
export function translateAdapter(
  input: AdapterInput | AdapterDirectory,
  options: TranslateOptions,
): Promise<TranslateResult>;

// ---- combining adapters ----

/** Options of {@link combineAdapters}, as the CLI's `combine` options (docs/combine.md). */
export interface CombineOptions extends AdapterReadOptions {
  /** One weight per adapter (default 1 each); negative weights subtract. */
  weights?: number[];
  /** PEFT's add_weighted_adapter methods; default `cat` (exact). */
  method?:
    | 'cat'
    | 'linear'
    | 'svd'
    | 'ties'
    | 'ties_svd'
    | 'dare_linear'
    | 'dare_ties'
    | 'dare_linear_svd'
    | 'dare_ties_svd'
    | 'magnitude_prune'
    | 'magnitude_prune_svd';
  /** The svd methods' new rank (default: the largest input rank). */
  rank?: number;
  /** The fraction the pruning methods keep, in [0, 1] (required for them). */
  density?: number;
  /** TIES's sign election. */
  majoritySign?: 'total' | 'frequency';
  /** Clamp the svd methods' new factors to this quantile of their values, as PEFT does. */
  svdClamp?: number;
  /** DARE's masks: the same seed gives the same bytes on every run and platform. Default 0. */
  seed?: number;
  /** PEFT's numbers and config, its rounding and bugs included (`--peft-compat`). */
  peftCompat?: boolean;
  /** The new factors' dtype (default: the first adapter's). */
  dtype?: FloatDtypeName;
  /** Plan only: `files` is empty and no module has an error yet. */
  dryRun?: boolean;
  /** Combine the rest when an input has tensors no output holds (`--allow-partial`; each noted). Without it the
   * combination rejects with UnresolvedTensor listing every one. */
  allowPartial?: boolean;
}

export interface CombinedModule {
  path: string;
  /** Indices of the inputs that have the module, their ranks, and the combined rank. */
  inputs: number[];
  ranks: number[];
  rank: number;
  /** ‖ΔW_result − Σ wᵢ·sᵢ·Bᵢ·Aᵢ‖ / ‖Σ wᵢ·sᵢ·Bᵢ·Aᵢ‖ as PEFT applies the result (null before the work). */
  relativeError: number | null;
  /** The svd methods: the fraction of ‖ΔW‖² the kept singular values hold. */
  keptEnergy: number | null;
}

export interface CombineResult {
  method: string;
  peftCompat: boolean;
  /** The config's r (= lora_alpha: runtime scaling 1). */
  rank: number;
  dtype: string;
  /** What PEFT multiplies B·A by at run time (√r only when --peft-compat keeps an rsLoRA flag). */
  runtimeScale: number;
  inputs: { adapter: string; weight: number }[];
  modules: CombinedModule[];
  modulesToSave: { key: string; inputs: number[] }[];
  notes: string[];
  /** adapter_model.safetensors and adapter_config.json, the bytes `peft-bridge combine` writes; empty with `dryRun`. */
  files: AdapterFile[];
}

/** Combines LoRA adapters (each what {@link translateAdapter} takes) into one PEFT adapter, module by module,
 * reading each input's factors by range. Rejects with {@link SafetensorsError}: InvalidArgument for bad options,
 * UnsupportedAdapter for what no method expresses (DoRA, lora_bias, trainable tokens), ShapeMismatch when the
 * adapters disagree on a module's shape. */
export function combineAdapters(
  inputs: (AdapterInput | AdapterDirectory)[],
  options?: CombineOptions,
): Promise<CombineResult>;

/** Options of {@link createAdapter}, as the CLI's `create` options (every value is checked by the core, with the
 * CLI's messages: a bad one rejects with a SafetensorsError InvalidArgument). A remote base is read with the
 * {@link RemoteOptions} (endpoint, token, fetch, the HTTP limits). */
export interface CreateAdapterOptions extends Omit<RemoteOptions, 'signal'> {
  /** The base model: a {@link MergeBase} (each shard's header is read; with `dora` the targeted weights too, by
   * range, so its shards must then be random-access sources), a Hub repo (read at one commit, as
   * {@link extractAdapter}'s models), the URL of one .safetensors file, or in Node a local folder,
   * `model.safetensors` or index path. */
  base: ExtractModel;
  /** Module names (PEFT's list rule: a module whose path is a name or ends with `.name`; each must match one),
   * comma-separated or as an array, or `"all-linear"` (every Linear / Conv1D but the output head, the layer kinds
   * from the naming table). */
  targetModules?: string | string[];
  /** Instead of targetModules: a Python regex the whole module path must match (PEFT's string form). */
  targetRegex?: string;
  /** Rank (default 8). */
  r?: number | string;
  /** lora_alpha (default 8, PEFT's). An integer is written as an int. */
  alpha?: number | string;
  /** use_rslora: scaling alpha/sqrt(r). */
  rslora?: boolean;
  /** use_dora: the magnitudes are the base weights' row norms (the targeted weights are read). */
  dora?: boolean;
  /** lora_A's init: `kaiming` (PEFT's default, U(-1/sqrt(in), 1/sqrt(in))) or `gaussian` (N(0, 1/r)). */
  init?: 'kaiming' | 'gaussian';
  /** The random numbers' seed, 0 to 2^64-1 (default 0): the same bytes as the CLI's with the same seed. */
  seed?: number | bigint | string;
  /** The adapter's dtype (default f32, as PEFT's fresh adapter). */
  dtype?: FloatDtypeName;
  /** Plan only: `create --dry-run`'s summary and text; no weights read, no files. */
  dryRun?: boolean;
  /** What the config records as base_model_name_or_path (default: base when it is a path or a URL, `owner/name`
   * for a Hub repo; else null). */
  baseName?: string;
  /** The config's revision (default: a Hub repo's `revision`, when given). */
  revision?: string;
  /** The base's config.json, overriding the MergeBase's (naming table, auto_mapping). */
  baseConfig?: ConfigInput | null;
  arch?: string;
  namingTables?: NamingTableInput[];
  /** Aborting rejects (or errors the weights' stream) with the signal's reason. */
  signal?: AbortSignal;
  /** DoRA only: called as the base weights are read. */
  onProgress?: (progress: { bytesIn: number; totalIn: number }) => void;
}

/** What {@link createAdapter} gives: the fields of `peft-bridge create --json` (without `ok` and `dryRun`), the
 * config's text, and the two files. */
export interface CreatedAdapter {
  summary: {
    arch: string | null;
    r: number;
    loraAlpha: number;
    scaling: number;
    useRslora: boolean;
    useDora: boolean;
    init: 'kaiming' | 'gaussian';
    seed: number;
    dtype: Dtype;
    modules: { path: string; kind: 'linear' | 'conv1d'; inFeatures: number; outFeatures: number }[];
    /** What the config's target_modules holds: the names (PEFT's condensed suffixes for 20 or more), or the regex. */
    targetModules: string[] | string;
    files: { name: string; bytes: number }[];
    baseBytesRead: number;
    notes: string[];
  };
  /** The plan as the CLI prints it: `create --dry-run`'s text with `dryRun`, else the lines `create` prints
   * before the work. */
  text: string;
  /** adapter_config.json's text, as PEFT's save_pretrained writes it for these settings. */
  config: string;
  /** adapter_model.safetensors (made a tensor at a time as its stream is read: read it to the end or cancel it),
   * then adapter_config.json; none with `dryRun`. */
  files: MergedFile[];
}

/** A fresh LoRA adapter for a base model, as PEFT's get_peft_model(model, LoraConfig(...)) initialises it (lora_A
 * from PEFT's init with peft-bridge's own seeded random numbers, lora_B zero, DoRA magnitudes the base's row
 * norms) and as `peft-bridge create` writes it, byte for byte. */
export function createAdapter(options: CreateAdapterOptions): Promise<CreatedAdapter>;

/** A model for {@link extractAdapter}: a {@link MergeBase} (its shards random-access sources), a Hub repo (read at
 * one commit: the `X-Repo-Commit` of its index, else of its config.json), the URL (`https://`, `hf://`) of one
 * .safetensors file, or in Node a local folder, `model.safetensors` or index path. Remote files are read by Range:
 * the headers first, then the tensors the plan names. */
export type ExtractModel = MergeBase | HubRepo | string | URL;

/** Options of {@link extractAdapter}, as the CLI's `extract` options (every value is checked by the core, with the
 * CLI's messages: a bad one rejects with a SafetensorsError InvalidArgument). */
export interface ExtractAdapterOptions extends Omit<RemoteOptions, 'signal'> {
  /** The model before the fine-tune. */
  base: ExtractModel;
  /** The fine-tuned model: the same tensor names and shapes (else ShapeMismatch, every difference listed). */
  tuned: ExtractModel;
  /** Every module at this rank (or its smaller side). */
  rank?: number | string;
  /** Per module the smallest rank keeping this fraction of ‖ΔW‖², at most `maxRank`. */
  energy?: number | string;
  /** The rank when neither `rank` nor `energy` is given, and `energy`'s cap (default 128, mergekit's). */
  maxRank?: number | string;
  /** The layers to decompose: `"all-linear"` (default: every Linear / Conv1D but the head) or names (PEFT's list
   * rule), comma-separated or as an array. */
  modules?: string | string[];
  /** Embeddings and the head: `save` (default: modules_to_save when changed), `lora` (decomposed) or `skip`. */
  embeddings?: 'save' | 'lora' | 'skip';
  /** The adapter's dtype (default: the tuned weights'). */
  dtype?: FloatDtypeName;
  /** Plan only: the summary of `extract --dry-run --json`, no weights read, no files. */
  dryRun?: boolean;
  /** What the config records as base_model_name_or_path (default: `base` when it is a path, URL or Hub repo). */
  baseName?: string;
  /** The config's revision (default: a Hub repo's `revision`, when given). */
  revision?: string;
  /** The base's config.json, overriding the model's own (`--base-config`). */
  baseConfig?: ConfigInput | null;
  arch?: string;
  namingTables?: NamingTableInput[];
  /** Aborting rejects with the signal's reason (remote reads still running are aborted). */
  signal?: AbortSignal;
  /** Called as the models are read: bytes read of the plan's total, modules done of the plan's. */
  onProgress?: (progress: { bytesIn: number; totalIn: number; modulesDone: number; modules: number }) => void;
}

/** A module of {@link ExtractedAdapter.summary}, in plan order. */
export interface ExtractedModule {
  path: string;
  /** `linear`, `conv1d`, a convolution's kind, `embedding` (decomposed), `saved` or `embedding (saved)`. */
  kind: string;
  /** Decomposed modules: the layer's sides and the rank it gets (`rank`) or may get (`energy`). */
  inFeatures?: number;
  outFeatures?: number;
  maxRank?: number;
  /** After the work (not with `dryRun`): whether any of its tensors changed (unchanged modules are dropped). */
  changed?: boolean;
  /** Changed decomposed modules: the rank written, Σ_{i≤rank} σᵢ² / ‖ΔW‖², ‖ΔW − B·A‖_F / ‖ΔW‖_F, whether a
   * lora_B.bias was written, the SVD's power iterations. */
  rank?: number;
  energyKept?: number;
  relativeError?: number;
  bias?: boolean;
  iterations?: number;
}

/** The fields of `peft-bridge extract --json` (or `--dry-run --json`), without `ok` and `dryRun`. */
export interface ExtractSummary {
  /** The naming table used. */
  arch: string | null;
  dtype: Dtype;
  embeddings: 'save' | 'lora' | 'skip';
  rank?: number;
  energy?: number;
  maxRank: number;
  /** Bytes of both models the extraction reads. */
  readBytes: number;
  /** The largest float32 delta held at once. */
  largestDeltaBytes: number;
  modules: ExtractedModule[];
  /** Modules with 2-D or larger weights neither decomposed nor saved (not read). */
  leftOut: string[];
  /** With `embeddings: 'skip'`: the embeddings not read. */
  skippedEmbeddings: string[];
  /** After the work: the config's r, and how many modules were decomposed, saved and dropped unchanged. */
  r?: number;
  decomposed?: number;
  saved?: number;
  unchanged?: number;
  files?: { name: string; bytes: number }[];
  notes: string[];
}

/** What {@link extractAdapter} gives. */
export interface ExtractedAdapter {
  summary: ExtractSummary;
  /** The CLI's text: the plan, then (unless `dryRun`) each module's rank, kept energy and relative error. */
  text: string;
  /** adapter_config.json's text; null with `dryRun`. */
  config: string | null;
  /** adapter_model.safetensors and adapter_config.json (empty with `dryRun`), the bytes the CLI writes. The
   * weights' data is held in Blobs (outside the WebAssembly heap) with the header, made last, in front. */
  files: MergedFile[];
}

/** A LoRA adapter from a full fine-tune, as mergekit-extract-lora makes it and `peft-bridge extract` writes it, byte
 * for byte: per module the truncated SVD of W_tuned − W_base, √S split into lora_A and lora_B, r = lora_alpha per
 * module (scaling 1); changed norms (and by default embeddings and the head) saved whole; a changed bias as
 * lora_B.bias. The models are read module by module; one module's float32 delta is held at a time. */
export function extractAdapter(options: ExtractAdapterOptions): Promise<ExtractedAdapter>;

// ---- LoRA merge ----

/** Options shared by {@link createMergeStream} and {@link mergeShards}, as the CLI's `merge` options. */
export interface MergeOptions {
  /** The adapter's files (`weights` read by range, see {@link AdapterInput}). Its `baseConfig` is ignored here. */
  adapter: AdapterInput;
  /** Output dtype of every floating-point tensor (`--dtype`). Default: each tensor keeps its own. */
  dtype?: FloatDtypeName;
  /** Fail with a named module on NaN or Inf in a merged tensor (`--safe`). */
  safe?: boolean;
  /** Subtract the adapter's delta from an already merged model instead of adding it (`unmerge`). */
  unmerge?: boolean;
  /** Merge the rest when adapter tensors cannot be applied (`--allow-partial`; listed in `unmatchedKeys`). Without it
   * the merge rejects with UnresolvedTensor listing every one, as the CLI does. */
  allowPartial?: boolean;
  /** Write the merged Linear weights quantized for deployment (`--quantize`, docs/merge.md "Quantize"): 'fp8'
   * (compressed-tensors float-quantized, per-channel, dynamic FP8 activations), 'int8' / 'int4' (compressed-tensors
   * pack-quantized, weight-only). Rounded once from the merge in the model dtype, as compressed-tensors computes
   * it; config.json gets the quantization_config. Needs the base's config.json. */
  quantize?: 'fp8' | 'int8' | 'int4' | null;
  /** `--scheme`: 'per-channel' (fp8's default), 'per-group' (int's default) or 'block' (fp8 only: transformers'
   * fine-grained FP8, 128 x 128 blocks). */
  scheme?: 'per-channel' | 'per-group' | 'block' | null;
  /** `--group-size`: columns per scale with 'per-group' (default 128). */
  groupSize?: number | null;
  /** The naming table: a name (llama, gpt2, …), a `model_type` or an `architectures` value (`--arch`).
   * Default: from the base config, else detected from the module paths. */
  arch?: string;
  /** Naming tables supplied at run time (`--naming-table FILE`): each `{path, text}` (a file's name and JSON
   * text), a JSON text or a table object (docs/naming-tables.md). They add a model family, or replace the
   * embedded table of the same name; a malformed one fails with InvalidConfig naming it. */
  namingTables?: NamingTableInput[];
  /** Aborting errors the output with the signal's reason and frees the merge's memory. */
  signal?: AbortSignal;
  /** `false`: copy none of the base's other files ({@link MergeBase.files}; the CLI's `--no-copy-extra`). Default true. */
  copyExtra?: boolean;
}

export interface MergeStreamOptions extends MergeOptions {
  /** The base model's `config.json` (architecture; GPT-2 Conv1D orientation…). */
  baseConfig?: ConfigInput | null;
  /** Called after every input chunk: bytes taken in and given out so far. */
  onProgress?: (progress: { bytesIn: number; bytesOut: number }) => void;
}

/** Merges a LoRA adapter into one base safetensors file, as PEFT's `merge_and_unload` and the CLI's `merge`
 * (byte for byte): write the base file's bytes in file order (chunks of any size), read the merged file.
 * The merge is planned from the input header, so a base/adapter mismatch (ModulesNotFound, ShapeMismatch,
 * UnresolvedTensor, UnsupportedAdapter…: every one in the error's `problems`) errors the stream before any output byte. Memory stays flat whatever the file's size.
 * Errors are {@link SafetensorsError}s. */
export function createMergeStream(options: MergeStreamOptions): TransformStream<Uint8Array, Uint8Array>;

/** A shard's bytes for {@link mergeShards}: read by ranges (header first, then the tensors) when random access,
 * else a stream of the whole file. */
export type ShardSource =
  | Uint8Array
  | ArrayBuffer
  | ArrayBufferView
  | Blob
  | RandomAccessSource
  | LocalPath
  | ReadableStream<Uint8Array>
  | AsyncIterable<Uint8Array>;

export interface MergeBase {
  /** A shard's bytes by file name (`model.safetensors`, or the names the index lists). Called once per shard for
   * random-access sources; for a stream or iterable it is called twice, and must return a fresh stream each
   * time: once for the header (cancelled after it), then once for the data. A RandomAccessSource's `close()` is
   * called once the merge is done with it (finished, failed or stopped). */
  open(name: string): ShardSource | Promise<ShardSource>;
  /** `model.safetensors.index.json` for a sharded model. Without it the base is one file, `model.safetensors`. */
  index?: ConfigInput | null;
  /** The base's `config.json`: chooses the naming table, and is written back (edited if needed) as `config.json`. */
  config?: ConfigInput | null;
  /** The base folder's listing (its file names, or `{name, kind}` with kind 'file', 'directory' or 'other'): the
   * merge then copies the base's other files into its output as the CLI's `merge` does - every file that is not a
   * weight file (safetensors, .bin, .gguf, .h5, .onnx, .pt…) nor one the merge writes, hidden ones and
   * subdirectories aside: tokenizer.json, tokenizer.model, generation_config.json, chat templates… (the core's rule,
   * app/base_extras.h) - each read from `open(name)` and yielded after the merged files, byte for byte. Without it
   * nothing else is copied, as for the CLI's `--base FILE`. */
  files?: (string | { name: string; kind?: 'file' | 'directory' | 'other' })[] | null;
}

export interface MergeShardsOptions extends MergeOptions {
  base: MergeBase;
  /** Called as the merge advances: source bytes pushed and output bytes produced over the whole model, and the
   * total source bytes. */
  onProgress?: (progress: { bytesIn: number; bytesOut: number; totalIn: number }) => void;
}

/** One output file of {@link mergeShards}. */
export interface MergedFile {
  /** The file's name: a shard's (same as the input's), `model.safetensors.index.json`, `config.json`, or one of the
   * base's other files copied ({@link MergeBase.files}). */
  path: string;
  /** Its size in bytes (known from the plan before any byte is produced). */
  size: number;
  /** Its bytes, merged as they are read: read it to the end, or cancel it to skip this file (the merge goes on
   * with the next one, whose bytes are unchanged), before asking for the next file. */
  stream: ReadableStream<Uint8Array>;
}

/** Merges a LoRA adapter into a whole model, sharded or not, yielding the output files in order: each shard,
 * then `model.safetensors.index.json` (total_size recomputed, added tensors mapped) when the base has an index,
 * then `config.json` when `base.config` was given, then the base's other files when `base.files` lists its folder
 * - the files and bytes the CLI's `merge` writes. Every shard's
 * header is read and the merge planned before the first file is yielded, so mismatches reject up front. Shards
 * are streamed, never held whole; breaking out of the loop, an error or an abort frees everything. */
export function mergeShards(options: MergeShardsOptions): AsyncGenerator<MergedFile, void, undefined>;

/** What a Web Worker offers {@link mergeInWorkers} (a browser `Worker` has it). */
export interface MergeWorkerLike {
  postMessage(message: unknown, transfer?: unknown[]): void;
  onmessage: ((event: { data: any }) => void) | null;
  onerror: ((event: any) => void) | null;
  terminate(): void;
}

export interface MergeInWorkersOptions extends MergeShardsOptions {
  /** How many workers (one module instance each); at most one per shard. Default `navigator.hardwareConcurrency`. */
  workers?: number;
  /** Makes a module worker running the package's `src/ops/merge-worker.js`. Default
   * `new Worker(new URL('./merge-worker.js', import.meta.url), {type: 'module'})`, the form bundlers follow. */
  createWorker?: () => MergeWorkerLike;
}

/** {@link mergeShards} with the shards merged at once by Web Workers, one module instance each (the .wasm compiled
 * once by the page and sent to them), by plain message passing: output chunks are transferred, not copied, so the
 * page need not be cross-origin isolated. Resolves, once the page has planned the merge (a mismatch rejects before
 * any worker starts), to every output file at once, the same files and bytes as mergeShards. The streams may be
 * read in any order and at once ({@link saveStreams} writes an array's files at once); each is merged while it is
 * read, at most two chunks ahead. Read every stream to its end or cancel it; a failure in any worker, or an abort,
 * errors every stream not yet ended and stops the workers. Every shard `base.open` gives and the adapter weights
 * must be a Blob / File (sent by reference) or bytes (copied into each worker). */
export function mergeInWorkers(options: MergeInWorkersOptions): Promise<MergedFile[]>;

/** Options of {@link planMerge}: those of {@link mergeShards} without progress. */
export interface PlanMergeOptions extends MergeOptions {
  base: MergeBase;
}

/** A base tensor the adapter changes, as planned. */
export interface PlannedMergeTensor {
  shard: string;
  tensor: string;
  /** `merge`, `merge (embedding)`, `merge (experts)`, `merge (DoRA)`, `merge (DoRA, whole tensor)`,
   * `add lora_B.bias`, `replace` or `add`. */
  op: string;
  /** The adapter module's path; null for copies the adapter carries (modules_to_save, saved embeddings). */
  module: string | null;
  dtype: Dtype;
  outDtype: Dtype;
  shape: number[];
}

/** What {@link planMerge} reports: the fields of `peft-bridge merge --dry-run --json` (without `ok`, `dryRun`
 * and the timing fields) plus the planned tensors and output files. */
export interface MergePlanSummary {
  unmerge: boolean;
  /** The naming table used. */
  arch: string | null;
  modulesMatched: number;
  /** Base tensors whose values change. */
  tensorsMerged: number;
  /** The adapter's tensors that will not be applied, with the reason. */
  unmatchedKeys: { tensor: string; reason: string }[];
  /** The output shards. */
  files: { name: string; bytes: number }[];
  /** Sum of every output tensor's bytes (the index's total_size). */
  totalSize: number;
  /** Sum of the output shards' sizes. */
  bytesOut: number;
  notes: string[];
  /** The base's other files the merge copies ({@link MergeBase.files}), in byte order of their names. */
  copiedFiles: string[];
  /** With `quantize` (`--quantize`): the layout, the weights written quantized, the Linear weights kept (with the
   * reason), the config's ignore list; `errors` (per quantized weight: max |Δ|, RMS, ‖Δ‖/‖W‖ of the dequantized
   * weight) is filled after a merge, empty in a plan. */
  quantization?: {
    method: 'fp8' | 'int8' | 'int4';
    scheme: 'per-channel' | 'per-group' | 'block';
    format: 'float-quantized' | 'pack-quantized' | 'fp8';
    groupSize: number | null;
    quantized: string[];
    kept: { tensor: string; reason: string }[];
    ignore: string[];
    /** One line per class of weights kept for their dims or dtype (the CLI's `warning:` lines). */
    warnings: string[];
    errors: { tensor: string; maxAbs: number; rms: number; relative: number }[];
  };
  tensors: PlannedMergeTensor[];
  /** Every file {@link mergeShards} would yield, in order, with its size. */
  outputs: { path: string; size: number }[];
  /** Base bytes a merge reads. */
  sourceBytes: number;
}

/** Plans a whole-model merge without merging: reads every shard's header (nothing more) and the adapter, and
 * rejects as {@link mergeShards} would before its first file. Frees everything before resolving. */
export function planMerge(options: PlanMergeOptions): Promise<MergePlanSummary>;

// ---- Remote merge: a base and an adapter on the Hub or at URLs ----

/** A Hub repository (no file path): a model, or an adapter directory. */
export interface HubRepo {
  /** `owner/name`. */
  repo: string;
  /** Branch, tag or commit. Default `main`. */
  revision?: string;
  /** Default as {@link HubAddress.endpoint}. */
  endpoint?: string;
  /** Wins over the options' token. */
  token?: string;
  /** huggingface.js's name for `token`. */
  accessToken?: string;
  /** huggingface.js's name for `endpoint`. */
  hubUrl?: string;
  /** A folder inside the repo holding the files. */
  subfolder?: string;
}

export interface RemoteMergeOptions extends Omit<MergeOptions, 'adapter'>, Omit<RemoteOptions, 'signal'> {
  /** A model repo (`model.safetensors`, or the shards `model.safetensors.index.json` lists, plus `config.json`
   * when present; its other files - tokenizer… - are copied as the CLI copies them, see {@link MergeBase.files}),
   * or the URL (`https://`, `hf://`) of one .safetensors file. A repo is read at one commit: the
   * `X-Repo-Commit` of its index (else of its config.json). */
  base: HubRepo | string | URL;
  /** An adapter repo (`adapter_model.safetensors` + `adapter_config.json`), URLs of those two files, or their
   * bytes as {@link MergeOptions.adapter}. */
  adapter:
    HubRepo | { weights: string | URL; config?: string | URL | ConfigInput; weightsName?: string } | AdapterInput;
  /** The base's config.json, for a URL base (or to override the repo's). */
  baseConfig?: ConfigInput | null;
  /** Shards opened at once while planning (default 4). */
  concurrency?: number;
}

/** Reads the base's shard headers (one Range request each, `concurrency` at a time, nothing else of them) and the
 * adapter, plans, then streams each output file as {@link mergeShards} does. Shard data is fetched in 4 MiB Range
 * requests, the next one while the current is merged; network errors, truncated bodies and 5xx answers are retried
 * resuming at the byte reached, and a file whose ETag changes mid-merge fails the merge (IoError `… changed while
 * being read`). */
export function mergeRemote(
  options: RemoteMergeOptions & { onProgress?: MergeShardsOptions['onProgress'] },
): AsyncGenerator<MergedFile, void, undefined>;

/** One output file of the merge {@link mergeRemote} would do: a shard's merged bytes (only that shard's data is
 * read), `model.safetensors.index.json`, `config.json` or one of the base's files the merge copies, so that N workers can each produce some. `shard` may be
 * omitted when the output is one shard. Plan-time errors reject; an error while streaming errors the stream.
 * `size` is known before any byte. */
export function mergeRemoteShard(
  options: RemoteMergeOptions & {
    shard?: string;
    onProgress?: (progress: { bytesIn: number; bytesOut: number; totalIn: number }) => void;
  },
): Promise<MergedFile>;

/** The output `model.safetensors.index.json` text the whole merge writes (the same bytes: recomputed total_size,
 * weight_map), or null when the base is one file. */
export function mergeRemoteIndex(options: RemoteMergeOptions): Promise<string | null>;

/** {@link planMerge}'s summary for a remote base and adapter, with the revisions read: pass `revision` to every
 * worker so that all read the same commit. */
export function planRemote(
  options: RemoteMergeOptions,
): Promise<MergePlanSummary & { revision: string | null; adapterRevision: string | null }>;

/** What {@link saveStreams} uses of a `FileSystemDirectoryHandle` (spelled out so that the types need no DOM lib). */
export interface DirectoryHandle {
  getFileHandle(
    name: string,
    options?: { create?: boolean },
  ): Promise<{ createWritable(): Promise<WritableStream<any>> }>;
  removeEntry?(name: string): Promise<void>;
}

/** Writes output files into a directory from the File System Access API (`showDirectoryPicker()`), each through
 * `createWritable()` (replaced only when complete): an array's files at once, an iterable's in turn. On failure the
 * files this call wrote are removed and it rejects. Resolves to the files written. */
export function saveStreams(
  files:
    | AsyncIterable<{ path: string; size?: number; stream: ReadableStream<Uint8Array> }>
    | Iterable<{ path: string; size?: number; stream: ReadableStream<Uint8Array> }>,
  options: { directoryHandle: DirectoryHandle },
): Promise<{ path: string; size?: number }[]>;

/** One file of a push: `path` in the repo and its bytes. `content` is bytes, a Blob, a local file's path or
 * file: URL (Node), or a function giving a fresh ReadableStream / async iterable of the file's bytes each time it
 * is called (a deterministic output, e.g. `() => mergeRemoteShard({...}).then((f) => f.stream)`), with `size`. */
export interface PushFile {
  path: string;
  content:
    | Uint8Array
    | ArrayBuffer
    | Blob
    | string
    | URL
    | (() =>
        | ReadableStream<Uint8Array>
        | AsyncIterable<Uint8Array>
        | Promise<ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>>);
  /** Required when `content` is a function. */
  size?: number;
}

export type PushProgress =
  | { phase: 'createdRepo'; repo: string }
  | { phase: 'createdBranch'; branch: string }
  | { phase: 'preuploading' | 'uploadingLargeFiles' | 'committing' }
  /** bytes of `path` hashed (first pass, LFS files only) or sent (second pass) so far */
  | { phase: 'hashing' | 'uploading'; path: string; bytes: number; total: number }
  /** a failed storage or API call about to be tried again after `wait` ms */
  | { phase: 'retry'; retry: number; url: string; status: number | null; error: string | null; wait: number }
  | { phase: 'done'; commit: string };

export interface PushOptions {
  /** `owner/name` (a model repo). */
  repo: string;
  files: PushFile[];
  /** A token with write access to the repo. */
  token: string;
  /** Default as {@link HubAddress.endpoint}: `process.env.HF_ENDPOINT` in Node when set, else `https://huggingface.co`. */
  endpoint?: string;
  /** The commit's title; default `Upload <file or N files> with peft-bridge`. */
  commitMessage?: string;
  commitDescription?: string;
  /** Open a pull request (refs/pr/N) against `branch` instead of committing to it. */
  createPr?: boolean;
  /** Default 'main'. A branch that does not exist is created from main first (`refs/…` are not created). */
  branch?: string;
  /** Create the repo first if it does not exist (default false; the CLIs always do, as `hf upload`): as huggingface_hub's
   * create_repo(exist_ok=True), a repo that exists is pushed to, also when the token may not create repos in its
   * namespace; `private` then makes a created repo private. */
  createRepo?: boolean;
  private?: boolean;
  onProgress?: (progress: PushProgress) => void;
  signal?: AbortSignal;
  /** Failed attempts in a row retried for each storage or API call except the commit itself (default 5). */
  retries?: number;
  /** First backoff wait in ms, doubled per failure up to 8000; a Retry-After (≤ 10 s) wins (default 250). */
  retryDelay?: number;
  /** Every call's deadlines, as every remote read's (docs/remote.md): an attempt that sends and receives nothing
   * for this many ms fails (`no answer for N ms`; default 10000; PB_HTTP_IDLE_MS). The commit is not retried. */
  idleTimeout?: number;
  /** Each call, every attempt and wait included, ends by this many ms (default 600000; PB_HTTP_TOTAL_MS). */
  timeout?: number;
  /** Bytes/s a body sent or received must average over each `rateWindow` (default 1024; PB_HTTP_MIN_RATE). */
  minRate?: number;
  /** The minimum rate's window in ms (default 30000; PB_HTTP_RATE_WINDOW_MS). */
  rateWindow?: number;
  /** The same limits by their PB_HTTP_* names, as text (what the npm CLI passes from its environment). */
  http?: Record<string, string>;
  /** Let @huggingface/hub upload through Xet when the Hub offers it (default false: LFS basic / multipart). */
  useXet?: boolean;
  fetch?: typeof fetch;
  /** The @huggingface/hub module (`import * as hub from '@huggingface/hub'`), for bundled browser apps and workers:
   * pushToHub imports it itself only where the specifier resolves at run time (Node, import maps), since bundlers
   * would pick the package's Node build. */
  hub?: unknown;
}

export interface PushResult {
  commit: string;
  url: string;
  /** The pull request's URL with `createPr`, else null. */
  pullRequestUrl: string | null;
  branch: string;
  /** Every file pushed; `lfs`: uploaded through LFS storage (the Hub's preupload said so), else in the commit. */
  files: { path: string; size: number; lfs: boolean }[];
}

/** Pushes files to a Hub model repo in one commit, with @huggingface/hub's commit: LFS files are hashed in one
 * streaming pass and uploaded in a second (basic or multipart), nothing held whole in Node and workerd (a browser
 * holds one upload part at a time); storage and API calls are retried, the commit call is not; on any failure
 * nothing is committed. Errors are SafetensorsError (InvalidArgument for a bad repo id, path or option, IoError for
 * the Hub's refusals, with its message and status). */
export function pushToHub(options: PushOptions): Promise<PushResult>;

// ---- The adapter cache (docs/adapter-cache.md) ----

export type CacheDtype = 'f32' | 'bf16' | 'f16';

export interface AdapterCacheOptions extends Omit<RemoteOptions, 'signal'> {
  /** The most bytes held at once: converted factors of the cached modules plus every fetch in flight (its span
   * and its converted factors). Never exceeded; a module that alone needs more is refused (InvalidArgument). */
  budgetBytes: number;
  /** The dtype modules are served in unless a call names another (default 'f32'). */
  dtype?: CacheDtype;
  /** The base every adapter is checked against at registration (as `merge --dry-run`), unless its own `base`
   * says otherwise (null: none). */
  base?: HubRepo | string | URL | null;
  /** Adapters in one composition (default 16): more is InvalidArgument, before anything is read. */
  maxTerms?: number;
  /** A composition's rank Σrᵢ (default 1024): more is LimitExceeded. */
  maxRank?: number;
  /** A composed module's factors and a composed adapter's weights file, in bytes (default 1 GiB): more is
   * LimitExceeded. */
  maxComposeBytes?: number;
  /** Adapters registered at once (default 256): registrations live outside `budgetBytes` (docs/adapter-cache.md
   * measures them), so their number is bounded; one more is LimitExceeded. */
  maxRegistrations?: number;
}

export interface AdapterRegistration extends HubRepo {
  /** A folder of the repo holding the adapter. */
  subfolder?: string;
  /** The declared base (overrides the cache's; null: no check). */
  base?: HubRepo | string | URL | null;
  signal?: AbortSignal;
}

export interface RegisteredAdapter {
  id: string;
  repo: string;
  /** The commit read (X-Repo-Commit), when the server names it. */
  revision: string | null;
  /** The weights file's ETag: cached modules are keyed by it. */
  etag: string | null;
  format: string;
  /** Count of LoRA modules. */
  modules: number;
  /** The merge plan's facts when a base was declared: its commit, modules matched... */
  plan: {
    revision: string | null;
    modulesMatched: number;
    tensorsMerged: number;
    arch: string | null;
    notes: string[];
  } | null;
}

export interface CachedModuleInfo {
  name: string;
  kind: 'linear' | 'embedding' | 'conv' | 'experts';
  rank: number;
  alpha: number;
  scaling: number;
  aShape: number[];
  bShape: number[];
  sourceDtype: Dtype;
  /** [begin, end) of the weights file: the one Range request that fetches A and B. */
  span: [number, number];
  /** Bytes A and B take in each dtype. */
  bytes: Record<CacheDtype, number>;
}

export interface CachedModule {
  id: string;
  /** The adapter's module path (`model.layers.3.self_attn.q_proj`). */
  name: string;
  kind: CachedModuleInfo['kind'];
  /** A [r, in…] and B [out, r…], little-endian values in `dtype`. Read-only: the cache holds these arrays. */
  A: Uint8Array;
  B: Uint8Array;
  shapes: { A: number[]; B: number[] };
  rank: number;
  alpha: number;
  /** PEFT's scaling s for this module (alpha/r, alpha/√r with rsLoRA, rank_pattern / alpha_pattern resolved). */
  scaling: number;
  dtype: CacheDtype;
  sourceDtype: Dtype;
}

export interface ComposedDelta {
  name: string;
  /** The cat form: A = [c₁A₁; c₂A₂; …] (rank × in), B = [B₁ B₂ …] (out × rank), cᵢ = scaleᵢ·sᵢ: B·A = Σ cᵢ·Bᵢ·Aᵢ. */
  A: Uint8Array;
  B: Uint8Array;
  shapes: { A: number[]; B: number[] };
  rank: number;
  dtype: CacheDtype;
  /** Always 1: every scaling is folded into A. */
  scaling: 1;
  terms: { id: string; scale: number; scaling: number; rank: number }[];
  /** The base weight plus the delta, by the merge kernel (one adapter at scale 1: `merge`'s bytes). `dtype`: the
   * weight's ('BF16', 'bf16', ...); `outDtype` default the weight's; `layout` default 'auto' ('out-in' when the
   * shape is [out, in…], the embedding rule for an embedding module, else 'in-out' as Conv1D). */
  applyTo(
    weight: Uint8Array,
    options: { dtype: string; shape: number[]; outDtype?: string; layout?: 'auto' | 'out-in' | 'in-out' | 'embedding' },
  ): Uint8Array;
}

export interface AdapterCacheStats {
  registered: number;
  entries: number;
  residentBytes: number;
  inFlightBytes: number;
  /** The most of resident + in flight ever held: at most budgetBytes. */
  peakResidentBytes: number;
  budgetBytes: number;
  hits: number;
  misses: number;
  /** Requests that joined a fetch already in flight. */
  shared: number;
  evictions: number;
  /** Entries dropped by a revision (ETag) change or unregister. */
  invalidated: number;
  bytesFetched: number;
  /** Module spans read: one Range request each (none for a span inside the first 64 KiB, read at registration). */
  spanReads: number;
}

export class AdapterCache {
  constructor(options: AdapterCacheOptions);
  register(id: string, adapter: AdapterRegistration): Promise<RegisteredAdapter>;
  refresh(id: string): Promise<RegisteredAdapter & { changed: boolean }>;
  unregister(id: string): Promise<boolean>;
  info(id: string): Omit<RegisteredAdapter, 'modules'> & { modules: CachedModuleInfo[] };
  module(id: string, name: string, options?: { dtype?: CacheDtype; signal?: AbortSignal }): Promise<CachedModule>;
  compose(
    list: { id: string; scale?: number }[],
    name: string,
    options?: { dtype?: CacheDtype; rank?: number; signal?: AbortSignal },
  ): Promise<ComposedDelta | null>;
  /** The composition as the PEFT adapter `combine --method cat --weights … --dtype …` writes (same bytes): its
   * adapter_config.json text, and the weights file streamed module by module through the cache. */
  composeAdapter(
    list: { id: string; scale?: number }[],
    options?: { dtype?: CacheDtype; signal?: AbortSignal },
  ): Promise<{
    config: string;
    weightsName: string;
    size: number;
    rank: number;
    tensors: { name: string; dtype: string; shape: number[]; module: string; rank: number; factor: 'A' | 'B' }[];
    stream(): ReadableStream<Uint8Array>;
  }>;
  stats(): AdapterCacheStats;
  /** The bounds this cache applies (its options, else the core's defaults). */
  bounds(): Promise<{ maxTerms: number; maxRank: number; maxComposeBytes: number; maxRegistrations: number }>;
  /** Rejects (InvalidArgument) a composition of `terms` adapters above maxTerms: the core's rule, which compose and
   * composeAdapter apply themselves; for callers that look adapters up before composing. */
  checkTerms(terms: number): Promise<void>;
  /** True once the WebAssembly instance holding this cache's registrations was discarded after a trap (a failure
   * inside the module, never an input error): every call then rejects with code `ModuleDiscarded`; make a new
   * cache and register the adapters again (examples/adapter-router does). */
  readonly discarded: boolean;
  close(): Promise<void>;
}

/** An LRU cache of LoRA modules read by Range from the Hub, with per-request composition (docs/adapter-cache.md). */
export function createAdapterCache(options: AdapterCacheOptions): AdapterCache;
