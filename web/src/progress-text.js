// The CLIs' progress wording for other front ends (the page): the time of the progress line both CLIs draw
// (src/app/progress_text.h), so that an ETA reads the same everywhere and is computed by one rule.
import { loadedModule } from './init.js';

/**
 * "ETA 0:05" (the bytes left at the average rate so far), "ETA --:--" while nothing has moved, or "in 0:12" once
 * `done` reaches `total`. Synchronous, for a redraw: the module must be loaded (`await init()` first).
 * @param {number} done  bytes done
 * @param {number} total  bytes in all
 * @param {number} seconds  since the work started
 */
export function progressTime(done, total, seconds) {
  const module = loadedModule();
  if (!module) throw new Error('peft-bridge: progressTime needs the WebAssembly module: await init() first');
  return module.progressTimeText(Number(done), Number(total), Number(seconds));
}
