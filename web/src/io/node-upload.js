// Uploads for the Node entry: a PUT of a Blob body (an LFS object or one part of it) with node:http(s), writing
// the body as it is read and waiting for the socket to drain. Node 20's fetch keeps a streamed request body's
// chunks alive until the request ends (measured in docs/push.md), so pushToHub sends its uploads through this in
// Node (push.js, setUploadTransport). Imported only by node.js and the npm CLI, so browser and workerd builds never
// load node:http. Internal.
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

const closedOrDrained = (req) =>
  new Promise((resolve) => {
    const done = () => {
      req.off('drain', done);
      req.off('close', done);
      resolve();
    };
    req.once('drain', done);
    req.once('close', done);
  });

/** fetch(url, {method, headers, body: Blob, signal}) for uploads: a Response (its body read whole: answers to
 * uploads are small). */
export function nodeUpload(url, init) {
  const u = new URL(url);
  const headers = { ...(init.headers ?? {}), 'content-length': String(init.body.size) };
  const send = u.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(u, { method: init.method ?? 'PUT', headers, signal: init.signal });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const h = new Headers();
        for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) h.append(res.rawHeaders[i], res.rawHeaders[i + 1]);
        const empty = res.statusCode === 204 || res.statusCode === 304;
        resolve(
          new Response(empty ? null : Buffer.concat(chunks), {
            status: res.statusCode,
            statusText: res.statusMessage,
            headers: h,
          }),
        );
      });
    });
    (async () => {
      try {
        for await (const chunk of init.body.stream()) {
          if (req.destroyed) return;
          if (!req.write(chunk)) await closedOrDrained(req);
        }
        req.end();
      } catch (error) {
        req.destroy(error);
      }
    })();
  });
}
