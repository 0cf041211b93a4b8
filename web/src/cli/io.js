// The npm CLI's standard streams, command-line access and error rendering (the native CLI's main.cc and
// ReportFailure): every message is the core's rendering.
import { lstat, stat } from 'node:fs/promises';
import { errorFromValue, renderedError } from '../errors.js';
import { getModule, loadedModule } from '../init.js';
import { strerror } from '../io/node-files.js';

// The current instance, whichever it is: after a trap inside a call (module-guard.js) it is discarded, and the
// next use of `module` reaches the fresh one once something has loaded it (fail() does, to render the error).
let last = await getModule();
export const module = new Proxy({}, { get: (_, prop) => (last = loadedModule() ?? last)[prop] });

// A failed write to standard output (a full disk, a closed pipe) must not crash the process through an unhandled
// 'error' event: the first failure is kept and reported once main() returns, with exit status 1.
export let stdoutError = null;
process.stdout.on('error', (error) => {
  stdoutError ??= error;
});
export const write = (stream, text) =>
  new Promise((resolve) =>
    stream.write(text, (error) => {
      if (error && stream === process.stdout) stdoutError ??= error;
      resolve();
    }),
  );
// Every text and JSON document printed passes the core's terminal rule (core/printable.h), as in the native CLI:
// a name or message from a file cannot send escape sequences to the user's terminal.
export const out = (text) => write(process.stdout, module.terminalSafe(text));
export const err = (text) => write(process.stderr, module.terminalSafe(text));

// The command line as the shared grammar parsed it (src/app/command_line.cc): {command, help, version,
// positional, options: {name: [values]}} or {usageError: text}.
export const parseCommandLine = (args) => JSON.parse(module.parseCommandLine(JSON.stringify(args)));
export const option = (line, name) => line.options[name]?.at(-1) ?? null;
export const flag = (line, name) => Object.hasOwn(line.options, name);

export class IoFailure extends Error {
  constructor(message) {
    super(message);
    this.code = 'IoError';
  }
}
export const ioFailure = (what, path, error) => new IoFailure(`${what} \`${path}\`: ${strerror(error)}`);

export async function fail(error, json) {
  await getModule(); // a fresh instance if this failure was a trap that discarded the last one
  let text = renderedError(error, json);
  if (text === null) {
    const e = {
      code: typeof error?.code === 'string' ? error.code : 'IoError',
      message: String(error?.message ?? error),
      tensor: error?.tensor ?? null,
      offset: error?.offset ?? null,
    };
    text = module.renderError(JSON.stringify(e), json);
  }
  await (json ? out(text) : err(text));
  return 1;
}

/** A read-only file read with positional reads (the file is never modified). */

// ---- adapter-info and translate (src/cli/adapter_commands.cc) ----

/** An error the CLI itself raises with a core code, rendered by the core like its own. */
export class CliFailure extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

/** An error result of the core's adapter functions, keeping the core's renderings. */
export const coreError = errorFromValue;

// The native Join: no normalisation, so messages name paths exactly as given.
export const joinPath = (dir, name) => (dir === '' || dir.endsWith('/') ? dir + name : `${dir}/${name}`);
export const isDirectory = async (path) => (await stat(path).catch(() => null))?.isDirectory() ?? false;
export const isRegularFile = async (path) => (await stat(path).catch(() => null))?.isFile() ?? false;

/** The error's {code, message, tensor, offset}, as `fail` renders it. */
export function errorFields(error) {
  const rendered = renderedError(error, true);
  if (rendered !== null) return JSON.parse(rendered).error;
  return {
    code: typeof error?.code === 'string' ? error.code : 'IoError',
    message: String(error?.message ?? error),
    tensor: error?.tensor ?? null,
    offset: error?.offset ?? null,
  };
}

/** ExplainInputError (src/app/input_hint.h), as the native ExplainInput: `error`, met reading the input the user
 * named `path`, told as what happened (a directory, a config file passed for the weights); else `error` itself.
 * `role`: 'tensor' (inspect, convert), 'adapter', 'base'. */
export async function explainInput(error, path, role) {
  const exists = await lstat(path).then(
    () => true,
    () => false,
  );
  const r = module.explainInputError(JSON.stringify(errorFields(error)), path, await isDirectory(path), exists, role);
  return r.changed ? coreError(r) : error;
}

/** The first failure writing standard output, if any (main reports it once the command returns). */
export const stdoutFailure = () => stdoutError;
