#include "text/python_json.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/utf8.h"

namespace pb::text {
namespace {

// The double nearest to m * 10^q. The text has no radix character, so strtod's locale cannot matter.
double ReadDecimal(uint64_t m, int q) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%llue%d", static_cast<unsigned long long>(m), q);
  return std::strtod(buf, nullptr);
}

// The shortest decimal m * 10^q that reads back as v (finite, > 0), the nearest one when several have
// that length: the digits Python's repr (David Gay's dtoa, mode 0) chooses. std::to_chars would give
// them directly, but Emscripten 3.1.6's libc++ has no floating-point to_chars, so this asks printf,
// which rounds correctly in glibc and musl, for 1, 2, ... 17 significant digits.
void ShortestDecimal(double v, uint64_t& m, int& q) {
  for (int n = 1; n <= 17; ++n) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.*e", n - 1, v);  // d[.ddd]e±XX; the point is locale-dependent
    m = 0;
    const char* p = buf;
    for (; *p != 'e'; ++p)
      if (*p >= '0' && *p <= '9') m = m * 10 + static_cast<uint64_t>(*p - '0');
    q = std::atoi(p + 1) - (n - 1);
    const double back = ReadDecimal(m, q);
    if (back == v) break;
    // printf gave the nearest n-digit decimal and it missed. When v's significand is a power of two the
    // gap to the next double below is half the gap above, so the n-digit decimal just above v can still
    // read back while the nearer one below does not; otherwise the interval is symmetric and no other
    // n-digit decimal can. (m + 1 may have n + 1 digits, 99 -> 100; the zeros are stripped below.)
    if (back < v && ReadDecimal(m + 1, q) == v) {
      ++m;
      break;
    }
  }                      // at n = 17 the nearest always reads back
  while (m % 10 == 0) {  // 2.50e+00 -> 25e-1: repr never shows trailing zeros (m > 0 here)
    m /= 10;
    ++q;
  }
}

void AppendHex4(std::string& out, uint32_t u) {
  static const char kHex[] = "0123456789abcdef";  // Python writes lowercase: \u00e9
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out.push_back(kHex[(u >> shift) & 0xF]);
}

// Next code point of s at i, advancing i. Strings that came through nlohmann's parser are valid UTF-8;
// a value built in C++ might not be, and a Python str cannot hold such bytes, so each byte that does not
// start a valid sequence becomes U+FFFD (nlohmann's dump would throw, which WebAssembly builds cannot).
uint32_t NextCodePoint(const std::string& s, size_t& i) {
  if (auto cp = DecodeUtf8(s, i)) return *cp;
  ++i;
  return 0xFFFD;
}

// Python's json encoder with ensure_ascii: only printable ASCII (0x20..0x7E) is written raw, so DEL
// (0x7F) is escaped too.
void AppendString(std::string& out, const std::string& s) {
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = NextCodePoint(s, i);
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (cp >= 0x20 && cp <= 0x7E) {
          out.push_back(static_cast<char>(cp));
        } else if (cp < 0x10000) {
          AppendHex4(out, cp);
        } else {  // UTF-16 surrogate pair, as Python writes astral characters
          const uint32_t v = cp - 0x10000;
          AppendHex4(out, 0xD800 | (v >> 10));
          AppendHex4(out, 0xDC00 | (v & 0x3FF));
        }
    }
  }
  out.push_back('"');
}

class Writer {
 public:
  Writer(const PythonJsonOptions& options, std::string& out) : options_(options), out_(out) {}

  void Value(const Json& v, int depth) {
    switch (v.type()) {
      case Json::value_t::object: Object(v, depth); break;
      case Json::value_t::array: Array(v, depth); break;
      case Json::value_t::string: AppendString(out_, v.get_ref<const Json::string_t&>()); break;
      case Json::value_t::boolean: out_ += v.get<bool>() ? "true" : "false"; break;
      case Json::value_t::number_integer: out_ += std::to_string(v.get<int64_t>()); break;
      case Json::value_t::number_unsigned: out_ += std::to_string(v.get<uint64_t>()); break;
      case Json::value_t::number_float: out_ += PythonFloatRepr(v.get<double>()); break;
      default: out_ += "null"; break;  // null, discarded, and binary (which Python cannot hold)
    }
  }

 private:
  void Object(const Json& v, int depth) {
    const auto& object = v.get_ref<const Json::object_t&>();
    if (object.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<const Json::object_t::value_type*> items;
    items.reserve(object.size());
    for (const auto& kv : object) items.push_back(&kv);
    // Python sorts str keys by code point; for valid UTF-8, byte order is the same order.
    if (options_.sort_keys) std::sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
    out_.push_back('{');
    for (size_t i = 0; i < items.size(); ++i) {
      Separator(i, depth + 1);
      AppendString(out_, items[i]->first);
      out_ += ": ";
      Value(items[i]->second, depth + 1);
    }
    Close(depth, '}');
  }

  void Array(const Json& v, int depth) {
    const auto& array = v.get_ref<const Json::array_t&>();
    if (array.empty()) {
      out_ += "[]";
      return;
    }
    out_.push_back('[');
    for (size_t i = 0; i < array.size(); ++i) {
      Separator(i, depth + 1);
      Value(array[i], depth + 1);
    }
    Close(depth, ']');
  }

  // Before item i: with an indent, "," (none before the first) then a new line; without, ", ".
  void Separator(size_t i, int depth) {
    if (options_.indent < 0) {
      if (i > 0) out_ += ", ";
      return;
    }
    if (i > 0) out_.push_back(',');
    NewLine(depth);
  }

  void Close(int depth, char bracket) {
    if (options_.indent >= 0) NewLine(depth);
    out_.push_back(bracket);
  }

  void NewLine(int depth) {
    out_.push_back('\n');
    out_.append(static_cast<size_t>(options_.indent) * static_cast<size_t>(depth), ' ');
  }

  const PythonJsonOptions& options_;
  std::string& out_;
};

}  // namespace

std::string PythonFloatRepr(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value < 0 ? "-Infinity" : "Infinity";
  std::string out = std::signbit(value) ? "-" : "";
  if (value == 0) return out + "0.0";

  uint64_t m = 0;
  int q = 0;
  ShortestDecimal(std::fabs(value), m, q);
  const std::string digits = std::to_string(m);
  const int n = static_cast<int>(digits.size());
  const int exp10 = q + n - 1;  // value = d.ddd * 10^exp10

  if (exp10 < -4 || exp10 >= 16) {  // Python's float_repr_style "short": 1e-05, 1.5e+16
    out += digits[0];
    if (n > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    return out + e;
  }
  if (exp10 < 0) return out + "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
  if (n <= exp10 + 1) return out + digits + std::string(static_cast<size_t>(exp10 + 1 - n), '0') + ".0";
  return out + digits.substr(0, exp10 + 1) + "." + digits.substr(exp10 + 1);
}

std::string DumpPythonJson(const Json& value, const PythonJsonOptions& options) {
  std::string out;
  Writer(options, out).Value(value, 0);
  return out;
}

}  // namespace pb::text
