// The `namingTables` option (`--naming-table FILE` in the CLIs): naming tables supplied at run time, which add
// a model family or replace the embedded table of the same name (docs/naming-tables.md). What they mean is the
// core's rule (src/app/user_naming_tables.h); this only shapes the option for it.

/**
 * The option as the core's handles take it: [{path, text}], or null when absent. Each entry is
 * `{path, text}` (a file's name and its JSON text), a JSON text, or a table as a plain object; the path names
 * the table in error messages (`namingTables[i]` when none is given).
 */
export function namingTablesOption(tables) {
  if (tables === undefined || tables === null) return null;
  if (!Array.isArray(tables)) throw new TypeError('peft-bridge: namingTables must be an array of naming tables');
  return tables.map((t, i) => {
    if (typeof t === 'string') return { path: `namingTables[${i}]`, text: t };
    if (t !== null && typeof t === 'object' && typeof t.path === 'string' && typeof t.text === 'string') {
      return { path: t.path, text: t.text };
    }
    if (t !== null && typeof t === 'object' && !Array.isArray(t))
      return { path: `namingTables[${i}]`, text: JSON.stringify(t) };
    throw new TypeError(`peft-bridge: namingTables[${i}] must be {path, text}, a JSON text or a table object`);
  });
}
