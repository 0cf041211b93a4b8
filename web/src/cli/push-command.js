// --push-to for the npm CLI (src/app/push_target.h has the grammar, the messages and the summary): once a
// command has written its outputs as it does without the option, the files it wrote are pushed to the Hub repo
// in one commit with pushToHub (web/src/push.js), read from disk (hashed in one pass, uploaded in a second).
// The token and endpoint are the ones remote reads use (HF_TOKEN or huggingface_hub's token file, HF_ENDPOINT).
import { nodeFiles } from '../node-files.js';
import { nodeUpload } from '../node-upload.js';
import { pushToHub, setUploadTransport } from '../push.js';
import { setLocalFiles } from '../sources.js';
import { CliFailure, err, fail, flag, module, option } from './io.js';
import { remoteOptions } from './inputs.js';
import { committedOutputs } from './output.js';
import { stderrProgress } from './progress.js';

// the written files are read from disk, and uploads go through node:http (node-upload.js), as in the Node entry
setLocalFiles(nodeFiles);
setUploadTransport(nodeUpload);

/** Pushes what the command wrote (status 0 or 1). */
export async function pushOutputs(line) {
  const target = JSON.parse(module.pushTarget(option(line, 'push-to')));
  const quiet = flag(line, 'quiet');
  let progress = null;
  try {
    if (target.error) throw new CliFailure('InvalidArgument', target.error); // the grammar checked it already
    const { token, endpoint, http } = remoteOptions();
    if (!token) throw new CliFailure('InvalidArgument', module.pushNeedsToken());
    const files = committedOutputs.map((f) => ({ path: f.path, content: f.file }));
    if (!files.length) throw new CliFailure('IoError', 'nothing was written to push');
    const { stat } = await import('node:fs/promises');
    let total = 0;
    for (const f of files) total += (await stat(f.content)).size;
    // hashed once and sent once: two passes over the LFS files
    progress = stderrProgress(line, 2 * total, { started: true });
    let current = null;
    const done = new Map();
    const result = await pushToHub({
      repo: target.repo,
      branch: target.branch,
      files,
      token,
      endpoint,
      // the retries and deadlines of remote reads (the PB_HTTP_* variables, docs/remote.md), as the native CLI reads them
      http,
      createPr: flag(line, 'create-pr'),
      createRepo: flag(line, 'create-repo'),
      private: flag(line, 'private'),
      commitMessage: option(line, 'commit-message') ?? module.pushCommitTitle(line.command, files.length),
      onProgress: (e) => {
        if (e.phase !== 'hashing' && e.phase !== 'uploading') return;
        done.set(`${e.phase}:${e.path}`, e.bytes);
        let sum = 0;
        for (const v of done.values()) sum += v;
        if (current !== e.path) {
          current = e.path;
          progress.startFile(e.path, sum);
        } else progress.update(sum);
      },
    });
    progress.finish();
    if (!quiet) {
      await err(module.renderPushOutcome(JSON.stringify({ ...result, repo: target.repo, branch: target.branch, createPr: flag(line, 'create-pr') })));
    }
    return 0;
  } catch (error) {
    progress?.abandon();
    // on stderr as text, also with --json: standard output holds the command's own JSON summary
    return fail(error, false);
  } finally {
    progress?.close();
  }
}
