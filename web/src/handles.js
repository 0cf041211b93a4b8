// Glue between JS bytes and the native handles (wasm/bindings.cc): the input window, the chunk table, errors
// and lifetime. Internal to the package.
//
// Rules kept here so no other file has to think about them:
//  - No heap view outlives a call: HEAPU8/HEAPF64 are re-read after every call into wasm (a call may grow the
//    memory, which detaches old views), and bytes leave the heap as copies (`slice`), never as views - except
//    through inputToViews, whose caller promises to be done with them before the handle's next call - or, if it
//    calls flipOutput(), before it calls flipOutput() again.
//  - Input is copied into the handle's reusable window in pieces of at most `windowSize` bytes, so a huge
//    Uint8Array never needs a heap allocation of its size.
//  - Every handle is deleted by close(); a FinalizationRegistry frees the ones callers forget.
import { SafetensorsError, errorFromHandle } from './errors.js';

/** `Symbol.dispose`, or its registered stand-in where the runtime (Node 20) does not define it yet. */
export const disposeSymbol = Symbol.dispose ?? Symbol.for('Symbol.dispose');

/** Default largest piece copied into the heap per call. */
export const DEFAULT_WINDOW_SIZE = 8 << 20;

const registry =
  typeof FinalizationRegistry === 'function'
    ? new FinalizationRegistry((native) => {
        try {
          native.delete();
        } catch {
          // already deleted
        }
      })
    : null;

const TABLE_STRIDE = 5; // tensor, offset in tensor, in-window flag, position, length

// wasm32 addresses are 32-bit: a larger window cannot exist (and would wrap as a size_t).
const MAX_WINDOW = 2 ** 32 - 4096;

function outOfMemory(n) {
  return new SafetensorsError('IoError', `out of memory: cannot reserve ${n} bytes`);
}

export class NativeHandle {
  /**
   * @param {any} module the instantiated Emscripten module
   * @param {any} native an Embind handle (Reader, Writer, JobHandle...)
   * @param {number} [windowSize]
   */
  constructor(module, native, windowSize = DEFAULT_WINDOW_SIZE) {
    this.module = module;
    this.native = native;
    this.windowSize = Math.max(1, Math.floor(windowSize));
    registry?.register(this, native, this);
  }

  get closed() {
    return this.native === null;
  }

  /** The live native handle; throws once closed. */
  get handle() {
    if (!this.native) throw new Error('peft-bridge: handle is closed');
    return this.native;
  }

  /**
   * Copies `bytes` into the window piece by piece and calls `method(n)` for each piece. `onPiece(chunks)`
   * receives each piece's chunk table, copied out, before the next piece goes in; it is also called for the
   * failing piece, then the error is thrown.
   * @param {string} method
   * @param {Uint8Array} bytes
   * @param {(chunks: {tensor: number, offset: number, bytes: Uint8Array}[]) => void} [onPiece]
   */
  input(method, bytes, onPiece) {
    const native = this.handle;
    let pos = 0;
    do {
      const n = Math.min(this.windowSize, bytes.length - pos);
      const ptr = this.fillWindow(bytes, pos, n);
      const ok = native[method](n);
      const chunks = this.takeChunks(ptr);
      onPiece?.(chunks);
      if (!ok) throw errorFromHandle(native);
      pos += n;
    } while (pos < bytes.length);
  }

  /**
   * Like input(), for handles whose output is a byte stream: `onBytes` gets each piece's output as copied
   * Uint8Arrays, one per contiguous run (the core merges adjacent writes, so usually one), never joined
   * into a further copy. Returns whether anything was produced.
   */
  inputToBytes(method, bytes, onBytes) {
    let produced = false;
    this.input(method, bytes, (chunks) => {
      for (const c of chunks) {
        produced = true;
        onBytes(c.bytes);
      }
    });
    return produced;
  }

  /**
   * Like inputToBytes for `bytes` no longer than the window (one call), but the output the handle produced comes
   * as views of the heap, not copies (bytes passed through from the window are copied: the next input replaces
   * them): valid only until the handle's next call (which may reuse that memory). For a consumer that writes
   * each view out before anything else calls into the handle (the npm CLI's merge) - or that calls flipOutput()
   * after taking them, and then has until its next flipOutput(). A view is empty once the memory has grown:
   * start its writes before anything else runs.
   */
  inputToViews(method, bytes) {
    if (bytes.length > this.windowSize) throw new RangeError('peft-bridge: inputToViews takes one window at most');
    const native = this.handle;
    const ptr = this.fillWindow(bytes);
    const ok = native[method](bytes.length);
    if (!ok) throw errorFromHandle(native);
    return this.takeChunks(ptr, 'owned').map((c) => c.bytes);
  }

  /**
   * The calls from now on produce their output into the handle's other buffer, so the views inputToViews gave
   * of this one stay as they are until the next flipOutput() (wasm/handle.h, Chunks::Flip). A grown memory still
   * holds them where they were: a WebAssembly memory grows in place.
   */
  flipOutput() {
    this.handle.flipOutput();
  }

  /**
   * Copies `n` bytes of `bytes` from `pos` (at most one window) into the window; returns its address. The
   * window is reserved before `bytes` is touched, so a failed reservation copies (and slices) nothing.
   */
  fillWindow(bytes, pos = 0, n = bytes.length - pos) {
    const ptr = n > MAX_WINDOW ? 0 : this.handle.window(n);
    // 0: the heap cannot hold the bytes (the old window is kept). Nothing may be copied to address 0.
    if (!ptr) throw outOfMemory(n);
    this.module.HEAPU8.set(pos === 0 && n === bytes.length ? bytes : bytes.subarray(pos, pos + n), ptr);
    return ptr;
  }

  /** Calls a method that takes no window bytes; returns what it produced as one Uint8Array or null. */
  call(method, ...args) {
    const native = this.handle;
    const ok = native[method](...args);
    const out = concat(this.takeChunks(0).map((c) => c.bytes));
    if (!ok) throw errorFromHandle(native);
    return out;
  }

  /** The last call's output chunks: copies, or views (`views`: true), or views of the owned output only ('owned'). */
  takeChunks(windowPtr, views = false) {
    const native = this.handle;
    const count = native.chunkCount();
    if (count === 0) return [];
    const table = native.chunkTable();
    const owned = native.ownedBytes();
    // Views taken only now, after the last call into wasm, and dropped before the next one.
    const f64 = this.module.HEAPF64;
    const heap = this.module.HEAPU8;
    const chunks = new Array(count);
    for (let i = 0, t = table / 8; i < count; ++i, t += TABLE_STRIDE) {
      const inWindow = f64[t + 2] !== 0;
      const start = (inWindow ? windowPtr : owned) + f64[t + 3];
      const end = start + f64[t + 4];
      const view = views === true || (views === 'owned' && !inWindow);
      chunks[i] = {
        tensor: f64[t],
        offset: f64[t + 1],
        bytes: view ? heap.subarray(start, end) : heap.slice(start, end),
      };
    }
    return chunks;
  }

  close() {
    if (!this.native) return;
    registry?.unregister(this);
    const native = this.native;
    this.native = null;
    native.delete();
  }
}

/** Concatenates byte arrays into one fresh Uint8Array (the array itself when there is one); null if empty. */
export function concat(parts) {
  if (parts.length === 0) return null;
  if (parts.length === 1) return parts[0];
  let total = 0;
  for (const p of parts) total += p.length;
  const out = new Uint8Array(total);
  let pos = 0;
  for (const p of parts) {
    out.set(p, pos);
    pos += p.length;
  }
  return out;
}
