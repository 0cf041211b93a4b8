// The run of a section that plans an adapter, then makes and saves it (Extract, Create): one Plan button (a dry
// run), one make-and-save button and Cancel. The section's state is its data-state (busy, planned, done, error,
// idle), the error its `#<id>-error` alert, worded by the core (SafetensorsError: its code and message).
import { SafetensorsError } from '../src/index.js';
import { chooseSink } from './save.js';

const OUTPUTS = ['adapter_model.safetensors', 'adapter_config.json'];

export const errorText = (error) =>
  error instanceof SafetensorsError ? `${error.code}: ${error.message}` : (error.message ?? String(error));

/**
 * Wires `#<id>-plan-btn`, `#<id>-btn` and `#<id>-cancel` of the section `#<id>`.
 *  - job.request(dryRun): the options (without signal and onProgress);
 *  - job.call(options): the JS API's call, resolving to {files: [{path, size, stream}]} (none for a dry run);
 *  - job.render(result, dryRun): shows the result;
 *  - job.progressOfSaving: the files are made as they are saved, so the progress bar follows the bytes saved
 *    (after the call's own onProgress: reading).
 * @param {string} id
 */
export function wireJob(id, job) {
  const $ = (suffix) => document.getElementById(`${id}${suffix}`);
  let running = null; // the AbortController of the job under way

  const showError = (error) => {
    const box = $('-error');
    box.hidden = !error;
    box.textContent = error ? errorText(error) : '';
  };

  async function run(dryRun) {
    showError(null);
    const section = $('');
    section.dataset.state = 'busy';
    $('-files').replaceChildren();
    const progress = $('-progress');
    const controller = new AbortController();
    running = controller;
    $('-cancel').disabled = false;
    try {
      const options = await job.request(dryRun);
      // The picker first: it needs the click's user gesture, which a long await would lose.
      const sink = dryRun ? null : await chooseSink('auto', OUTPUTS);
      if (!dryRun && sink === null) {
        section.dataset.state = 'idle';
        return;
      }
      progress.hidden = dryRun;
      progress.value = 0;
      const result = await job.call({
        ...options,
        signal: controller.signal,
        onProgress: ({ bytesIn, totalIn }) => (progress.value = totalIn ? bytesIn / totalIn : 1),
      });
      job.render(result, dryRun);
      const total = result.files.reduce((n, f) => n + f.size, 0);
      let saved = 0;
      for (const f of result.files) {
        const counted = !job.progressOfSaving
          ? f.stream
          : f.stream.pipeThrough(
              new TransformStream({
                transform(chunk, c) {
                  saved += chunk.byteLength;
                  progress.value = total ? saved / total : 1;
                  c.enqueue(chunk);
                },
              }),
            );
        await sink.write(f.path, f.size, counted, controller.signal);
        $('-files').append(
          Object.assign(document.createElement('li'), {
            textContent: `${f.path}: ${f.size.toLocaleString('en-US')} bytes`,
          }),
        );
      }
      section.dataset.state = dryRun ? 'planned' : 'done';
    } catch (error) {
      showError(error);
      section.dataset.state = 'error';
    } finally {
      running = null;
      $('-cancel').disabled = true;
    }
  }

  $('-plan-btn').addEventListener('click', () => run(true));
  $('-btn').addEventListener('click', () => run(false));
  $('-cancel').addEventListener('click', () => running?.abort(new DOMException('Cancelled', 'AbortError')));
}
