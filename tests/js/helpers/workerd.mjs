// Runs an example worker in real workerd, with the modules a bundler (wrangler) would produce: the package under
// node_modules/peft-bridge, the .wasm as a CompiledWasm module, and the bare specifiers workers import ('peft-bridge'
// and 'peft-bridge/edge' resolved with the "workerd" export condition, 'peft-bridge/peft_bridge_wasm.wasm') as small
// re-exporting modules. Four test-only routes wrap the worker: /__heap (the WASM heap's size), /__download?url=
// (a plain download by the worker, to compare memory with), /__proxy?url= (the file passed on to the client
// through the worker, to compare throughput with) and /__trap[?in=Class] (a real trap in the module: now, or inside
// the next request's `new Class(…)`).
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { basename, dirname, join, sep } from 'node:path';
import { repoRoot, webDir } from './common.mjs';

export const workerdBin = join(repoRoot, 'node_modules', 'workerd', 'bin', 'workerd');
export const hasWorkerd = existsSync(workerdBin);

export async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The package's modules a worker may load (web/src, without the npm CLI's), as paths under src/ with '/'. */
export function packageModules() {
  return readdirSync(join(webDir, 'src'), { recursive: true })
    .map((p) => p.split(sep).join('/'))
    .filter((p) => p.endsWith('.js') && !p.startsWith('cli/'))
    .sort();
}

const capnpText = (value) => JSON.stringify(String(value)); // capnp text literals take JSON's escapes

/**
 * workerd serving `worker` (a module file whose default export is the worker; other named exports, e.g. Durable
 * Object classes, are re-exported) on a free port, stopped when the test ends.
 * @param {import('node:test').TestContext} t
 * @param {{worker: string, dir: string, bindings?: Record<string, string>, durableObjects?: Record<string, string>}} options
 *   bindings: text bindings (HF_ENDPOINT, HF_TOKEN, ...); durableObjects: binding name → a Durable Object class the
 *   worker exports, SQLite-backed (as wrangler's new_sqlite_classes), stored in the test's temporary folder.
 */
export async function startWorkerd(t, { worker, dir, bindings = {}, durableObjects = {} }) {
  const root = mkdtempSync(join(dir, 'workerd-'));
  mkdirSync(join(root, 'do-storage'));
  const pkg = join(root, 'node_modules', 'peft-bridge');
  mkdirSync(join(pkg, 'dist'), { recursive: true });
  const modules = [];
  for (const name of packageModules()) {
    mkdirSync(dirname(join(pkg, 'src', name)), { recursive: true });
    copyFileSync(join(webDir, 'src', name), join(pkg, 'src', name));
    modules.push(
      `(name = "node_modules/peft-bridge/src/${name}", esModule = embed "node_modules/peft-bridge/src/${name}")`,
    );
  }
  for (const name of ['peft_bridge_wasm.mjs', 'peft_bridge_wasm.wasm'])
    copyFileSync(join(webDir, 'dist', name), join(pkg, 'dist', name));
  modules.push(
    '(name = "node_modules/peft-bridge/dist/peft_bridge_wasm.mjs", esModule = embed "node_modules/peft-bridge/dist/peft_bridge_wasm.mjs")',
  );
  modules.push(
    '(name = "node_modules/peft-bridge/dist/peft_bridge_wasm.wasm", wasm = embed "node_modules/peft-bridge/dist/peft_bridge_wasm.wasm")',
  );
  const workerFile = basename(worker);
  copyFileSync(worker, join(root, workerFile));
  writeFileSync(
    join(root, 'main.mjs'),
    `import worker from './${workerFile}';
import { getModule } from './node_modules/peft-bridge/src/init.js';
export * from './${workerFile}';
export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    if (url.pathname === '/__heap') return new Response(String((await getModule()).heapSize()));
    if (url.pathname === '/__trap') {
      // A real trap in the isolate's instance (the benchmark hook's rows·cols·2 wraps to 0 in wasm32, and it writes
      // past the heap's end): now, or, with ?in=Class, inside the next \`new Class(…)\` a request makes.
      const module = await getModule();
      const trap = () => module.benchMergeRows(65536, 32768, 1, 1, false);
      const inClass = url.searchParams.get('in');
      if (inClass) {
        if (typeof module[inClass] !== 'function') return new Response(\`no class \${inClass}\`, { status: 400 });
        module[inClass] = function trapping() {
          trap();
        };
        return new Response('armed');
      }
      try {
        trap();
      } catch (error) {
        return new Response(\`\${error?.constructor?.name}: \${error?.message}\`);
      }
      return new Response('no trap', { status: 500 });
    }
    if (url.pathname === '/__download') {
      let n = 0;
      for await (const chunk of (await fetch(url.searchParams.get('url'))).body) n += chunk.length;
      return new Response(String(n));
    }
    // The same file fetched and passed on to the client through a stream in the worker, as a merge passes its output.
    if (url.pathname === '/__proxy') return new Response((await fetch(url.searchParams.get('url'))).body.pipeThrough(new TransformStream()));
    return worker.fetch(request, env, ctx);
  },
};
`,
  );
  writeFileSync(join(root, 'pkg.js'), 'export * from "./node_modules/peft-bridge/src/workerd.js";\n');
  writeFileSync(join(root, 'pkg-edge.js'), 'export * from "../node_modules/peft-bridge/src/edge/workerd.js";\n');
  writeFileSync(
    join(root, 'pkg-wasm.js'),
    'export { default } from "../node_modules/peft-bridge/dist/peft_bridge_wasm.wasm";\n',
  );
  const port = await freePort();
  const textBindings = Object.entries(bindings).map(
    ([name, value]) => `(name = ${capnpText(name)}, text = ${capnpText(value)})`,
  );
  const objects = Object.entries(durableObjects);
  const doBindings = objects.map(
    ([name, c]) => `(name = ${capnpText(name)}, durableObjectNamespace = ${capnpText(c)})`,
  );
  const namespaces = objects.map(
    ([, c]) => `(className = ${capnpText(c)}, uniqueKey = ${capnpText(`pb-test-${c}`)}, enableSql = true)`,
  );
  writeFileSync(
    join(root, 'config.capnp'),
    `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
    # The default outbound reaches only public addresses; the fake Hub listens on 127.0.0.1.
    (name = "internet", network = (allow = ["public", "private", "local"])),
    # SQLite-backed Durable Objects need disk storage (in-memory storage has no SQL API).
    (name = "do-storage", disk = (path = ${capnpText(join(root, 'do-storage'))}, writable = true)),
  ],
  sockets = [ (name = "http", address = "127.0.0.1:${port}", http = (), service = "main") ],
);
const worker :Workerd.Worker = (
  modules = [
    (name = "main.mjs", esModule = embed "main.mjs"),
    (name = "${workerFile}", esModule = embed "${workerFile}"),
    (name = "peft-bridge", esModule = embed "pkg.js"),
    (name = "peft-bridge/edge", esModule = embed "pkg-edge.js"),
    (name = "peft-bridge/peft_bridge_wasm.wasm", esModule = embed "pkg-wasm.js"),
    ${modules.join(',\n    ')}
  ],
  compatibilityDate = "2025-06-01",
  bindings = [ ${[...textBindings, ...doBindings].join(', ')} ],
  ${namespaces.length ? `durableObjectNamespaces = [ ${namespaces.join(', ')} ],\n  durableObjectStorage = (localDisk = "do-storage"),` : ''}
  globalOutbound = "internet",
);
`,
  );
  return serveWorkerd(t, root, port);
}

/**
 * Runs `workerd serve ROOT/config.capnp` (listening on `port`), stopped when the test ends, once it accepts a
 * connection (no request is sent: a worker's routes may have effects): {url, pid, log()}.
 */
export async function serveWorkerd(t, root, port) {
  const child = spawn(workerdBin, ['serve', join(root, 'config.capnp'), '--verbose'], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stdout.on('data', (d) => (log += d));
  child.stderr.on('data', (d) => (log += d));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  t.after(async () => {
    child.kill('SIGTERM');
    await exited;
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; ++i) {
    try {
      await new Promise((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () => socket.end(resolve));
        socket.once('error', reject);
      });
      break;
    } catch {
      if (i > 200 || child.exitCode !== null) throw new Error(`workerd did not start:\n${log}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return { url, pid: child.pid, log: () => log };
}

/** /proc/<pid>/status in bytes: VmRSS (now) and VmHWM (peak). */
export function processMemory(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)[1]) * 1024;
  return { rss: kib('VmRSS'), hwm: kib('VmHWM') };
}
