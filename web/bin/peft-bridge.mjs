#!/usr/bin/env node
// peft-bridge CLI for Node: the native CLI (src/cli) over the WebAssembly build. Same commands, options, exit
// statuses and output bytes: help, version, reports and errors are all rendered by the core.
//   0 success, 1 invalid input or I/O failure, 2 usage error; 129 / 130 / 143 when a writing command is interrupted
//   by SIGHUP / SIGINT / SIGTERM (its temporary output files are removed first).
// The commands live in web/src/cli/ (a file per command family; Node's fs, streams and signals only): this file
// dispatches the command line the core parsed and reports a failed standard output.
import { strerror } from '../src/io/node-files.js';
import { err, module, out, parseCommandLine, stdoutFailure } from '../src/cli/io.js';
import { runConvert, runInspect } from '../src/cli/inspect-convert.js';
import { runAdapterInfo, runTranslate } from '../src/cli/adapter-commands.js';
import { runMerge } from '../src/cli/merge-command.js';
import { runCombine } from '../src/cli/combine-command.js';
import { runCreate } from '../src/cli/create-command.js';
import { runExtract } from '../src/cli/extract-command.js';
import { pushOutputs, runPush } from '../src/cli/push-command.js';

async function main(args) {
  const line = parseCommandLine(args);
  if (line.usageError) {
    await (line.usageErrorJson ? out : err)(line.usageError);
    return 2;
  }
  if (line.help) {
    await out(module.cliHelp(line.command));
    return 0;
  }
  if (line.version) {
    await out(`peft-bridge ${module.version()}\n`);
    return 0;
  }
  const run = {
    inspect: runInspect,
    convert: runConvert,
    'adapter-info': runAdapterInfo,
    translate: runTranslate,
    combine: runCombine,
    create: runCreate,
    extract: runExtract,
    push: runPush,
  };
  const status = await (run[line.command] ?? runMerge)(line); // merge or unmerge: the grammar knows no other command
  // --push-to: what the command wrote, pushed once it succeeded (a failed command pushes nothing)
  if (status === 0 && line.options['push-to']) return pushOutputs(line);
  return status;
}

let status = await main(process.argv.slice(2));
// A reader that closed the pipe (`| head`) wanted no more: that ends quietly, as natively.
const stdoutError = stdoutFailure();
if (stdoutError && stdoutError.code !== 'EPIPE') {
  const e = {
    code: 'IoError',
    message: `cannot write to standard output: ${strerror(stdoutError)}`,
    tensor: null,
    offset: null,
  };
  await err(module.renderError(JSON.stringify(e), false));
  status = 1;
}
process.exitCode = status;
