// create for the npm CLI (src/cli/create_command.cc): the base opened as merge opens it, the adapter planned
// and made by the core (web/src/ops/create.js's steps), written into one all-or-nothing output.
import { createSession, supplyBase, weightsChunks } from '../ops/create.js';
import { explainInput, fail, flag, option, out } from './io.js';
import { namingTables } from './inputs.js';
import { OutputTransaction, describeOutputDirectory, namedInputFacts, planOutput } from './output.js';
import { stderrProgress } from './progress.js';
import { baseFacts, openMergeBase } from './merge-command.js';

export async function runCreate(line) {
  const o = {
    base: option(line, 'base'),
    out: option(line, 'out'),
    baseConfig: option(line, 'base-config'),
    json: flag(line, 'json'),
    dryRun: flag(line, 'dry-run'),
    force: flag(line, 'force'),
    followLinks: flag(line, 'follow-links'),
  };
  const quiet = flag(line, 'quiet');
  const inputs = []; // the shards, open for reading
  let session = null;
  let output = null;
  let progress = null;
  try {
    const tables = await namingTables(line);
    session = await createSession({
      targetModules: option(line, 'target-modules'),
      targetRegex: option(line, 'target-regex'),
      r: option(line, 'r'),
      alpha: option(line, 'alpha'),
      seed: option(line, 'seed'),
      init: option(line, 'init'),
      dtype: option(line, 'dtype'),
      rslora: flag(line, 'rslora'),
      dora: flag(line, 'dora'),
      arch: option(line, 'arch'),
      baseName: o.base,
      namingTables: tables,
    });
    const base = await openMergeBase(session, o.base, o.baseConfig, inputs).catch(async (e) => {
      throw await explainInput(e, o.base, 'base');
    });
    session.check(session.handle.handle.plan(base.config ?? null));
    const plan = JSON.parse(session.handle.handle.planJson());
    const facts = [...(await baseFacts(base, o.baseConfig)), ...(await namedInputFacts(line))];
    planOutput('create', facts, null, o);
    if (!o.dryRun) {
      const names = [plan.weightsName, plan.configName];
      output = await OutputTransaction.begin(
        o.out,
        planOutput('create', facts, await describeOutputDirectory('--out', o.out, names), o),
      );
      // The plan is told before the work starts; the outcome line follows it.
      if (!o.json && !quiet) await out(session.handle.handle.summary(false, false));
      if (plan.baseBytes > 0) {
        progress = stderrProgress(line, plan.baseBytes);
        const index = new Map(base.names.map((name, i) => [name, i]));
        await supplyBase(
          session,
          plan,
          (name) => inputs[index.get(name)].source,
          undefined,
          (done) => progress.update(done),
          (shard, done) => progress.startFile(shard, done),
        );
        progress.finish();
      }
      const weights = await output.add(plan.weightsName);
      for (const bytes of weightsChunks(session)) await output.write(weights, bytes);
      await output.write(await output.add(plan.configName), new TextEncoder().encode(plan.config));
      await output.commit();
    }
    if (o.json || !quiet)
      await out(
        o.json
          ? session.handle.handle.summary(true, o.dryRun)
          : o.dryRun
            ? session.handle.handle.summary(false, true)
            : session.handle.handle.outcomeText(),
      );
    return 0;
  } catch (error) {
    progress?.abandon();
    return fail(error, o.json);
  } finally {
    progress?.close();
    await output?.close();
    for (const input of inputs) await input.handle?.close();
    session?.close();
  }
}
