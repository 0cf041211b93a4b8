// Embind layer over pb_all_layers: small handle classes that adapt the push-based core to JS, and nothing more.
//
// Conventions shared by every handle (web/src/*.js relies on them):
//  - Input goes through a handle-owned, page-aligned heap window: JS calls window(n) (which may grow the heap),
//    copies its bytes to the returned address, then calls feed/write/push(n). window(n) returns 0 when n bytes
//    cannot be allocated (the old window stays valid); JS then reports the failure and copies nothing.
//  - Output is a chunk table the JS side reads right after the call and copies out before the next one:
//    5 doubles per chunk (tensor index or -1, offset within the tensor, 1 if the bytes lie in the input window
//    else 0, position in the window or in the owned buffer, length). Bytes still in the window are not copied
//    in C++; bytes the core produced in its own short-lived buffers are copied once into the owned buffer.
//  - Calls that can fail return false; error_json() then holds RenderErrorJson's output.
//  - 64-bit sizes and offsets cross as double (exact below 2^53), never as BigInt.
#include <emscripten/bind.h>
#include <malloc.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/json.h"
#include "core/printable.h"
#include "adapter/adapter_io.h"
#include "adapter/adapter_report.h"
#include "adapter/translate.h"
#include "app/adapter_files.h"
#include "app/output_policy_json.h"
#include "app/cli_text.h"
#include "app/command_line.h"
#include "app/input_hint.h"
#include "app/option_tables.h"
#include "app/push_target.h"
#include "core/reader.h"
#include "app/report.h"
#include "core/writer.h"
#include "failure_value.h"
#include "handle.h"
#include "header_table.h"

namespace pb::wasm {
namespace {

using emscripten::val;

std::optional<TensorOrder> ParseOrder(const std::string& order) {
  if (order == "reference") return TensorOrder::kReference;
  if (order == "input") return TensorOrder::kInput;
  return std::nullopt;
}

// StreamingReader: header event plus tensor data spans (still in the window, so never copied here).
class Reader : public Handle, private ReaderEvents {
 public:
  explicit Reader(double total_size) : reader_(ReaderOptions{KnownSize(total_size)}) {}

  bool feed(size_t n) {
    auto bytes = Begin(n);
    return bytes && Check(reader_.Feed(*bytes, *this));
  }
  bool finish() {
    chunks_.Clear();
    return Check(reader_.Finish(*this));
  }
  bool header_done() const { return reader_.header_done(); }
  double bytes_until_header() const { return double(reader_.bytes_until_header()); }
  double bytes_fed() const { return double(reader_.bytes_fed()); }
  std::string header_json() const { return reader_.header() ? RenderInspectJson(*reader_.header()) : std::string(); }
  std::string header_text() const { return reader_.header() ? RenderInspectText(*reader_.header()) : std::string(); }
  std::string header_summary_json() const {
    return reader_.header() ? RenderInspectSummaryJson(*reader_.header()) : "";
  }
  val header_table() { return reader_.header() ? HeaderTableView(*reader_.header(), table_) : val::null(); }
  val header_json_view() const { return reader_.header() ? HeaderJsonView(*reader_.header()) : val::null(); }

 private:
  std::vector<uint32_t> table_;
  Status OnHeader(const Header&) override { return Status::Ok(); }
  Status OnTensorData(size_t tensor, uint64_t offset, std::span<const uint8_t> bytes) override {
    return chunks_.Add(double(tensor), double(offset), bytes);
  }
  StreamingReader reader_;
};

// PlanWrite + StreamingWriter. The spec arrives as JSON: {"tensors":[{"name","dtype","shape"}],
// "metadata":{…}|null, "order":"reference"|"input"}.
class Writer : public Handle {
 public:
  explicit Writer(const std::string& spec_json) {
    auto parsed = ParseSpec(spec_json);
    if (!parsed.ok()) {
      Fail(parsed.error());
      return;
    }
    auto plan = PlanWrite(parsed->tensors, parsed->metadata, parsed->order);
    if (!plan.ok()) {
      Fail(plan.error());
      return;
    }
    writer_.emplace(std::move(plan.value()), chunks_);
  }

  bool ok() const { return writer_.has_value(); }
  size_t planned_count() const { return writer_ ? writer_->plan().tensors.size() : 0; }
  double planned_input(size_t i) const { return double(writer_->plan().tensors.at(i).input_index); }
  double planned_begin(size_t i) const { return double(writer_->plan().tensors.at(i).begin); }
  double planned_end(size_t i) const { return double(writer_->plan().tensors.at(i).end); }
  double header_size() const { return writer_ ? double(writer_->plan().header.size()) : 0; }
  double data_size() const { return writer_ ? double(writer_->plan().data_size) : 0; }
  double data_written() const { return writer_ ? double(writer_->data_written()) : 0; }

  bool begin() {
    chunks_.Clear();
    return writer_ && Check(writer_->Begin());
  }
  bool write(size_t n) {
    auto bytes = Begin(n);
    return bytes && writer_ && Check(writer_->Write(*bytes));
  }
  bool finish() {
    chunks_.Clear();
    return writer_ && Check(writer_->Finish());
  }

 private:
  struct Spec {
    std::vector<TensorSpec> tensors;
    std::optional<Metadata> metadata;
    TensorOrder order = TensorOrder::kReference;
  };
  static Error Bad(std::string message) { return MakeError(ErrorCode::InvalidArgument, std::move(message)); }

  static Result<Spec> ParseSpec(const std::string& text) {
    auto parsed = ParseJson(text, "writer spec");
    if (!parsed.ok()) return Bad(parsed.error().message);
    const Json& j = parsed.value();
    if (!j.is_object()) return Bad("writer spec is not a JSON object");
    Spec spec;
    if (j.contains("order")) {
      const auto& o = j["order"];
      auto order = o.is_string() ? ParseOrder(o.get<std::string>()) : std::nullopt;
      if (!order) return Bad("order must be \"reference\" or \"input\"");
      spec.order = *order;
    }
    if (j.contains("metadata") && !j["metadata"].is_null()) {
      const auto& m = j["metadata"];
      if (!m.is_object()) return Bad("metadata must be an object of strings");
      Metadata metadata;
      for (const auto& [k, v] : m.items()) {
        if (!v.is_string()) return Bad("metadata value for `" + k + "` is not a string");
        metadata.emplace_back(k, v.get<std::string>());
      }
      spec.metadata = std::move(metadata);
    }
    if (!j.contains("tensors") || !j["tensors"].is_array()) return Bad("tensors must be an array");
    for (const auto& t : j["tensors"]) {
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string())
        return Bad("every tensor needs a string name");
      std::string name = t["name"].get<std::string>();
      if (!t.contains("dtype") || !t["dtype"].is_string())
        return MakeError(ErrorCode::InvalidArgument, "tensor `" + name + "` needs a dtype", name);
      auto dtype = ParseDtype(t["dtype"].get<std::string>());
      if (!dtype)
        return MakeError(ErrorCode::UnsupportedDtype,
                         "tensor `" + name + "`: unknown dtype " + t["dtype"].get<std::string>(), name);
      if (!t.contains("shape") || !t["shape"].is_array())
        return MakeError(ErrorCode::InvalidArgument, "tensor `" + name + "` needs a shape array", name);
      std::vector<uint64_t> shape;
      for (const auto& d : t["shape"]) {
        if (!d.is_number_unsigned())
          return MakeError(ErrorCode::InvalidArgument,
                           "tensor `" + name + "`: shape entries must be non-negative integers", name);
        shape.push_back(d.get<uint64_t>());
      }
      spec.tensors.push_back({std::move(name), *dtype, std::move(shape)});
    }
    return spec;
  }

  std::optional<StreamingWriter> writer_;
};

// Renders an error raised outside the core (a file that cannot be opened…) exactly as the core renders its
// own. `error_json` is {"code","message","tensor","offset"}; an unknown code renders as IoError.
Error ErrorFromJson(const std::string& error_json) {
  auto parsed = ParseJson(error_json, "error");
  Json j = parsed.ok() ? std::move(parsed.value()) : Json();
  Error e{ErrorCode::IoError, "", std::nullopt, std::nullopt};
  if (j.is_object()) {
    if (j.contains("code") && j["code"].is_string())
      e.code = ErrorCodeFromName(j["code"].get<std::string>()).value_or(ErrorCode::IoError);
    if (j.contains("message") && j["message"].is_string()) e.message = j["message"].get<std::string>();
    if (j.contains("tensor") && j["tensor"].is_string()) e.tensor = j["tensor"].get<std::string>();
    if (j.contains("offset") && j["offset"].is_number_unsigned()) e.offset = j["offset"].get<uint64_t>();
  }
  return e;
}

std::string RenderError(const std::string& error_json, bool as_json) {
  Error e = ErrorFromJson(error_json);
  return as_json ? RenderErrorJson(e) : RenderErrorText(e);
}

}  // namespace

// A command line as parseCommandLine gave it to the npm CLI (app::CommandLineFromJson).
app::CommandLine CommandLineFromJson(const std::string& line_json) { return app::CommandLineFromJson(line_json); }

namespace {

// app::ExplainInputError for the npm CLI, which gathers the same facts with Node's fs (`exists`: lstat succeeds).
// `error_json` as for renderError; `role` "tensor", "adapter" or "base". {changed: false} when the error stays as it
// was, else {changed: true, errorJson, errorText}.
val ExplainInputError(const std::string& error_json, const std::string& path, bool directory, bool exists,
                      const std::string& role) {
  const Error before = ErrorFromJson(error_json);
  const app::InputRole r = role == "adapter" ? app::InputRole::kAdapter
                           : role == "base"  ? app::InputRole::kBase
                                             : app::InputRole::kTensorFile;
  const Error after = app::ExplainInputError(before, {path, directory, exists}, r);
  val out = val::object();
  const bool changed = after.code != before.code || after.message != before.message;
  out.set("changed", changed);
  if (changed) {
    out.set("errorJson", RenderErrorJson(after));
    out.set("errorText", RenderErrorText(after));
  }
  return out;
}

}  // namespace
}  // namespace pb::wasm

EMSCRIPTEN_BINDINGS(peft_bridge) {
  using namespace emscripten;
  using namespace pb::wasm;
  class_<Handle>("Handle")
      .function("window", &Handle::window)
      .function("chunkTable", &Handle::chunk_table)
      .function("chunkCount", &Handle::chunk_count)
      .function("ownedBytes", &Handle::owned_bytes)
      .function("flipOutput", &Handle::flip_output)
      .function("errorJson", &Handle::error_json)
      .function("errorText", &Handle::error_text);
  class_<Reader, base<Handle>>("Reader")
      .constructor<double>()
      .function("feed", &Reader::feed)
      .function("finish", &Reader::finish)
      .function("headerDone", &Reader::header_done)
      .function("bytesUntilHeader", &Reader::bytes_until_header)
      .function("bytesFed", &Reader::bytes_fed)
      .function("headerJson", &Reader::header_json)
      .function("headerSummaryJson", &Reader::header_summary_json)
      .function("headerTable", &Reader::header_table)
      .function("headerJsonView", &Reader::header_json_view)
      .function("headerText", &Reader::header_text);
  class_<Writer, base<Handle>>("Writer")
      .constructor<std::string>()
      .function("ok", &Writer::ok)
      .function("plannedCount", &Writer::planned_count)
      .function("plannedInput", &Writer::planned_input)
      .function("plannedBegin", &Writer::planned_begin)
      .function("plannedEnd", &Writer::planned_end)
      .function("headerSize", &Writer::header_size)
      .function("dataSize", &Writer::data_size)
      .function("dataWritten", &Writer::data_written)
      .function("begin", &Writer::begin)
      .function("write", &Writer::write)
      .function("finish", &Writer::finish);
  function("renderError", &RenderError);
  function("explainInputError", &ExplainInputError);
  function(
      "cliHelp", +[](const std::string& command) { return std::string(pb::CliHelp(command)); });
  function(
      "version", +[] { return std::string(pb::kVersion); });
  // What the npm CLI prints passes the native CLI's rule (core/printable.h): no raw control characters.
  function(
      "terminalSafe", +[](const std::string& text) { return pb::TerminalSafe(text); });
  // Bytes of the heap currently allocated by malloc (not its high-water mark): tests use it to prove that
  // failing calls free everything they allocated.
  // The shared command-line grammar (src/app/command_line.h): a JSON array of arguments in, CommandLineJson out.
  function(
      "parseCommandLine", +[](const std::string& args_json) {
        auto j = nlohmann::json::parse(args_json, nullptr, /*allow_exceptions=*/false);
        std::vector<std::string> args;
        if (j.is_array())
          for (const auto& a : j)
            if (a.is_string()) args.push_back(a.get<std::string>());
        return pb::app::CommandLineJson(args);
      });
  // How convert runs (app::ConvertWritesModelFolder), from the parsed line and whether IN is a directory:
  // {"folder": bool, "usageError": text or null, "usageErrorJson": bool}.
  function(
      "convertRoute", +[](const std::string& line_json, bool in_is_directory) {
        const pb::app::CommandLine line = pb::wasm::CommandLineFromJson(line_json);
        nlohmann::json r;
        r["folder"] = !line.positional.empty() && pb::app::ConvertWritesModelFolder(line, in_is_directory);
        auto problem = pb::app::ConvertUsageProblem(line, r["folder"].get<bool>());
        r["usageError"] = problem
                              ? nlohmann::json(pb::app::RenderUsageError({line.command, *problem, line.Has("json")}))
                              : nlohmann::json();
        r["usageErrorJson"] = line.Has("json");
        return r.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      });
  // A push's repo creation answered `status` (app::ClassifyCreateRepoAnswer): "created", "exists", "ask" or "failed".
  function(
      "createRepoAnswer", +[](int status) {
        switch (pb::app::ClassifyCreateRepoAnswer(status)) {
          case pb::app::CreateRepoAnswer::kCreated: return std::string("created");
          case pb::app::CreateRepoAnswer::kExists: return std::string("exists");
          case pb::app::CreateRepoAnswer::kAskWhetherItExists: return std::string("ask");
          case pb::app::CreateRepoAnswer::kFailed: break;
        }
        return std::string("failed");
      });
  // `push DIR` (app::PushSkips, app::PushFolderFiles): entries_json [{path, kind: 'file'|'directory'|'other'}];
  // {ok, files: JSON text of the names} or the failure.
  function(
      "pushSkips", +[](const std::string& path) { return pb::app::PushSkips(path); });
  function(
      "pushFolderFiles", +[](const std::string& dir, const std::string& entries_json) {
        std::vector<pb::app::FolderEntry> entries;
        auto j = nlohmann::json::parse(entries_json, nullptr, /*allow_exceptions=*/false);
        if (j.is_array())
          for (const auto& e : j)
            if (e.is_object() && e.contains("path") && e["path"].is_string() && e.contains("kind") &&
                e["kind"].is_string()) {
              const std::string kind = e["kind"].get<std::string>();
              entries.push_back({e["path"].get<std::string>(), kind == "file"        ? pb::app::EntryKind::kFile
                                                               : kind == "directory" ? pb::app::EntryKind::kDirectory
                                                                                     : pb::app::EntryKind::kOther});
            }
        auto files = pb::app::PushFolderFiles(dir, std::move(entries));
        if (!files.ok()) return pb::wasm::FailureValue(files.error());
        emscripten::val r = emscripten::val::object();
        r.set("ok", true);
        r.set("files", nlohmann::json(files.value()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        return r;
      });
  // What a failed --push-to's error ends with (app::PushRetryHint), from the parsed line.
  function(
      "pushRetryHint", +[](const std::string& line_json) {
        const pb::app::CommandLine line = pb::wasm::CommandLineFromJson(line_json);
        auto value = line.Value("push-to");
        if (!value) return std::string();
        auto target = pb::app::ParsePushTarget(*value);
        auto* t = std::get_if<pb::app::PushTarget>(&target);
        return t ? pb::app::PushRetryHint(line, *t) : std::string();
      });
  // --push-to (src/app/push_target.h): the target parsed, the default commit title, the summary, the no-token text.
  function(
      "pushTarget", +[](const std::string& value) { return pb::app::PushTargetJson(value); });
  function(
      "pushCommitTitle", +[](const std::string& command, double files) {
        return pb::app::PushCommitTitle(command, static_cast<size_t>(files));
      });
  function(
      "renderPushOutcome", +[](const std::string& json) { return pb::app::RenderPushOutcomeJson(json); });
  function(
      "pushNeedsToken", +[] { return std::string(pb::app::kPushNeedsToken); });
  function(
      "errorCodes", +[] {
        std::string names;
        for (auto name : pb::ErrorCodeNames()) names.append(name).push_back('\n');
        return names;
      });
  // Every command's option table (app/option_tables.h), as JSON: what tests/js/option-tables.test.mjs holds
  // index.d.ts's option interfaces to.
  function(
      "optionTables", +[] { return pb::app::OptionTablesJson().dump(); });
  function(
      "heapInUse", +[] { return static_cast<double>(mallinfo().uordblks); });
  // The dtype names by code, one per line: the codes of headerTable() rows.
  function(
      "dtypeNames", +[] {
        std::string names;
        for (int code = 0; code < pb::kDtypeCount; ++code)
          names.append(pb::DtypeName(static_cast<pb::Dtype>(code))).push_back('\n');
        return names;
      });
}

// ---------------------------------------------------------------------------------------------------------------
// Adapters: adapter-info and translate run as jobs (wasm/job_bindings.cc), reading the weights by range. Here
// only the refusal of a pickled adapter file, which needs no handle.
namespace pb::wasm {
namespace {

using emscripten::val;

val Failure(const Error& e) {
  val r = FailureValue(e);
  r.set("stage", std::string("read"));
  return r;
}

}  // namespace
}  // namespace pb::wasm

EMSCRIPTEN_BINDINGS(peft_bridge_adapter) {
  using namespace emscripten;
  // The refusal the CLI prints for a pickled adapter file, rendered by the core.
  function(
      "pickleAdapterError",
      +[](const std::string& file_name) { return pb::wasm::Failure(pb::adapter::PickleAdapterError(file_name)); });
  // Which files of an adapter directory are read (app/adapter_files.h): `files_json` lists the names of the
  // directory's regular files; {ok, weights, config (null when absent)} or the failure.
  function(
      "chooseAdapterFiles", +[](const std::string& dir, const std::string& files_json) {
        const nlohmann::json files = nlohmann::json::parse(files_json, nullptr, /*allow_exceptions=*/false);
        std::vector<std::string> names;
        if (files.is_array())
          for (const auto& f : files)
            if (f.is_string()) names.push_back(f.get<std::string>());
        auto chosen = pb::app::ChooseAdapterFiles(dir, names);
        if (!chosen.ok()) return pb::wasm::Failure(chosen.error());
        val r = val::object();
        r.set("ok", true);
        r.set("weights", chosen->weights);
        r.set("config", chosen->config ? val(*chosen->config) : val::null());
        return r;
      });
  // The config read beside a weights file named directly.
  function(
      "adapterConfigName", +[]() { return std::string(pb::app::kAdapterConfigName); });
  // A weights file named directly: {ok} or the refusal of a pickled one.
  function(
      "checkAdapterWeightsPath", +[](const std::string& path) {
        pb::Status s = pb::app::CheckAdapterWeightsPath(path);
        if (!s.ok()) return pb::wasm::Failure(s.error());
        val r = val::object();
        r.set("ok", true);
        return r;
      });
}
