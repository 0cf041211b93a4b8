// adapter-info and translate for the npm CLI (src/cli/adapter_commands.cc).
import { callAdapter } from '../ops/adapter.js';
import { err, explainInput, fail, flag, module, option, out } from './io.js';
import { commonOptions, loadAdapterDir, namingTables, resolveBaseConfig } from './inputs.js';
import {
  OutputTransaction,
  adapterFacts,
  describeOutputDirectory,
  baseName,
  describeOutputFile,
  fileFact,
  namedInputFacts,
  planOutput,
  stripTrailingSlashes,
} from './output.js';
import { stderrProgress } from './progress.js';

export async function runAdapterInfo(line) {
  const o = commonOptions(line);
  try {
    o.namingTables = await namingTables(line);
    const files = await loadAdapterDir(o.positional[0], o.baseConfig);
    let r;
    try {
      r = await callAdapter('adapterInfo', files, o);
    } finally {
      await files.close();
    }
    await out(o.json ? r.json : r.text);
    return 0;
  } catch (error) {
    return fail(await explainInput(error, o.positional[0], 'adapter'), o.json);
  }
}

export async function runTranslate(line) {
  const o = {
    ...commonOptions(line),
    to: option(line, 'to'),
    dryRun: flag(line, 'dry-run'),
    oldPeft: flag(line, 'old-peft'),
    force: flag(line, 'force'),
    allowPartial: flag(line, 'allow-partial'),
    followLinks: flag(line, 'follow-links'),
    outtype: option(line, 'outtype'),
  };

  let output = null;
  let files = null;
  let result = null;
  let progress = null;
  try {
    o.namingTables = await namingTables(line);
    // translate --to gguf|gguf-names finds the base config as convert_lora_to_gguf.py does (resolveBaseConfig).
    const needsBase = o.to === 'gguf' || o.to === 'gguf-names';
    files = await loadAdapterDir(o.positional[0], needsBase ? null : o.baseConfig);
    const base = needsBase ? await resolveBaseConfig(o.baseConfig, files, o.positional[0]) : null;
    // The plan now, the weights' bytes once the output is accepted (where the native CLI makes them).
    // OUT.gguf is one file (the core's rule), named as the user named it.
    const oneFile = module.translateOutputIsFile(o.to, o.positional[1]);
    const outFile = oneFile ? baseName(stripTrailingSlashes(o.positional[1])) : null;
    const baseText = base ? { baseConfigNote: base.note, baseConfigHint: base.hint } : {};
    result = await callAdapter('translateAdapter', files, { ...o, ...baseText, outFile, deferWrite: true });
    // The policy: no link out of IN_DIR, no silent loss, no output over an input or into a non-empty directory.
    const inputs = await adapterFacts('IN_DIR', o.positional[0], files.weightsPath);
    if (base?.local) inputs.push(await fileFact(base.local.label, base.local.path, null));
    else if (!needsBase && o.baseConfig !== null) inputs.push(await fileFact('--base-config', o.baseConfig, null));
    inputs.push(...(await namedInputFacts(line)));
    planOutput('translate', inputs, null, o);
    if (result.warnings) await err(result.warnings); // the core's translate applied the no-silent-loss rule
    if (!o.dryRun) {
      const outPath = o.positional[1];
      const names = [result.weightsName, ...(result.config ? [result.config.name] : [])];
      const request = oneFile
        ? await describeOutputFile(outPath)
        : await describeOutputDirectory('OUT_DIR', outPath, names);
      const plan = planOutput('translate', inputs, request, o);
      output = oneFile ? OutputTransaction.forFile(outPath, plan) : await OutputTransaction.begin(outPath, plan);
      // The plan is told before the work starts; the outcome line follows it.
      if (!o.json && !flag(line, 'quiet')) await out(result.plan);
      const weights = await output.add(oneFile ? request.writes[0] : result.weightsName);
      // Progress counts the adapter's tensor bytes read for the output, of its weights file's size.
      progress = stderrProgress(line, files.weights.size);
      progress.startFile(files.weightsName, 0);
      let pending = [];
      const flush = async () => {
        for (const bytes of pending) await output.write(weights, bytes);
        pending = [];
      };
      await result.writeWeights(
        (bytes) => pending.push(bytes),
        async (done) => {
          await flush();
          progress.update(done);
        },
      );
      await flush();
      progress.finish();
      if (result.config) await output.write(await output.add(result.config.name), result.config.bytes);
      await output.commit();
    }
    // A dry run's plan is all it prints; a translation's plan was printed before the work.
    if (o.json || !flag(line, 'quiet')) await out(o.json ? result.json : o.dryRun ? result.text : result.outcome);
    return 0;
  } catch (error) {
    progress?.abandon();
    return fail(await explainInput(error, o.positional[0], 'adapter'), o.json);
  } finally {
    progress?.close();
    await output?.close();
    await result?.close?.();
    await files?.close();
  }
}
