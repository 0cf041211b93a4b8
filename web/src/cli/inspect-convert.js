// inspect and convert for the npm CLI (src/cli/inspect_command.cc, convert_command.cc).
import { isRemote } from '../remote/hub.js';
import { openJob, run } from '../job-driver.js';
import { openSource } from '../io/sources.js';
import { inspectRendered } from '../ops/inspect.js';
import { err, explainInput, fail, flag, isDirectory, module, out } from './io.js';
import { inspectLocalModel, inspectRemoteModel, openInput, remoteAddress, remoteOptions } from './inputs.js';
import { OutputTransaction, baseName, describeOutputFile, fileFact, namedInputFacts } from './output.js';
import { stderrProgress } from './progress.js';

export async function runInspect(line) {
  const json = flag(line, 'json');
  const { positional } = line;
  const arg = positional[0];
  let input;
  try {
    const render = json ? 'json' : 'text';
    // A repo, a folder or an index: every shard's header (the shared rules say which files).
    if (isRemote(arg) && remoteAddress(arg, remoteOptions()).model) {
      await out(await inspectRemoteModel(arg, remoteOptions(), json));
      return 0;
    }
    // A model's folder or its index, as for a Hub repo: every shard's header and the totals.
    if (!isRemote(arg) && ((await isDirectory(arg)) || module.isModelIndexName(arg.slice(arg.lastIndexOf('/') + 1)))) {
      try {
        await out(await inspectLocalModel(arg, json));
      } catch (error) {
        return fail(await explainInput(error, arg, 'base'), json);
      }
      return 0;
    }
    const report = isRemote(arg)
      ? await inspectRendered(arg, { render, ...remoteOptions() })
      : await inspectRendered((input = await openInput(arg)).source, { render });
    await out(json ? report.json : report.text);
    return 0;
  } catch (error) {
    return fail(isRemote(arg) ? error : await explainInput(error, arg, 'tensor'), json);
  } finally {
    await input?.handle.close();
  }
}

export async function runConvert(line) {
  // convert --quantize, or of a model's folder or index, writes a model folder, as merge does with no adapter (as the
  // native CLI's main.cc; the rule is the core's ConvertWritesModelFolder).
  const route = JSON.parse(module.convertRoute(JSON.stringify(line), await isDirectory(line.positional[0])));
  if (route.usageError) {
    await (route.usageErrorJson ? out : err)(route.usageError);
    return 2;
  }
  if (route.folder) return (await import('./merge-command.js')).runMerge(line);
  // One file into one: the sequence is the core's convert job (app/convert_job.h); here IN is opened, the output
  // policy's facts gathered, and the job driven (../job-driver.js) into the output transaction.
  const json = flag(line, 'json');
  const [inPath, outPath] = line.positional;
  let input;
  let job = null;
  let output = null;
  let progress = null;
  try {
    input = await openInput(inPath);
    const inputs = [await fileFact('IN', inPath, null), ...(await namedInputFacts(line))];
    const target = await describeOutputFile(outPath);
    const request = { command: 'convert', inputs, out: target, force: false, followLinks: false };
    job = await openJob('convert', { line, inputSize: input.source.size, output: request });
    progress = stderrProgress(line, input.source.size);
    let file = null;
    const sink = {
      async write(_output, at, bytes) {
        if (!output) {
          output = OutputTransaction.forFile(outPath, JSON.parse(job.handle.outputPlanJson()));
          file = await output.add(baseName(outPath));
        }
        await output.writeAt(file, at, bytes);
      },
      commit: () => output.commit(),
    };
    let shown = null;
    const onProgress = ({ input: i, done }) => {
      if (shown !== i) progress.startFile(baseName(inPath), 0); // the file name, not its path
      shown = i;
      progress.update(done);
    };
    await run(job, [await openSource(input.source)], sink, { onMessage: out, onProgress });
    progress.finish();
    const summary = job.handle.summary();
    if (summary) await out(summary);
    return 0;
  } catch (error) {
    progress?.abandon();
    return fail(await explainInput(error, inPath, 'tensor'), json);
  } finally {
    progress?.close();
    await output?.close();
    job?.close();
    await input?.handle.close();
  }
}
