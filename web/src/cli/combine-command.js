// combine for the npm CLI (src/cli/combine_command.cc).
import { openCombine } from '../ops/combine.js';
import { explainInput, fail, flag, module, option, out } from './io.js';
import { loadAdapterDir, namingTables, remoteChecked } from './inputs.js';
import {
  OutputTransaction,
  adapterFacts,
  describeOutputDirectory,
  fileFact,
  namedInputFacts,
  planOutput,
} from './output.js';

export async function runCombine(line) {
  const o = {
    json: flag(line, 'json'),
    dryRun: flag(line, 'dry-run'),
    force: flag(line, 'force'),
    followLinks: flag(line, 'follow-links'),
    strict: flag(line, 'strict'),
    from: option(line, 'from'),
    arch: option(line, 'arch'),
    baseConfig: option(line, 'base-config'),
  };
  const quiet = flag(line, 'quiet');
  const labels = line.positional;
  let job = null;
  let output = null;
  try {
    // The numbers as the native CLI reads them (app::CombineOptionsOf), typed for the core's CombineJob.
    o.combineOptionsJson = remoteChecked(module.combineOptionsFromLine(JSON.stringify(line))).optionsJson;
    o.namingTables = await namingTables(line);
    const facts = [];
    // Each adapter opened, then read, before the next one is opened, as natively.
    const openers = labels.map((given) => async () => {
      const files = await loadAdapterDir(given, o.baseConfig).catch(async (e) => {
        throw await explainInput(e, given, 'adapter');
      });
      facts.push(...(await adapterFacts('ADAPTER', given, files.weightsPath)));
      return files;
    });
    job = await openCombine(openers, labels, o);
    if (o.baseConfig !== null) facts.push(await fileFact('--base-config', o.baseConfig, null));
    facts.push(...(await namedInputFacts(line)));
    planOutput('combine', facts, null, o);
    if (!o.dryRun) {
      const outDir = option(line, 'out');
      const names = [job.weightsName, ...(job.config ? [job.config.name] : [])];
      output = await OutputTransaction.begin(
        outDir,
        planOutput('combine', facts, await describeOutputDirectory('--out', outDir, names), o),
      );
      // The plan is told before the work starts; the outcome follows it.
      if (!o.json && !quiet) await out(job.plan);
      const weights = await output.add(job.weightsName);
      let pending = [];
      await job.writeWeights(
        (bytes) => pending.push(bytes),
        async () => {
          for (const bytes of pending) await output.write(weights, bytes);
          pending = [];
        },
      );
      for (const bytes of pending) await output.write(weights, bytes);
      if (job.config) await output.write(await output.add(job.config.name), job.config.bytes);
      await output.commit();
    }
    const r = job.result();
    // A dry run's plan is all it prints; a combination's plan was printed before the work.
    if (o.json || !quiet) await out(o.json ? r.json : o.dryRun ? r.text : r.outcome);
    return 0;
  } catch (error) {
    return fail(error, o.json);
  } finally {
    await output?.close();
    await job?.close();
  }
}
