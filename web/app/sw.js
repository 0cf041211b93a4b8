// Streamed downloads for browsers without the File System Access API (StreamSaver-style). The page posts
// {type: 'download', name, size} with a MessagePort; this worker answers with a URL under ./dl/ and, when the
// browser requests it, responds with a ReadableStream that asks the page for one chunk per pull over the port.
// Only one chunk is ever in flight, so a model of any size passes through without being held.
const PREFIX = new URL('./dl/', self.registration.scope).pathname;
const pending = new Map(); // id -> {name, size, port}

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));

self.addEventListener('message', (event) => {
  const msg = event.data;
  const port = event.ports[0];
  if (msg?.type !== 'download' || !port) return; // 'ping' only keeps this worker alive
  const id = crypto.randomUUID();
  pending.set(id, { name: String(msg.name), size: msg.size, port });
  port.postMessage({ type: 'url', url: `${PREFIX}${id}/${encodeURIComponent(msg.name)}` });
});

function body(port) {
  let controller;
  let waiting = null;
  port.onmessage = ({ data }) => {
    const wake = waiting;
    waiting = null;
    try {
      if (data.type === 'chunk') controller.enqueue(data.bytes);
      else if (data.type === 'end') controller.close();
      else if (data.type === 'error') controller.error(new Error(data.message));
    } catch {
      // the download was cancelled meanwhile
    }
    wake?.();
  };
  return new ReadableStream(
    {
      start(c) {
        controller = c;
        port.postMessage({ type: 'started' });
      },
      pull() {
        return new Promise((resolve) => {
          waiting = resolve;
          port.postMessage({ type: 'pull' });
        });
      },
      cancel(reason) {
        port.postMessage({ type: 'cancel', reason: String(reason ?? 'cancelled') });
        port.close();
      },
    },
    { highWaterMark: 1 },
  );
}

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (!url.pathname.startsWith(PREFIX)) return;
  const id = url.pathname.slice(PREFIX.length).split('/')[0];
  const entry = pending.get(id);
  pending.delete(id);
  if (!entry) {
    event.respondWith(
      new Response('This download is no longer available.\n', {
        status: 404,
        headers: { 'Content-Type': 'text/plain' },
      }),
    );
    return;
  }
  const headers = {
    'Content-Type': 'application/octet-stream',
    'Content-Disposition': `attachment; filename*=UTF-8''${encodeURIComponent(entry.name)}`,
    'X-Content-Type-Options': 'nosniff',
  };
  if (Number.isSafeInteger(entry.size)) headers['Content-Length'] = String(entry.size);
  event.respondWith(new Response(body(entry.port), { headers }));
});
