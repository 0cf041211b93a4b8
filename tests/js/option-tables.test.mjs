// One option table per command (app/option_tables.h): the JS keys it gives each command's options must be exactly
// the keys of the command's option interfaces in web/src/index.d.ts (a key missing from either side fails), and
// every dtype option is typed with the one dtype vocabulary. The transport options every remote entry point takes
// (RemoteOptions) are not a command's and are not compared.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { webDir } from './helpers/common.mjs';
import { getModule } from '../../web/src/init.js';

// The interfaces whose own keys together are a command's JS options.
const INTERFACES = {
  convert: ['ConvertOptions'],
  'adapter-info': ['AdapterReadOptions'],
  translate: ['TranslateOptions', 'AdapterReadOptions'],
  combine: ['CombineOptions', 'AdapterReadOptions'],
  create: ['CreateAdapterOptions'],
  extract: ['ExtractAdapterOptions'],
  merge: ['MergeOptions', 'MergeShardsOptions', 'MergeStreamOptions'],
};

/** {key: type text} of an interface's own properties (a type the formatter wrapped over several lines included,
 * its whitespace collapsed). */
function interfaceKeys(dts, name) {
  const start = dts.search(new RegExp(`^export interface ${name}\\b[^{]*\\{`, 'm'));
  assert.ok(start >= 0, `index.d.ts declares ${name}`);
  const body = dts.slice(dts.indexOf('{', start) + 1, dts.indexOf('\n}', start));
  return Object.fromEntries(
    [...body.matchAll(/^ {2}(\w+)\??:\s*([\s\S]*?;)$/gm)].map((m) => [m[1], m[2].replace(/\s+/g, ' ').trim()]),
  );
}

const module = await getModule();
const tables = JSON.parse(module.optionTables());
const dts = readFileSync(join(webDir, 'src', 'index.d.ts'), 'utf8');

for (const [command, names] of Object.entries(INTERFACES)) {
  test(`${command}: the table's JS keys are the keys of ${names.join(', ')}`, () => {
    const declared = Object.assign({}, ...names.map((n) => interfaceKeys(dts, n)));
    const rows = tables[command];
    assert.ok(rows, `a table for ${command}`);
    const keys = [...new Set(rows.filter((r) => r.js).map((r) => r.js))].sort();
    assert.deepEqual(keys, Object.keys(declared).sort());
    for (const row of rows.filter((r) => r.kind === 'dtype' && r.js))
      assert.match(declared[row.js], /^FloatDtypeName;$/, `${command}'s ${row.js} is typed FloatDtypeName`);
  });
}

test('every table row is well-formed: a CLI name or a JS key, choices for a choice, no name twice', () => {
  for (const [command, rows] of Object.entries(tables)) {
    const names = rows.filter((r) => r.name).map((r) => r.name);
    assert.equal(new Set(names).size, names.length, `${command}: a CLI name twice`);
    for (const row of rows) {
      assert.ok(row.name || row.js, `${command}: a row with neither name`);
      assert.equal(row.kind === 'choice', row.choices !== '', `${command} ${row.name}: choices only for a choice`);
      if (row.kind === 'api') assert.equal(row.name, '', `${command} ${row.js}: an API-only row has no CLI name`);
    }
  }
});

test('the help lists each documented option of a command under its CLI name', async () => {
  for (const [command, rows] of Object.entries(tables)) {
    if (command === '*' || command === 'unmerge') continue;
    const help = module.cliHelp(command);
    for (const row of rows.filter((r) => r.help && r.name))
      assert.match(help, new RegExp(`^ {2}--${row.name}\\b`, 'm'), `${command} --help lists --${row.name}`);
  }
});
