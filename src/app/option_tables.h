// The one table of each command's options: its CLI spelling, its key in the JS API's options object, what kind of
// value it takes, its choices, its default and its help line. From it come the grammar's rows (command_line.cc),
// the option lines of every command's help (cli_text.cc), the reading of a JS options object into the command line
// the CLIs parse (OptionsCommandLine, for the WASM handles) and the dump that tests/js/option-tables.test.mjs holds
// web/src/index.d.ts's option interfaces to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "app/command_line.h"
#include "core/json.h"
#include "core/result.h"

namespace pb::app {

enum class OptionKind : uint8_t {
  kFlag,         // no value; JS: a boolean
  kNegatedFlag,  // no value; JS: a boolean whose `false` is the flag (copyExtra: false is --no-copy-extra)
  kText,         // any text
  kPath,         // a file, folder, URL or hf:// address (JS: also the bytes or an input object)
  kNumber,       // a decimal number (JS: a number or its text)
  kInteger,      // a whole number (JS: a number, a bigint or its text)
  kChoice,       // one of `choices`
  kDtype,        // the dtype vocabulary of core/dtype.h, any case
  kList,         // comma-separated values (JS: an array or the text)
  kRepeated,     // given once per value (JS: an array)
  kApi,          // no CLI spelling: a value only the JS API takes (signal, onProgress, an input's bytes…)
  kHelpNote,     // no option: a help line of its own (a second form of an option, options described together)
};

struct OptionRow {
  std::string_view name;     // the CLI's long name without dashes; "" for kApi and kHelpNote rows
  char alias = 0;            // the CLI's short alias (`-o`), or 0
  std::string_view js = {};  // the JS options object's key; "" when the JS API has none (--json…)
  OptionKind kind = OptionKind::kFlag;
  std::string_view choices = {};        // kChoice: "a|b|c"
  std::string_view default_value = {};  // what leaving it out means, when that is one value
  std::string_view metavar = {};        // the help's name for the value (`--dtype D`); kHelpNote: the line's head
  std::string_view help = {};           // the help's text, '\n' between lines; "" for no help line
};

struct OptionTable {
  std::string_view command;
  size_t help_column;                // where the help texts start (the push block's own: kPushHelpColumn)
  std::vector<OptionRow> rows;       // in the help's order
  std::vector<OptionRow> push_rows;  // --push-to and its companions (merge, translate...), or push's
  bool lists_options = true;         // whether the help lists them (unmerge's says "as for merge")
};

// Every command's table: inspect, convert, adapter-info, translate, combine, merge, unmerge, create, extract, push.
std::span<const OptionTable> OptionTables();
const OptionTable* FindOptionTable(std::string_view command);
// Options every command takes: --help (-h), --quiet (-q), --no-progress.
std::span<const OptionRow> CommonOptions();

std::string_view OptionKindName(OptionKind kind);

// A command's help lines for its options, its push block and --help, each "  --name VALUE" padded to the
// column (at least one space; two after a head longer than the column) then its text.
std::string OptionHelpLines(std::string_view command);

// The tables as JSON: {"command": [{"name","alias","js","kind","choices","default","help"}]}.
Json OptionTablesJson();

// A JS options object read as the command line the CLIs would parse: each row with a CLI name and a JS key given
// (not null) becomes its option (`{dtype: 'bfloat16', dryRun: true}` → `--dtype bfloat16 --dry-run`), then the
// grammar checks and normalises it as it does the CLI's (ParseCommandOptions). InvalidArgument with the grammar's
// message for a bad value, or naming the key for a value of the wrong JSON type. Keys the table does not give a
// CLI name are left to the caller (inputs, naming table objects, signal...).
Result<CommandLine> OptionsCommandLine(std::string_view command, const Json& options);

}  // namespace pb::app
