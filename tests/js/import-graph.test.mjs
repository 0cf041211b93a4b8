// The import graph of the npm package's sources (web/src): every relative import names a file that exists, and no
// module imports itself through others. A cycle makes the evaluation order depend on which module is loaded first
// (a binding read before its module has run throws), so the folders keep their dependencies one way.
// The edges are the static `import … from` and `export … from` forms and `import()` of a literal, as TypeScript's
// preprocessor finds them (comments and strings are not imports).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { repoRoot, webDir } from './helpers/common.mjs';

const ts = createRequire(join(repoRoot, 'package.json'))('typescript');
const srcDir = join(webDir, 'src');

function sourceFiles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.js') ? [path] : [];
  });
}

const name = (path) => relative(srcDir, path).split(sep).join('/');

/** {graph: Map(file → files it imports inside web/src), missing: ["file: specifier"]} */
function importGraph(dir = srcDir) {
  const graph = new Map();
  const missing = [];
  for (const file of sourceFiles(dir)) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    const edges = new Set();
    for (const { fileName: specifier } of importedFiles) {
      if (!specifier.startsWith('./') && !specifier.startsWith('../')) continue; // node:…, packages
      const target = resolve(dirname(file), specifier);
      if (!existsSync(target)) missing.push(`${name(file)}: ${specifier}`);
      else if (target.startsWith(dir + sep)) edges.add(target);
    }
    graph.set(file, edges);
  }
  return { graph, missing };
}

/** Each cycle as its modules in import order, the first repeated last: one per strongly connected component. */
function importCycles(graph) {
  // Tarjan's strongly connected components, then one shortest cycle through each component of more than one module
  // (or a module importing itself).
  let next = 0;
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const components = [];
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v)) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v), index.get(w)));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component = [];
      let w;
      do {
        w = stack.pop();
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      components.push(component);
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  const cycles = [];
  for (const component of components) {
    const members = new Set(component);
    const start = component.sort()[0];
    if (component.length === 1 && !graph.get(start).has(start)) continue;
    // Breadth-first from `start` inside the component, back to `start`.
    const from = new Map();
    const queue = [start];
    let found = false;
    while (queue.length && !found) {
      const v = queue.shift();
      for (const w of [...graph.get(v)].sort()) {
        if (w === start) {
          from.set(start, v);
          found = true;
          break;
        }
        if (members.has(w) && !from.has(w)) {
          from.set(w, v);
          queue.push(w);
        }
      }
    }
    const path = [start];
    for (let v = from.get(start); v !== start; v = from.get(v)) path.unshift(v);
    path.unshift(start);
    cycles.push(path.map(name));
  }
  return cycles;
}

test('web/src: every relative import names an existing file', () => {
  assert.deepEqual(importGraph().missing, []);
});

test('web/src: no import cycle', () => {
  const cycles = importCycles(importGraph().graph);
  assert.deepEqual(
    cycles.map((c) => c.join(' → ')),
    [],
    'modules that import each other',
  );
});

test('the cycle finder names a cycle, and only a cycle', () => {
  const g = (edges) =>
    new Map(Object.entries(edges).map(([k, v]) => [join(srcDir, k), new Set(v.map((n) => join(srcDir, n)))]));
  assert.deepEqual(importCycles(g({ 'a.js': ['b.js'], 'b.js': ['c.js'], 'c.js': [] })), []);
  const three = g({ 'a.js': ['b.js'], 'b.js': ['c.js'], 'c.js': ['a.js'] });
  assert.deepEqual(importCycles(three), [['a.js', 'b.js', 'c.js', 'a.js']]);
  assert.deepEqual(importCycles(g({ 'x/a.js': ['x/a.js'] })), [['x/a.js', 'x/a.js']]);
  const two = g({ 'a.js': ['b.js', 'c.js'], 'b.js': ['a.js'], 'c.js': ['d.js'], 'd.js': ['c.js'] });
  assert.deepEqual(importCycles(two), [
    ['c.js', 'd.js', 'c.js'],
    ['a.js', 'b.js', 'a.js'],
  ]);
});
