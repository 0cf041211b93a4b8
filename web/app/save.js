// Where the merged files go. Each sink takes the output files one at a time as streams and writes them out as
// they are read, so the page never holds a model in memory:
//   - File System Access (showSaveFilePicker / showDirectoryPicker): createWritable() and pipeTo();
//   - otherwise a streamed download: sw.js answers a download URL with a ReadableStream that pulls its chunks
//     from this page over a MessageChannel (as StreamSaver does), one chunk at a time.

export const hasFileSystemAccess = () =>
  typeof window.showDirectoryPicker === 'function' && typeof window.showSaveFilePicker === 'function';
export const hasServiceWorker = () => 'serviceWorker' in navigator && window.isSecureContext;

/**
 * Asks where to save (call it first in a click handler: pickers need the user's gesture). `outputs` are the
 * file names the merge will produce. Resolves to a sink {kind, describe, write(name, size, stream, signal)}, or
 * null when the user dismissed the picker.
 * @param {'auto' | 'picker' | 'download'} method
 * @param {string[]} outputs
 */
export async function chooseSink(method, outputs) {
  const usePicker = method === 'picker' || (method === 'auto' && hasFileSystemAccess());
  if (usePicker) {
    if (!hasFileSystemAccess())
      throw new Error('this browser has no file or folder picker (File System Access API): choose “streamed download”');
    try {
      return outputs.length === 1 ? await fileSink(outputs[0]) : await folderSink();
    } catch (error) {
      if (error?.name === 'AbortError') return null; // the user closed the picker
      throw error;
    }
  }
  if (!hasServiceWorker())
    throw new Error('streamed downloads need a service worker (a secure context: https or localhost)');
  return downloadSink();
}

async function fileSink(name) {
  const handle = await window.showSaveFilePicker({
    suggestedName: name,
    types: [{ description: 'safetensors', accept: { 'application/octet-stream': ['.safetensors'] } }],
  });
  return {
    kind: 'file',
    describe: `saved as ${handle.name}`,
    write: (_, __, stream, signal) => pipeToHandle(handle, stream, signal),
  };
}

async function folderSink() {
  const dir = await window.showDirectoryPicker({ id: 'peft-bridge-merge', mode: 'readwrite' });
  return {
    kind: 'folder',
    describe: `saved in the folder ${dir.name || '(chosen folder)'}`,
    write: async (name, _, stream, signal) =>
      pipeToHandle(await dir.getFileHandle(name, { create: true }), stream, signal),
  };
}

/** Streams into a file handle; the browser keeps the old contents until close() (abort discards the new). */
async function pipeToHandle(handle, stream, signal) {
  const writable = await handle.createWritable();
  await stream.pipeTo(writable, { signal });
}

let registration = null;

/** Registers sw.js (once) and waits until it is active. */
async function serviceWorker() {
  if (!registration) {
    const scope = new URL('./', import.meta.url).pathname;
    registration = navigator.serviceWorker
      .register(new URL('./sw.js', import.meta.url), { scope })
      .then(() => navigator.serviceWorker.ready);
    registration.catch(() => (registration = null));
  }
  return registration;
}

async function downloadSink() {
  const reg = await serviceWorker();
  let frame = document.getElementById('download-frame');
  if (!frame) {
    frame = Object.assign(document.createElement('iframe'), { id: 'download-frame', hidden: true, title: 'downloads' });
    frame.setAttribute('aria-hidden', 'true');
    document.body.append(frame);
  }
  return {
    kind: 'download',
    describe: 'downloaded',
    write: (name, size, stream, signal) => streamToWorker(reg, frame, name, size, stream, signal),
  };
}

/** A chunk the page may transfer: its own buffer, exactly. */
function owned(bytes) {
  return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : bytes.slice();
}

/**
 * Hands one file to the service worker as a download and feeds it chunk by chunk as the download pulls.
 * Resolves when the last chunk has been handed over.
 */
function streamToWorker(reg, frame, name, size, stream, signal) {
  const worker = reg.active;
  if (!worker) return Promise.reject(new Error('the download service worker is not active'));
  const { port1, port2 } = new MessageChannel();
  const reader = stream.getReader();
  return new Promise((resolve, reject) => {
    let settled = false;
    let started = false;
    const finish = () => {
      settled = true;
      clearTimeout(startTimer);
      clearInterval(keepAlive);
      signal?.removeEventListener('abort', onAbort);
      port1.onmessage = null;
    };
    const fail = (error) => {
      if (settled) return;
      finish();
      port1.postMessage({ type: 'error', message: String(error?.message ?? error) });
      port1.close();
      reader.cancel(error).catch(() => {});
      reject(error);
    };
    const onAbort = () => fail(signal.reason ?? new DOMException('Cancelled', 'AbortError'));
    signal?.addEventListener('abort', onAbort, { once: true });
    // The browser must request the URL soon; if nothing does (no service worker in control of the URL), give up.
    const startTimer = setTimeout(() => {
      if (!started) fail(new Error('the download did not start (the service worker did not receive the request)'));
    }, 15000);
    // Messages keep an idle service worker alive while a long download runs.
    const keepAlive = setInterval(() => worker.postMessage({ type: 'ping' }), 10000);
    port1.onmessage = async ({ data }) => {
      if (settled) return;
      if (data.type === 'url') frame.src = data.url;
      else if (data.type === 'started') started = true;
      else if (data.type === 'cancel') fail(new DOMException('The download was cancelled', 'AbortError'));
      else if (data.type === 'pull') {
        try {
          const { done, value } = await reader.read();
          if (settled) return;
          if (done) {
            port1.postMessage({ type: 'end' });
            finish();
            resolve();
          } else {
            const bytes = owned(value);
            port1.postMessage({ type: 'chunk', bytes }, [bytes.buffer]);
          }
        } catch (error) {
          fail(error);
        }
      }
    };
    worker.postMessage({ type: 'download', name, size }, [port2]);
  });
}
