// adapter-info and translate for the npm CLI (src/cli/adapter_commands.cc): the adapter's files found and its
// configs read, the output policy's facts gathered, then the command's job (src/app/translate_job.h) driven
// (../job-driver.js) over the weights file into the output transaction.
import { runAdapterJob } from '../ops/adapter.js';
import { err, explainInput, fail, flag, module, option, out } from './io.js';
import { commonOptions, loadAdapterDir, namingTables, resolveBaseConfig } from './inputs.js';
import {
  OutputTransaction,
  adapterFacts,
  describeOutputDirectory,
  describeOutputFile,
  fileFact,
  namedInputFacts,
} from './output.js';
import { stderrProgress } from './progress.js';

export async function runAdapterInfo(line) {
  const o = commonOptions(line);
  try {
    const tables = await namingTables(line);
    const files = await loadAdapterDir(o.positional[0], o.baseConfig);
    let r;
    try {
      r = await runAdapterJob('adapter-info', files, { line, namingTables: tables }, () => ({ write() {} }));
    } finally {
      await files.close();
    }
    await out(r.summary);
    return 0;
  } catch (error) {
    return fail(await explainInput(error, o.positional[0], 'adapter'), o.json);
  }
}

export async function runTranslate(line) {
  const o = { ...commonOptions(line), to: option(line, 'to'), dryRun: flag(line, 'dry-run') };
  let output = null;
  let files = null;
  let progress = null;
  try {
    const tables = await namingTables(line);
    // translate --to gguf|gguf-names finds the base config as convert_lora_to_gguf.py does (resolveBaseConfig).
    const needsBase = o.to === 'gguf' || o.to === 'gguf-names';
    files = await loadAdapterDir(o.positional[0], needsBase ? null : o.baseConfig);
    const base = needsBase ? await resolveBaseConfig(o.baseConfig, files, o.positional[0]) : null;
    // The policy's facts: no link out of IN_DIR, no output over an input or into a non-empty directory. OUT is
    // described by the names the job will write (the core's TranslateOutputNames: OUT.gguf's own, or the format's).
    const inputs = await adapterFacts('IN_DIR', o.positional[0], files.weightsPath);
    if (base?.local) inputs.push(await fileFact(base.local.label, base.local.path, null));
    else if (!needsBase && o.baseConfig !== null) inputs.push(await fileFact('--base-config', o.baseConfig, null));
    inputs.push(...(await namedInputFacts(line)));
    const outPath = o.positional[1];
    const oneFile = module.translateOutputIsFile(o.to, outPath);
    let names = [];
    let request = null;
    if (!o.dryRun) {
      names = JSON.parse(module.translateOutputNames(o.to, outPath));
      request = oneFile ? await describeOutputFile(outPath) : await describeOutputDirectory('OUT_DIR', outPath, names);
      if (oneFile) names = [request.writes[0]];
    }
    const check = {
      command: 'translate',
      inputs,
      out: request,
      force: flag(line, 'force'),
      followLinks: flag(line, 'follow-links'),
    };
    const jobOptions = {
      line,
      namingTables: tables,
      output: check,
      ...(base ? { baseConfigNote: base.note, baseConfigHint: base.hint } : {}),
    };
    // Progress counts the adapter's tensor bytes read for the output, of its weights file's size.
    progress = stderrProgress(line, files.weights.size);
    const opened = [];
    const makeSink = (job) => ({
      async write(i, _at, bytes) {
        // The transaction begins at the first write, on the plan the job's policy check made.
        if (!output) {
          const plan = JSON.parse(job.handle.outputPlanJson());
          output = oneFile ? OutputTransaction.forFile(outPath, plan) : await OutputTransaction.begin(outPath, plan);
        }
        opened[i] ??= await output.add(names[i]);
        await output.write(opened[i], bytes); // each output's writes come in order of offset
      },
      commit: () => output?.commit(),
    });
    let shown = false;
    const r = await runAdapterJob('translate', files, jobOptions, makeSink, {
      onMessage: out,
      onWarning: err, // the core's translate applied the no-silent-loss rule: these are its warnings
      onProgress: ({ done }) => {
        if (!shown) progress.startFile(files.weightsName, 0);
        shown = true;
        progress.update(done);
      },
    });
    if (shown) progress.finish(); // a dry run shows no progress line
    if (r.summary) await out(r.summary);
    return 0;
  } catch (error) {
    progress?.abandon();
    return fail(await explainInput(error, o.positional[0], 'adapter'), o.json);
  } finally {
    progress?.close();
    await output?.close();
    await files?.close();
  }
}
