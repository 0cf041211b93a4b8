// The options object a WASM handle's constructor receives as JSON, read as the text the native CLI would have
// received for each option (the core checks and words every value: compose::Parse*Arguments). One reader for
// every handle that takes CLI-like options (create, extract).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "app/command_line.h"
#include "core/json.h"

namespace pb::wasm {

class OptionsObject {
 public:
  // InvalidArgument ("<what> are not a JSON object") for anything but an object.
  static Result<OptionsObject> Parse(const std::string& json, std::string_view what) {
    auto parsed = ParseJson(json, std::string(what));
    if (!parsed.ok() || !parsed->is_object())
      return MakeError(ErrorCode::InvalidArgument, std::string(what) + " are not a JSON object");
    OptionsObject o;
    o.json_ = std::move(parsed.value());
    return o;
  }
  // A string as it is; a number or boolean as its JSON text (the core refuses what is not its option's form);
  // null or absent: nullopt.
  std::optional<std::string> Text(const char* key) const {
    if (!json_.contains(key) || json_[key].is_null()) return std::nullopt;
    return json_[key].is_string() ? json_[key].get<std::string>() : json_[key].dump();
  }
  // A dtype in any spelling the CLIs accept, normalised to bf16 / f16 / f32 as their grammar normalises it
  // (anything else passed on for the core to refuse).
  std::optional<std::string> DtypeText(const char* key) const {
    auto d = Text(key);
    if (!d) return d;
    auto dtype = app::ParseFloatDtypeName(*d);
    return !dtype ? *d : *dtype == Dtype::BF16 ? "bf16" : *dtype == Dtype::F16 ? "f16" : "f32";
  }
  bool Flag(const char* key) const { return json_.contains(key) && json_[key].is_boolean() && json_[key].get<bool>(); }
  const Json& json() const { return json_; }

 private:
  Json json_;
};

}  // namespace pb::wasm
