// Embind layer over the rules of remote arguments (net/remote_address.h, app/base_layout.h) and the multi-file
// inspect report, for web/bin/peft-bridge.mjs: the npm CLI asks here what to fetch, as the native CLI does.
// Failures come back as {ok: false, errorJson, errorText}.
#include <emscripten/bind.h>

#include <string>
#include <vector>

#include "app/base_config_source.h"
#include "app/base_layout.h"
#include "app/report.h"
#include "core/json.h"
#include "failure_value.h"
#include "net/remote_address.h"

namespace pb::wasm {
namespace {

using emscripten::val;

std::vector<std::string> Names(const std::string& json_text) {
  std::vector<std::string> names;
  auto parsed = ParseJson(json_text, "names");
  if (parsed.ok() && parsed->is_array())
    for (const auto& n : parsed.value())
      if (n.is_string()) names.push_back(n.get<std::string>());
  return names;
}

// {ok, folder, model (inspect reads every shard), label, url, fileName}
val ParseRemote(const std::string& arg, const std::string& endpoint) {
  auto a = net::ParseRemoteAddress(arg, endpoint);
  if (!a.ok()) return FailureValue(a.error());
  val r = val::object();
  r.set("ok", true);
  r.set("folder", a->folder);
  r.set("model", app::NamesRemoteModel(a.value()));
  r.set("label", a->label);
  r.set("url", a->url);
  r.set("fileName", net::RemoteFileName(a.value()));
  return r;
}

// {ok, url, label} of `arg` as one file (net::RemoteFileAddress).
val FileAddress(const std::string& arg, const std::string& endpoint) {
  auto f = net::RemoteFileAddress(arg, endpoint);
  if (!f.ok()) return FailureValue(f.error());
  val r = val::object();
  r.set("ok", true);
  r.set("url", f->url);
  r.set("label", f->label);
  return r;
}

// {url, label} of `name` in (or beside) the address `arg`; `commit` "" for none.
val Entry(const std::string& arg, const std::string& endpoint, const std::string& name, const std::string& commit) {
  auto a = net::ParseRemoteAddress(arg, endpoint);
  val r = val::object();
  if (!a.ok()) return FailureValue(a.error());
  net::RemoteFile f =
      net::RemoteEntry(a.value(), name, commit.empty() ? std::nullopt : std::optional<std::string>(commit));
  r.set("ok", true);
  r.set("url", f.url);
  r.set("label", f.label);
  return r;
}

// {ok, names: [..]} (as JSON text) of a Hub tree listing.
val Listing(const std::string& text, const std::string& label) {
  auto names = net::ParseHubListing(text, label);
  if (!names.ok()) return FailureValue(names.error());
  Json list = Json::array();
  for (const auto& n : names.value()) list.push_back(n);
  val r = val::object();
  r.set("ok", true);
  r.set("names", list.dump());
  return r;
}

val BaseFile(const std::string& dir, const std::string& names_json) {
  std::vector<std::string> names = Names(names_json);
  auto chosen = app::ChooseBaseFile(dir, names);
  if (!chosen.ok()) return FailureValue(chosen.error());
  val r = val::object();
  r.set("ok", true);
  r.set("name", chosen.value());
  r.set("index", app::IsModelIndexName(chosen.value()));
  return r;
}

// `files_json`: [{name, report, json}], each report as the core rendered it and `json` the file's RenderInspectJson
// document (the totals are counted from it).
std::string RenderFiles(const std::string& files_json, bool json) {
  std::vector<RenderedReport> files;
  auto parsed = ParseJson(files_json, "reports");
  if (parsed.ok() && parsed->is_array())
    for (const auto& f : parsed.value()) {
      if (!f.is_object()) continue;
      auto name = f.find("name"), report = f.find("report"), doc = f.find("json");
      if (name == f.end() || report == f.end() || doc == f.end() || !name->is_string() || !report->is_string() ||
          !doc->is_string())
        continue;
      auto totals = TotalsOfReportJson(doc->get_ref<const std::string&>());
      files.push_back(
          {name->get<std::string>(), report->get<std::string>(), totals.ok() ? totals.value() : InspectTotals{}});
    }
  return json ? RenderInspectFilesJson(files) : RenderInspectFilesText(files);
}

// What a merge reads of the remote base `arg` (app::ChooseRemoteBase), `listing_json` the names of its folder:
// {ok, index: name | null, single, config: 'none' | 'listed' | 'maybe', listing: [{name, kind}] (JSON text)}.
val RemoteBase(const std::string& arg, const std::string& endpoint, const std::string& listing_json) {
  auto a = net::ParseRemoteAddress(arg, endpoint);
  if (!a.ok()) return FailureValue(a.error());
  std::vector<std::string> names = Names(listing_json);
  auto files = app::ChooseRemoteBase(a.value(), names);
  if (!files.ok()) return FailureValue(files.error());
  using Config = app::RemoteBaseFiles::Config;
  Json listing = Json::array();
  for (const auto& e : files->listing) listing.push_back({{"name", e.name}, {"kind", "file"}});
  val r = val::object();
  r.set("ok", true);
  r.set("index", files->index ? val(*files->index) : val::null());
  r.set("single", files->single);
  r.set("config", files->config == Config::kListed ? "listed" : files->config == Config::kMaybe ? "maybe" : "none");
  r.set("listing", listing.dump());
  return r;
}

// {name, revision | null, localConfigPath} of the base an adapter_config.json names, or null.
val AdapterBase(const std::string& config_text) {
  auto base = app::AdapterBaseModelOf(config_text);
  if (!base) return val::null();
  val r = val::object();
  r.set("name", base->name);
  r.set("revision", base->revision ? val(*base->revision) : val::null());
  r.set("localConfigPath", app::LocalBaseConfigPath(base->name));
  return r;
}

// app::ChooseBaseConfig: {ok, kind: 'none' | 'local' | 'remote', path, url, label, note, hint}. `flag` and
// `config_text` null when absent.
val BaseConfig(const val& flag, const val& config_text, bool local_config_exists, bool adapter_remote,
               const std::string& endpoint) {
  app::BaseConfigFacts facts;
  if (flag.isString()) facts.flag = flag.as<std::string>();
  if (config_text.isString()) facts.base = app::AdapterBaseModelOf(config_text.as<std::string>());
  facts.local_config_exists = local_config_exists;
  facts.adapter_remote = adapter_remote;
  facts.endpoint = endpoint;
  auto choice = app::ChooseBaseConfig(facts);
  if (!choice.ok()) return FailureValue(choice.error());
  using Kind = app::BaseConfigChoice::Kind;
  val r = val::object();
  r.set("ok", true);
  r.set("kind", choice->kind == Kind::kLocal ? "local" : choice->kind == Kind::kRemote ? "remote" : "none");
  r.set("path", choice->path);
  r.set("url", choice->remote.url);
  r.set("label", choice->remote.label);
  r.set("note", choice->note);
  r.set("hint", choice->hint);
  return r;
}

}  // namespace
}  // namespace pb::wasm

EMSCRIPTEN_BINDINGS(peft_bridge_remote) {
  using namespace emscripten;
  function("parseRemoteAddress", &pb::wasm::ParseRemote);
  function("remoteEntry", &pb::wasm::Entry);
  function("remoteFileAddress", &pb::wasm::FileAddress);
  function("parseHubListing", &pb::wasm::Listing);
  function("chooseBaseFile", &pb::wasm::BaseFile);
  function("renderInspectFiles", &pb::wasm::RenderFiles);
  function("chooseRemoteBase", &pb::wasm::RemoteBase);
  function("adapterBaseModel", &pb::wasm::AdapterBase);
  function("chooseBaseConfig", &pb::wasm::BaseConfig);
  function(
      "isModelIndexName", +[](const std::string& name) { return pb::app::IsModelIndexName(name); });
}
