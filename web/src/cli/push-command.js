// --push-to and `push DIR --to` for the npm CLI (src/app/push_target.h has the grammar, the messages, the folder's
// files and the summary; src/cli/push_command.cc is the native CLI's): once a command has written its outputs as
// it does without the option, the files it wrote are pushed to the Hub repo in one commit with pushToHub
// (web/src/remote/push.js), read from disk (hashed in one pass, uploaded in a second); `push DIR` pushes a folder's
// files the same way. The repo is created when missing, as `hf upload` does. The token and endpoint are the ones remote
// reads use (HF_TOKEN or huggingface_hub's token file, HF_ENDPOINT).
import { lstat, readdir, stat } from 'node:fs/promises';
import { nodeFiles } from '../io/node-files.js';
import { nodeUpload } from '../io/node-upload.js';
import { pushToHub, setUploadTransport } from '../remote/push.js';
import { setLocalFiles } from '../io/sources.js';
import { CliFailure, coreError, err, errorFields, fail, flag, joinPath, module, option, out } from './io.js';
import { remoteOptions } from './inputs.js';
import { committedOutputs } from './output.js';
import { stderrProgress } from './progress.js';

// the written files are read from disk, and uploads go through node:http (node-upload.js), as in the Node entry
setLocalFiles(nodeFiles);
setUploadTransport(nodeUpload);

/** Pushes what the command wrote (status 0 or 1); a failure says how to push the written output again. */
export async function pushOutputs(line) {
  const files = committedOutputs.map((f) => ({ path: f.path, content: f.file }));
  return pushFiles(line, option(line, 'push-to'), files, err, module.pushRetryHint(JSON.stringify(line)));
}

/** `push DIR --to OWNER/REPO[@BRANCH]`: the folder's files (app::PushFolderFiles), or the one file named. */
export async function runPush(line) {
  const path = line.positional[0];
  let files;
  try {
    const st = await stat(path).catch(() => null);
    if (st?.isDirectory()) {
      const entries = [];
      await listFolder(path, '', entries);
      const listed = module.pushFolderFiles(path, JSON.stringify(entries));
      if (!listed.ok) throw coreError(listed);
      files = JSON.parse(listed.files).map((name) => ({ path: name, content: joinPath(path, name) }));
    } else if (st?.isFile()) {
      files = [{ path: path.slice(path.lastIndexOf('/') + 1), content: path }];
    } else {
      const exists = await lstat(path).then(
        () => true,
        () => false,
      );
      throw exists
        ? new CliFailure('InvalidArgument', `\`${path}\` is neither a folder nor a file`)
        : new CliFailure('IoError', `cannot open \`${path}\`: No such file or directory`);
    }
  } catch (error) {
    return fail(error, false);
  }
  return pushFiles(line, option(line, 'to'), files, out, '');
}

/** Every entry under `dir` (relative paths), links followed, not descending into what the core's PushSkips names
 * (nor through a link to a folder, which could lead back up), as the native ListFolder. */
async function listFolder(dir, prefix, entries) {
  const names = await readdir(prefix ? joinPath(dir, prefix) : dir).catch(() => []);
  for (const name of names) {
    const path = prefix ? `${prefix}/${name}` : name;
    const st = await stat(joinPath(dir, path)).catch(() => null);
    const kind = st?.isFile() ? 'file' : st?.isDirectory() ? 'directory' : 'other';
    entries.push({ path, kind });
    if (kind === 'directory' && !module.pushSkips(path) && (await lstat(joinPath(dir, path))).isDirectory()) {
      await listFolder(dir, path, entries);
    }
  }
}

/** Pushes `files` ({path in the repo, content: local path}) to the target `value`; the summary through `write`;
 * `hint` appended to a failure's message. */
async function pushFiles(line, value, files, write, hint) {
  const target = JSON.parse(module.pushTarget(value));
  const quiet = flag(line, 'quiet');
  let progress = null;
  try {
    if (target.error) throw new CliFailure('InvalidArgument', target.error); // the grammar checked it already
    const { token, endpoint, http } = remoteOptions();
    if (!token) throw new CliFailure('InvalidArgument', module.pushNeedsToken());
    if (!files.length) throw new CliFailure('IoError', 'nothing was written to push');
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
      createRepo: true, // as `hf upload`: a missing repo is created (--create-repo is the default)
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
      await write(
        module.renderPushOutcome(
          JSON.stringify({ ...result, repo: target.repo, branch: target.branch, createPr: flag(line, 'create-pr') }),
        ),
      );
    }
    return 0;
  } catch (error) {
    progress?.abandon();
    const e = errorFields(error);
    // on stderr as text, also with --json: standard output holds the command's own JSON summary
    return fail(
      hint ? Object.assign(new CliFailure(e.code, e.message + hint), { tensor: e.tensor, offset: e.offset }) : error,
      false,
    );
  } finally {
    progress?.close();
  }
}
