// inspect and convert for the npm CLI (src/cli/inspect_command.cc, convert_command.cc).
import { createConversion } from '../ops/convert.js';
import { isRemote } from '../remote/hub.js';
import { inspectRendered } from '../ops/inspect.js';
import { err, explainInput, fail, flag, isDirectory, module, option, out } from './io.js';
import { inspectLocalModel, inspectRemoteModel, openInput, remoteAddress, remoteOptions } from './inputs.js';
import { OutputTransaction, baseName, describeOutputFile, fileFact, namedInputFacts, planOutput } from './output.js';
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
  const json = flag(line, 'json');
  const dtype = option(line, 'dtype');
  const order = option(line, 'order') ?? 'reference';
  const { positional } = line;
  const [inPath, outPath] = positional;

  let input;
  let output = null;
  let progress = null;
  try {
    input = await openInput(inPath);
    // OUT may replace a file, never IN (whatever the path: a hard link, a path through a link to IN's directory).
    const plan = planOutput('convert', [await fileFact('IN', inPath, null), ...(await namedInputFacts(line))], await describeOutputFile(outPath), {});
    let planText = '';
    progress = stderrProgress(line, input.source.size);
    const onProgress = ({ bytesRead }) => progress.update(bytesRead); // the bytes of IN read, header included
    const { readable, summary } = createConversion(input.source, { dtype, order, onPlan: (text) => (planText = text), onProgress });
    const reader = readable.getReader();
    try {
      // The first chunk is the output header: the input header is valid and the plan made before OUT is touched.
      let next = await reader.read();
      // The text is the plan, told before the work starts; the JSON, one document, once the output is in place.
      if (!json && !flag(line, 'quiet')) await out(planText);
      output = OutputTransaction.forFile(outPath, plan);
      const file = await output.add(baseName(outPath));
      progress.startFile(baseName(inPath), 0);
      while (!next.done) {
        await output.write(file, next.value);
        next = await reader.read();
      }
    } catch (error) {
      await reader.cancel(error).catch(() => {});
      throw error;
    }
    const report = await summary;
    await output.commit();
    progress.finish();
    if (json) await out(report.json);
    return 0;
  } catch (error) {
    progress?.abandon();
    return fail(await explainInput(error, inPath, 'tensor'), json);
  } finally {
    progress?.close();
    await output?.close();
    await input?.handle.close();
  }
}
