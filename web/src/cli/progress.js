// The progress line on stderr for the npm CLI's commands: the core draws it (src/app/progress_text.h).
import { module, flag } from './io.js';

/** The progress line on stderr (src/app/progress_text.h, as src/cli/stderr_progress.cc): whether it shows, when
 * it redraws and what it says are the core's; this reads the clock, the environment and the terminal, and writes.
 * Updates before the first file starts are not drawn, unless `started` (a command that names no file, as
 * extract). close() frees the core's meter. */
export function stderrProgress(line, total, { started: startedAlready = false } = {}) {
  const environment = {
    json: flag(line, 'json'),
    quiet: flag(line, 'quiet'),
    noProgress: flag(line, 'no-progress'),
    stderrIsTerminal: process.stderr.isTTY === true,
    progressVariable: process.env.PB_PROGRESS ?? null,
    clockVariable: process.env.PB_PROGRESS_CLOCK_MS ?? null,
  };
  let meter = new module.ProgressMeter(total, JSON.stringify(environment));
  const t0 = performance.now();
  const seconds = () => (performance.now() - t0) / 1000;
  let started = startedAlready;
  const draw = (text) => text && process.stderr.write(text);
  return {
    startFile(name, done) {
      started = true;
      draw(meter?.startFile(name, done, seconds()));
    },
    /** Shards merged at once: one line for all ("N files at once", the core's words). */
    startFilesAtOnce(count, done) {
      started = true;
      draw(meter?.startFilesAtOnce(count, done, seconds()));
    },
    update(done) {
      if (started) draw(meter?.update(done, seconds()));
    },
    finish: () => draw(meter?.finish(seconds())),
    abandon: () => draw(meter?.abandon()),
    close() {
      meter?.delete();
      meter = null;
    },
  };
}
