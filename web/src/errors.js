// One error class for everything the format and the core reject, with the codes the CLI prints.

const RENDERED = Symbol('rendered');

/**
 * A safetensors file (or a writer spec, or a conversion request) the core rejected. `code` is one of the
 * core's error names, the same strings the CLI prints: HeaderTooSmall, HeaderTooLarge, InvalidHeaderLength,
 * InvalidHeader, InvalidHeaderDeserialization, InvalidOffset, ValidationOverflow, MisalignedSlice,
 * TensorInvalidInfo, MetadataIncompleteBuffer, InvalidArgument, UnsupportedDtype, IoError, and for adapters
 * InvalidConfig, UnsupportedAdapter, UnresolvedTensor, ShapeMismatch, for merges ModulesNotFound and
 * UnsupportedBase (a targeted base weight that is quantized), and LimitExceeded for a request beyond a configured
 * bound (a composition's rank or size, a cache's registrations).
 * A file that is not safetensors at all says what it looks like (JSON, text, a zip…) in its message.
 */
export class SafetensorsError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   * @param {{tensor?: string | null, offset?: number | null, problems?: Array<{code: string, module: string | null, message: string}>, cause?: unknown}} [details]
   */
  constructor(code, message, details = {}) {
    super(message, details.cause !== undefined ? { cause: details.cause } : undefined);
    this.name = 'SafetensorsError';
    /** @type {string} */
    this.code = code;
    /** The tensor concerned, if any. @type {string | null} */
    this.tensor = details.tensor ?? null;
    /** Absolute byte offset in the file, if any. @type {number | null} */
    this.offset = details.offset ?? null;
    /** Every problem, when the error reports several (a merge plan's); else empty. */
    this.problems = details.problems ?? [];
  }
}

/**
 * Builds the error a native handle holds (its RenderErrorJson output), keeping the core's own renderings so
 * the npm CLI prints exactly the bytes the native CLI prints. Internal.
 */
export function errorFromHandle(handle) {
  const json = handle.errorJson();
  const text = handle.errorText();
  const { error } = JSON.parse(json);
  const e = new SafetensorsError(error.code, error.message, {
    tensor: error.tensor,
    offset: error.offset,
    problems: error.problems,
  });
  Object.defineProperty(e, RENDERED, { value: { json, text } });
  return e;
}

/** The error of a plain binding's failure value ({ok: false, errorJson, errorText}, wasm/failure_value.h). Internal. */
export const errorFromValue = (r) => errorFromHandle({ errorJson: () => r.errorJson, errorText: () => r.errorText });

/** The core's rendering of an error (JSON or text), if it came from the core. Internal. */
export function renderedError(error, asJson) {
  const r = error?.[RENDERED];
  return r ? (asJson ? r.json : r.text) : null;
}

/**
 * An error as a structured-clone-safe message (a worker's failure sent to the page or to the npm CLI's main
 * thread): a SafetensorsError keeps its code, details and the core's renderings; anything else its name, message
 * and code, if a string. Internal.
 */
export function errorToMessage(error) {
  if (error instanceof SafetensorsError) {
    const { code, message, tensor, offset, problems } = error;
    return { kind: 'SafetensorsError', code, message, tensor, offset, problems, rendered: error[RENDERED] ?? null };
  }
  // A code (the npm CLI's own failures carry one, rendered as the core renders it) goes along too.
  const code = typeof error?.code === 'string' ? error.code : undefined;
  return { kind: 'Error', name: error?.name ?? 'Error', message: String(error?.message ?? error), code };
}

/** The error errorToMessage described, rebuilt on this side. Internal. */
export function errorFromMessage(m) {
  if (m.kind === 'SafetensorsError') {
    const e = new SafetensorsError(m.code, m.message, { tensor: m.tensor, offset: m.offset, problems: m.problems });
    if (m.rendered) Object.defineProperty(e, RENDERED, { value: m.rendered });
    return e;
  }
  // A built-in class comes back as itself (a TypeError stays one); any other error as an Error with its name.
  const Class = BUILT_IN_ERRORS[m.name] ?? Error;
  const e = new Class(m.message);
  if (e.name !== m.name) e.name = m.name;
  if (m.code !== undefined) e.code = m.code;
  return e;
}

const BUILT_IN_ERRORS = { TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError };

/** The abort reason as an error: the signal's reason, or an AbortError. Internal. */
export function abortReason(signal) {
  if (signal.reason !== undefined) return signal.reason;
  const e = new Error('The operation was aborted');
  e.name = 'AbortError';
  return e;
}

/** Throws the abort reason if `signal` is aborted. Internal. */
export function throwIfAborted(signal) {
  if (signal?.aborted) throw abortReason(signal);
}
