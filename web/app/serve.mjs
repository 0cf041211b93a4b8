// A static file server for the web page (development and tests): serves web/ so that the page (/app/), the
// package (/src/) and the WASM (/dist/) share one origin, with the right MIME types (application/wasm for
// streaming compilation, text/javascript for modules). node:http only.
//
//   node web/app/serve.mjs [--port 8080] [--hub]
//
// --hub also starts the local Hub stand-in (tests/hub/server.mjs) serving the bundled example as
// `example/tiny-llama` and `example/tiny-llama-lora`, and prints the page's URL pointing at it.
import { createReadStream, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ts': 'text/plain; charset=utf-8',
  '.md': 'text/markdown; charset=utf-8',
};

export const webRoot = fileURLToPath(new URL('..', import.meta.url));

/**
 * Serves `root` (default web/) on 127.0.0.1. Resolves to {origin, url (the page), close()}.
 * @param {{root?: string, port?: number, host?: string}} [options]
 */
export async function startStatic({ root = webRoot, port = 0, host = '127.0.0.1' } = {}) {
  const base = resolve(root);
  const server = createServer((req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD' }).end();
      return;
    }
    let path;
    try {
      path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    } catch {
      res.writeHead(400).end();
      return;
    }
    if (path === '/') {
      res.writeHead(302, { Location: '/app/' }).end();
      return;
    }
    let file = resolve(join(base, path));
    if (file !== base && !file.startsWith(base + sep)) {
      res.writeHead(403).end();
      return;
    }
    let stat;
    try {
      stat = statSync(file);
      if (stat.isDirectory()) {
        if (!path.endsWith('/')) {
          res.writeHead(301, { Location: `${path}/` }).end();
          return;
        }
        file = join(file, 'index.html');
        stat = statSync(file);
      }
    } catch {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('Not found\n');
      return;
    }
    res.writeHead(200, {
      'Content-Type': MIME[extname(file)] ?? 'application/octet-stream',
      'Content-Length': String(stat.size),
      'Cache-Control': 'no-store',
      'X-Content-Type-Options': 'nosniff',
    });
    if (req.method === 'HEAD') res.end();
    else createReadStream(file).pipe(res);
  });
  await new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(port, host, ok);
  });
  const origin = `http://${host}:${server.address().port}`;
  return {
    origin,
    url: `${origin}/app/`,
    close: () =>
      new Promise((ok) => {
        server.close(() => ok());
        server.closeAllConnections?.();
      }),
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1])) {
  const args = process.argv.slice(2);
  const at = args.indexOf('--port');
  const port = at >= 0 ? Number(args[at + 1]) : 8080;
  const site = await startStatic({ port });
  let url = site.url;
  if (args.includes('--hub')) {
    const { startHub } = await import('../../tests/hub/server.mjs');
    const examples = fileURLToPath(new URL('../../examples/', import.meta.url));
    const hub = await startHub({
      files: {
        'example/tiny-llama': {
          'model.safetensors': readFileSync(join(examples, 'tiny-llama.safetensors')),
          'config.json': readFileSync(join(examples, 'config.json')),
        },
        'example/tiny-llama-lora': join(examples, 'tiny-llama-lora'),
      },
    });
    const q = new URLSearchParams({
      endpoint: hub.endpoint,
      base: 'example/tiny-llama',
      adapter: 'example/tiny-llama-lora',
    });
    url = `${site.url}?${q}`;
    console.log(`local Hub: ${hub.endpoint}`);
  }
  console.log(url);
}
