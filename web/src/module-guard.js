// The safety net around the WebAssembly instance: a failure inside the module never outlives its call.
// The core reports every input error as a value (a failure value, a handle's error), so anything thrown out of a
// call into the module is a trap - an out-of-bounds access, an Emscripten abort (std::bad_alloc under
// -fno-exceptions, an out-of-memory growth), a stack overflow, a JS callback that threw through C++ frames - and
// after a trap the instance's heap, stack pointer and allocator may be corrupt (one trapping request once made
// every later one fail, or return wrong answers). So the first such throw marks the instance dead: init.js
// forgets it and the next call instantiates a fresh one, and every object tied to the dead one (an open handle, an
// adapter cache's registrations, a streaming merge) fails with ModuleDiscarded instead of using it.
// Embind's BindingError is the one exception: its argument checks throw before any wasm code runs.
//
// The guard is a Proxy over the Emscripten module: its functions and classes, and the objects those classes make
// (Embind handles, recognised by their `$$`), are wrapped; everything else (HEAPU8, numbers, plain results) passes
// through as it is.

/** The error of every use of an object tied to a discarded instance (and of a call that trapped, as its cause). */
export class ModuleDiscarded extends Error {
  constructor(trap) {
    super(
      `peft-bridge: the WebAssembly instance this object belonged to was discarded after a failure inside it (${describe(trap)}); ` +
        'nothing tied to it can be used any more: open it again (new calls use a fresh instance)',
      { cause: trap },
    );
    this.name = 'ModuleDiscarded';
    this.code = 'ModuleDiscarded';
  }
}

const describe = (e) =>
  `${e?.name ?? 'Error'}: ${String(e?.message ?? e)
    .split('\n')[0]
    .slice(0, 300)}`;

/** Whether a throw out of a call into the module leaves the instance intact (Embind's checks, run before wasm). */
const leavesIntact = (error) => error?.name === 'BindingError';

const isHandle = (value) => value !== null && typeof value === 'object' && '$$' in value;

/**
 * The guarded view of `raw`. `onTrap(error)` runs once, on the first trap. Returns {module, dead()}: dead() is the
 * trap that killed the instance, or null.
 */
export function guardModule(raw, onTrap) {
  let trap = null;
  const wrappers = new WeakMap(); // raw function or handle → its guarded view

  const enter = () => {
    if (trap) throw new ModuleDiscarded(trap);
  };
  const failed = (error) => {
    if (leavesIntact(error) || error instanceof ModuleDiscarded) return error;
    if (!trap) {
      trap = error;
      onTrap(error);
    }
    return error; // the call that trapped fails with what happened; later uses with ModuleDiscarded
  };
  const run = (f) => {
    enter();
    try {
      return wrap(f());
    } catch (error) {
      throw failed(error);
    }
  };

  function wrap(value) {
    if (typeof value === 'function') return guarded(value, (target) => guardFunction(target));
    if (isHandle(value)) return guarded(value, (target) => guardHandle(target));
    return value;
  }

  function guarded(value, make) {
    let view = wrappers.get(value);
    if (!view) wrappers.set(value, (view = make(value)));
    return view;
  }

  function guardFunction(fn) {
    return new Proxy(fn, {
      apply: (target, self, args) => run(() => Reflect.apply(target, self === module ? raw : self, args)),
      construct: (target, args) => run(() => Reflect.construct(target, args)),
      get: (target, prop) => wrap(Reflect.get(target, prop)),
    });
  }

  function guardHandle(handle) {
    return new Proxy(handle, {
      get(target, prop) {
        const value = Reflect.get(target, prop);
        if (typeof value !== 'function') return value;
        // Freeing a handle of a dead instance frees nothing (the whole heap is garbage): it never throws.
        if (prop === 'delete') return () => (trap ? undefined : run(() => value.call(target)));
        return (...args) => run(() => value.apply(target, args));
      },
    });
  }

  const module = new Proxy(raw, {
    get: (target, prop) => {
      const value = Reflect.get(target, prop);
      return typeof value === 'function' ? wrap(value) : value;
    },
  });
  return { module, dead: () => trap };
}
