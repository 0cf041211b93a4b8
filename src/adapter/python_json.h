// Python's json.dumps, byte for byte, for the configs peft-bridge writes.
//
// PEFT saves adapter_config.json with json.dumps(d, indent=2, sort_keys=True): ensure_ascii escaping,
// ", " / ": " separators with newlines and indentation, ints and floats kept apart, floats in Python's
// repr (shortest round trip; 1e-05, 0.0001, 1e+16, 16.0). Re-exporting a config that PEFT wrote must give
// the same text, so this emitter reproduces those rules rather than nlohmann's dump().
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace pb::adapter {

struct PythonJsonOptions {
  int indent = 2;          // spaces per level; < 0 means Python's indent=None (", " and ": " on one line)
  bool sort_keys = true;   // sort object keys by code point, like Python's sorted() on str
};

// Formats a double as Python's repr(float): shortest round-trip digits; scientific notation when the
// decimal exponent is < -4 or >= 16 (e.g. 1e-05, 1.5e+16), otherwise positional with at least one digit
// after the point (16.0, 0.0001). nan/inf become NaN/Infinity/-Infinity, as json.dumps writes them.
std::string PythonFloatRepr(double value);

// True when no container nests deeper than `max_depth` (checked without recursion). DumpPythonJson recurses
// once per level, so documents from the internet are checked with this first: a config nested 100,000 levels
// deep must be an error, not a stack overflow (found by fuzzing).
inline constexpr size_t kMaxConfigDepth = 128;  // serde_json's default recursion limit, as for headers
bool WithinDepth(const nlohmann::ordered_json& value, size_t max_depth = kMaxConfigDepth);

// json.dumps(value, indent=options.indent, sort_keys=options.sort_keys, ensure_ascii=True).
// Strings are written with Python's escapes: \" \\ \n \r \t \b \f, other control characters and every
// non-ASCII code point as \uXXXX (surrogate pairs above U+FFFF). No trailing newline.
std::string DumpPythonJson(const nlohmann::ordered_json& value, const PythonJsonOptions& options = {});

}  // namespace pb::adapter
