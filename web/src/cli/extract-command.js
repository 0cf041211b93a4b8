// extract for the npm CLI (src/cli/extract_command.cc): both models opened as merge opens a base (local or
// remote, headers only), planned by the core, then the ranges the core asks for read and pushed
// (web/src/ops/extract.js's steps) while it writes adapter_model.safetensors after a reserved header region; the
// header is written in place last, then adapter_config.json, in one all-or-nothing output.
import { extractSession, pumpExtract } from '../ops/extract.js';
import { explainInput, fail, flag, option, out } from './io.js';
import { namingTables } from './inputs.js';
import { OutputTransaction, describeOutputDirectory, namedInputFacts, planOutput } from './output.js';
import { stderrProgress } from './progress.js';
import { baseFacts, openMergeBase } from './merge-command.js';

export async function runExtract(line) {
  const o = {
    base: option(line, 'base'),
    tuned: option(line, 'tuned'),
    out: option(line, 'out'),
    baseConfig: option(line, 'base-config'),
    json: flag(line, 'json'),
    dryRun: flag(line, 'dry-run'),
    force: flag(line, 'force'),
    followLinks: flag(line, 'follow-links'),
  };
  const quiet = flag(line, 'quiet');
  const inputs = [[], []]; // each model's shards, open for reading: base, tuned
  let session = null;
  let output = null;
  let progress = null;
  try {
    const tables = await namingTables(line);
    session = await extractSession({
      rank: option(line, 'rank'),
      energy: option(line, 'energy'),
      maxRank: option(line, 'max-rank'),
      modules: option(line, 'modules'),
      embeddings: option(line, 'embeddings'),
      dtype: option(line, 'dtype'),
      arch: option(line, 'arch'),
      baseName: o.base,
      namingTables: tables,
    });
    const native = session.handle.handle;
    native.useModel(false);
    const base = await openMergeBase(session, o.base, o.baseConfig, inputs[0]).catch(async (e) => {
      throw await explainInput(e, o.base, 'base');
    });
    native.useModel(true);
    const tuned = await openMergeBase(session, o.tuned, null, inputs[1]).catch(async (e) => {
      throw await explainInput(e, o.tuned, 'base');
    });
    session.check(native.plan(base.config ?? null, tuned.config ?? null));
    const plan = JSON.parse(native.planJson());
    const facts = [
      ...(await baseFacts(base, o.baseConfig)),
      ...(await baseFacts(tuned, null)),
      ...(await namedInputFacts(line)),
    ];
    planOutput('extract', facts, null, o);
    if (o.dryRun) {
      if (o.json || !quiet) await out(o.json ? native.dryRunJson() : native.planText(true));
      return 0;
    }
    const names = [plan.weightsName, plan.configName];
    output = await OutputTransaction.begin(
      o.out,
      planOutput('extract', facts, await describeOutputDirectory('--out', o.out, names), o),
    );
    if (!o.json && !quiet) await out(native.planText(false));
    const weights = await output.add(plan.weightsName);
    // The header region first (filled in at the end), then the data as the core makes it.
    await output.write(weights, new Uint8Array(plan.reservedHeader));
    progress = stderrProgress(line, plan.readBytes, { started: true });
    const header = await pumpExtract(
      session,
      (isTuned, shard) => inputs[+isTuned][shard].source,
      undefined,
      (bytes) => output.write(weights, bytes),
      (done) => progress.update(Math.min(done, plan.readBytes)),
    );
    progress.finish();
    await output.writeAt(weights, 0, header);
    await output.write(await output.add(plan.configName), new TextEncoder().encode(native.config()));
    await output.commit();
    if (o.json || !quiet) await out(o.json ? native.outcomeJson() : native.outcomeText());
    return 0;
  } catch (error) {
    progress?.abandon();
    return fail(error, o.json);
  } finally {
    progress?.close();
    await output?.close();
    for (const input of inputs.flat()) await input.handle?.close();
    session?.close();
  }
}
