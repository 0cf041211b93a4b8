#include "app/command_line.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "app/base_layout.h"
#include "app/combine_args.h"
#include "app/create_report.h"
#include "app/extract_report.h"
#include "app/option_tables.h"
#include "app/push_target.h"
#include "app/report.h"
#include "core/dtype_vocabulary.h"
#include "core/json.h"
#include "core/utf8.h"
#include "merge/quantize_plan.h"
#include "net/remote_address.h"

namespace pb::app {
namespace {

using OptionSpec = OptionRow;  // a command's options are its table's rows (app/option_tables.h)

bool TakesNoValue(const OptionSpec& o) { return o.kind == OptionKind::kFlag || o.kind == OptionKind::kNegatedFlag; }

struct CommandSpec {
  std::string_view name;
  size_t min_positional;
  size_t max_positional;
  std::string_view positional_usage;            // what the missing/extra message names: "exactly one FILE"...
  std::vector<std::string_view> required;       // option names
  std::vector<const OptionSpec*> options = {};  // the table's rows that the command line spells
};

const std::vector<CommandSpec>& Commands() {
  static const std::vector<CommandSpec> commands = [] {
    std::vector<CommandSpec> list = {
        {"inspect", 1, 1, "exactly one FILE", {}},
        // --quantize: IN is a model (as merge's --base) and OUT a folder; --dtype is then optional.
        {"convert", 2, 2, "IN and OUT", {}},
        {"adapter-info", 1, 1, "exactly one DIR", {}},
        {"translate", 2, 2, "IN_DIR and OUT_DIR", {"to"}},
        {"combine", 1, SIZE_MAX, "at least one ADAPTER", {}},
        {"merge", 0, 0, "no positional arguments (use --base, --adapter and -o/--out)", {"base", "adapter"}},
        {"unmerge", 0, 0, "no positional arguments (use --base, --adapter and -o/--out)", {"base", "adapter"}},
        {"create", 0, 0, "no positional arguments (use --base, --target-modules and -o/--out)", {"base"}},
        {"extract", 0, 0, "no positional arguments (use --base, --tuned and -o/--out)", {"base", "tuned"}},
        // `push DIR --to OWNER/REPO[@BRANCH]`: an existing folder (a command's output whose push failed...),
        // pushed as --push-to pushes an output; --to takes --push-to's companions.
        {"push", 1, 1, "exactly one DIR (a folder, or one file)", {"to"}},
    };
    for (auto& spec : list) {
      const OptionTable* table = FindOptionTable(spec.name);
      for (const auto* rows : {&table->rows, &table->push_rows})
        for (const auto& row : *rows)
          if (!row.name.empty()) spec.options.push_back(&row);
    }
    return list;
  }();
  return commands;
}

const OptionSpec* FindOption(const CommandSpec& spec, std::string_view name, char alias) {
  auto match = [&](const OptionSpec& o) { return alias ? o.alias == alias : o.name == name; };
  for (const auto* o : spec.options)
    if (match(*o)) return o;
  for (const auto& o : CommonOptions())
    if (match(o)) return &o;
  return nullptr;
}

// Edit distance (insertions, deletions, substitutions) between two short option names.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The option a mistyped or foreign `--name` most likely meant: the same name in PEFT's or Python's spelling
// (`--lora-alpha`, `--lora_alpha`, `--target_modules`), else the closest within two edits; nullopt when
// nothing is that close.
std::optional<std::string_view> SuggestOption(const CommandSpec& spec, std::string_view name) {
  if (name.size() > 64) return std::nullopt;
  std::string plain(name);
  std::replace(plain.begin(), plain.end(), '_', '-');
  if (plain.starts_with("lora-")) plain = plain.substr(5);
  std::optional<std::string_view> best;
  size_t best_distance = 3;
  auto consider = [&](const OptionSpec& o) {
    if (o.name.empty() || o.name == "help") return;
    const size_t d = o.name == plain ? 0 : EditDistance(plain, o.name);
    if (d < best_distance) best_distance = d, best = o.name;
  };
  for (const auto* o : spec.options) consider(*o);
  for (const auto& o : CommonOptions()) consider(o);
  return best;
}

// "a|b|c" as its items.
std::vector<std::string_view> SplitChoices(std::string_view choices) {
  std::vector<std::string_view> items;
  size_t start = 0;
  while (start <= choices.size()) {
    size_t bar = choices.find('|', start);
    if (bar == std::string_view::npos) bar = choices.size();
    items.push_back(choices.substr(start, bar - start));
    start = bar + 1;
  }
  return items;
}

bool InChoices(std::string_view choices, std::string_view value) {
  auto items = SplitChoices(choices);
  return std::find(items.begin(), items.end(), value) != items.end();
}

// "a, b or c", as the messages name them.
std::string ChoicesText(std::string_view choices) {
  auto items = SplitChoices(choices);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += i + 1 == items.size() ? " or " : ", ";
    out += items[i];
  }
  return out;
}

// `options_only`: the options of a JS options object (OptionsCommandLine), which has no positional arguments, no
// -o/--out and no push: every check of the options themselves, none of what the command line must also hold.
std::variant<CommandLine, UsageError> ParseCommand(const CommandSpec& spec, std::span<const std::string> args,
                                                   bool options_only = false) {
  CommandLine line;
  line.command = std::string(spec.name);
  auto usage = [&](std::string message) { return UsageError{line.command, std::move(message)}; };
  bool options_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (options_done || a.size() < 2 || a[0] != '-') {
      line.positional.push_back(a);
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    const OptionSpec* option = nullptr;
    std::optional<std::string> inline_value;
    std::string shown;  // the option as the user wrote it, for messages
    if (a[1] == '-') {
      size_t eq = a.find('=');
      std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (eq != std::string::npos) inline_value = a.substr(eq + 1);
      option = FindOption(spec, name, 0);
      shown = "--" + name;
    } else if (a.size() == 2) {
      option = FindOption(spec, {}, a[1]);
      shown = a;
    }
    if (!option) {
      std::string message = "unknown option `" + ClipForMessage(a) + "`";
      if (a[1] == '-')
        if (auto suggestion = SuggestOption(
                spec, a.substr(2, a.find('=') == std::string::npos ? std::string::npos : a.find('=') - 2)))
          message += " (did you mean `--" + std::string(*suggestion) + "`?)";
      return usage(message);
    }
    if (option->name == "help") {
      line.help = true;
      continue;
    }
    std::string value;
    if (TakesNoValue(*option)) {
      if (inline_value) return usage(shown + " takes no value");
    } else if (inline_value) {
      value = *inline_value;
    } else {
      if (i + 1 >= args.size()) return usage(shown + " needs a value");
      value = args[++i];
    }
    if (!option->choices.empty() && !InChoices(option->choices, value))
      return usage("unknown " + std::string(option->name) + " `" + ClipForMessage(value) + "` (expected " +
                   ChoicesText(option->choices) + ")");
    if (option->kind == OptionKind::kDtype) {  // any spelling users know; the commands see one
      auto dtype = ParseFloatDtypeOption(value);
      if (!dtype.ok()) return usage(dtype.error().message);
      value = FloatDtypeOptionName(dtype.value());
    }
    auto& values = line.options[std::string(option->name)];
    if (!values.empty() && option->kind != OptionKind::kRepeated) return usage(shown + " given twice");
    values.push_back(std::move(value));
  }
  if (line.help) return line;  // `merge --help` needs nothing else
  // What the command line must hold besides its options' values.
  if (!options_only) {
    if (line.positional.size() < spec.min_positional || line.positional.size() > spec.max_positional) {
      if (spec.max_positional == 0)
        return usage("unexpected argument `" + ClipForMessage(line.positional.front()) + "`");
      return usage("expected " + std::string(spec.positional_usage));
    }
    for (auto name : spec.required)
      if (!line.Has(name)) return usage("--" + std::string(name) + " is required");
    if ((spec.name == "merge" || spec.name == "unmerge" || spec.name == "combine") && !line.Has("out") &&
        !line.Has("dry-run"))
      return usage("-o/--out is required (or --dry-run)");
  }
  if (spec.name == "combine")
    if (auto bad = CheckCombineNumbers(line)) return usage(*bad);
  if (auto threads = line.Value("threads")) {  // merge, unmerge: threads, or the npm CLI's worker threads
    const std::string& t = *threads;
    if (t.empty() || t.size() > 4 || t.find_first_not_of("0123456789") != std::string::npos || std::stoul(t) < 1 ||
        std::stoul(t) > 1024)
      return usage("--threads must be a whole number from 1 to 1024, not `" + ClipForMessage(t) + "`");
  }
  if (spec.name == "convert") {
    if (!line.Has("quantize") && !line.Has("dtype") && !options_only) return usage("--dtype is required");
    if (line.Has("quantize") && line.Has("order"))
      return usage("--order applies to convert without --quantize (which writes a model folder in the input's order)");
  }
  if (!line.Has("quantize") && (line.Has("scheme") || line.Has("group-size")))
    return usage(std::string(line.Has("scheme") ? "--scheme" : "--group-size") + " needs --quantize fp8|int8|int4");
  if (line.Has("quantize")) {
    auto scheme = line.Value("scheme"), group = line.Value("group-size");
    auto q = merge::MakeQuantizeOptions(*line.Value("quantize"),
                                        scheme ? std::optional<std::string_view>(*scheme) : std::nullopt,
                                        group ? std::optional<std::string_view>(*group) : std::nullopt);
    if (!q.ok()) return usage(q.error().message);
  }
  if (spec.name == "translate" && line.Has("outtype") && line.Value("to") != "gguf")
    return usage("--outtype applies to --to gguf only (the other formats keep the adapter's dtypes)");
  if (options_only) return line;  // create's and extract's values: their handles check them with the core's words
  if (spec.name == "create")
    if (auto problem = CreateUsageProblem(line)) return usage(*problem);
  if (spec.name == "extract")
    if (auto problem = ExtractUsageProblem(line)) return usage(*problem);
  const std::string target_option = spec.name == "push" ? "to" : "push-to";
  if (line.Has(target_option)) {
    auto target = ParsePushTarget(*line.Value(target_option), "--" + target_option);
    if (auto* problem = std::get_if<std::string>(&target)) return usage(*problem);
    if (line.Has("dry-run")) return usage("--push-to pushes what the command writes, and --dry-run writes nothing");
    if (line.Has("commit-message") && line.Value("commit-message")->empty()) return usage("--commit-message is empty");
  } else {
    for (const char* name : {"create-pr", "commit-message", "create-repo", "private"})
      if (line.Has(name)) return usage("--" + std::string(name) + " applies to --push-to OWNER/REPO[@BRANCH]");
  }
  return line;
}

}  // namespace

std::optional<std::string> CommandLine::Value(std::string_view name) const {
  auto it = options.find(name);
  if (it == options.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> CommandLine::Values(std::string_view name) const {
  auto it = options.find(name);
  return it == options.end() ? std::vector<std::string>{} : it->second;
}

static std::variant<CommandLine, UsageError> ParseArguments(std::span<const std::string> args);

std::variant<CommandLine, UsageError> ParseCommandLine(std::span<const std::string> args) {
  auto parsed = ParseArguments(args);
  if (auto* error = std::get_if<UsageError>(&parsed)) {
    // A script that asked for --json reads stdout as JSON: its usage error is one too.
    for (const std::string& a : args) {
      if (a == "--") break;
      if (a == "--json") error->json = true;
    }
  }
  return parsed;
}

static std::variant<CommandLine, UsageError> ParseArguments(std::span<const std::string> args) {
  if (args.empty()) return UsageError{"", "missing command"};
  const std::string& first = args[0];
  if (first == "--help" || first == "-h" || first == "help") {
    CommandLine line;
    line.help = true;
    if (first == "help" && args.size() > 1) line.command = args[1];  // `help merge`
    if (!line.command.empty() && std::none_of(Commands().begin(), Commands().end(),
                                              [&](const CommandSpec& c) { return c.name == line.command; }))
      return UsageError{"", "unknown command `" + ClipForMessage(line.command) + "`"};
    return line;
  }
  if (first == "--version" || first == "-V") {
    CommandLine line;
    line.version = true;
    return line;
  }
  for (const auto& spec : Commands())
    if (spec.name == first) return ParseCommand(spec, args.subspan(1));
  if (first.starts_with("-")) return UsageError{"", "unknown option `" + ClipForMessage(first) + "`"};
  return UsageError{"", "unknown command `" + ClipForMessage(first) + "`"};
}

std::variant<CommandLine, UsageError> ParseCommandOptions(std::string_view command, std::span<const std::string> args) {
  for (const auto& spec : Commands())
    if (spec.name == command) return ParseCommand(spec, args, true);
  return UsageError{"", "unknown command `" + ClipForMessage(command) + "`"};
}

std::string RenderUsageError(const UsageError& error) {
  std::string help = error.command.empty() ? "peft-bridge --help" : "peft-bridge " + error.command + " --help";
  if (error.json) {
    auto doc = Json::parse(RenderErrorJson(MakeError(ErrorCode::InvalidArgument, error.message)));
    doc["usage"] = "run `" + help + "` for usage";
    return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  return "error: " + error.message + "\nrun `" + help + "` for usage\n";
}

bool ConvertWritesModelFolder(const CommandLine& line, bool in_is_directory) {
  if (line.Has("quantize") || in_is_directory) return true;
  const std::string& in = line.positional.at(0);
  std::string_view name = std::string_view(in).substr(in.rfind('/') == std::string::npos ? 0 : in.rfind('/') + 1);
  if (net::IsRemoteArgument(in)) {
    auto address = net::ParseRemoteAddress(in, "");
    return address.ok() && NamesRemoteModel(address.value());
  }
  return IsModelIndexName(name);
}

std::optional<std::string> ConvertUsageProblem(const CommandLine& line, bool writes_folder) {
  if (!writes_folder) {  // one file into one: the model folder's options have nothing to act on
    for (const char* only : {"dry-run", "base-config"})
      if (line.Has(only))
        return "--" + std::string(only) +
               " applies to convert --quantize or of a model (its folder, its index or a Hub repo)";
    return std::nullopt;
  }
  if (line.Has("order") && !line.Has("quantize"))
    return "--order applies to the convert of one .safetensors file (a model folder is written in the input's order)";
  // A folder named like a weights file is a mistake in the making: `convert model/ model.bf16.safetensors`.
  if (line.positional.size() > 1 && line.positional[1].ends_with(".safetensors"))
    return "convert of a model (`" + ClipForMessage(line.positional[0]) +
           "`: a folder, an index or a Hub repo) writes a model folder, and OUT `" +
           ClipForMessage(line.positional[1]) + "` names a .safetensors file; name a folder (or convert one shard)";
  return std::nullopt;
}

std::string CommandLineJson(std::span<const std::string> args) {
  auto parsed = ParseCommandLine(args);
  nlohmann::json j;
  if (auto* error = std::get_if<UsageError>(&parsed)) {
    j["usageError"] = RenderUsageError(*error);
    if (error->json) j["usageErrorJson"] = true;  // printed on stdout, as every --json document
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  const auto& line = std::get<CommandLine>(parsed);
  j["command"] = line.command;
  j["help"] = line.help;
  j["version"] = line.version;
  j["positional"] = line.positional;
  j["options"] = nlohmann::json::object();
  for (const auto& [name, values] : line.options) j["options"][name] = values;
  // Arguments are clipped on character boundaries; replace guards against invalid UTF-8 from a caller.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace pb::app
