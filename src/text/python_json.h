// Python's json.dumps, byte for byte, for the configs peft-bridge writes.
//
// PEFT saves adapter_config.json with json.dumps(d, indent=2, sort_keys=True): ensure_ascii escaping,
// ", " / ": " separators with newlines and indentation, ints and floats kept apart, floats in Python's
// repr (shortest round trip; 1e-05, 0.0001, 1e+16, 16.0). Re-exporting a config that PEFT wrote must give
// the same text, so this emitter reproduces those rules rather than nlohmann's dump().
#pragma once

#include <string>

#include "core/json.h"

namespace pb::text {

struct PythonJsonOptions {
  int indent = 2;         // spaces per level; < 0 means Python's indent=None (", " and ": " on one line)
  bool sort_keys = true;  // sort object keys by code point, like Python's sorted() on str
};

// Formats a double as Python's repr(float): shortest round-trip digits; scientific notation when the
// decimal exponent is < -4 or >= 16 (e.g. 1e-05, 1.5e+16), otherwise positional with at least one digit
// after the point (16.0, 0.0001). nan/inf become NaN/Infinity/-Infinity, as json.dumps writes them.
std::string PythonFloatRepr(double value);

// DumpPythonJson recurses once per level: documents come from ParseJson, which refuses more than
// kMaxJsonDepth levels, or are built in C++ and checked with WithinDepth (core/json.h).
inline constexpr size_t kMaxConfigDepth = kMaxJsonDepth;

// json.dumps(value, indent=options.indent, sort_keys=options.sort_keys, ensure_ascii=True).
// Strings are written with Python's escapes: \" \\ \n \r \t \b \f, other control characters and every
// non-ASCII code point as \uXXXX (surrogate pairs above U+FFFF). No trailing newline.
std::string DumpPythonJson(const Json& value, const PythonJsonOptions& options = {});

}  // namespace pb::text
