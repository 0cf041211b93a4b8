// Runs a module written for a Web Worker (`self.onmessage`, `self.postMessage`) in a Node worker thread, and gives
// the page side a Web Worker's shape (postMessage, onmessage, onerror, terminate): Node 20 has no global Worker.
// Test-only glue, so the package's worker logic runs under Node's test runner too.
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

if (!isMainThread && workerData?.webWorkerModule) {
  const self = { onmessage: null, postMessage: (message, transfer) => parentPort.postMessage(message, transfer) };
  globalThis.self = self;
  // Messages that come while the module loads wait for it, as a Web Worker's do.
  const early = [];
  parentPort.on('message', (data) => (self.onmessage ? self.onmessage({ data }) : early.push(data)));
  await import(workerData.webWorkerModule);
  for (const data of early.splice(0)) self.onmessage?.({ data });
}

/** A Web-Worker-shaped handle on a Node worker thread running `moduleUrl`. */
export function nodeWebWorker(moduleUrl) {
  const worker = new Worker(new URL(import.meta.url), { workerData: { webWorkerModule: String(moduleUrl) } });
  const shape = {
    onmessage: null,
    onerror: null,
    postMessage: (message, transfer) => worker.postMessage(message, transfer),
    terminate: () => worker.terminate(),
  };
  worker.on('message', (data) => shape.onmessage?.({ data }));
  worker.on('error', (error) => shape.onerror?.({ message: error.message, preventDefault() {} }));
  return shape;
}
