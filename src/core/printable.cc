#include "core/printable.h"

namespace pb {

namespace {

constexpr char kHex[] = "0123456789abcdef";
constexpr char kHexUpper[] = "0123456789ABCDEF";

void AppendByteEscape(std::string& out, unsigned char c) {
  out += "\\x";
  out.push_back(kHexUpper[c >> 4]);
  out.push_back(kHexUpper[c & 15]);
}

void AppendUnicodeEscape(std::string& out, unsigned c) {
  out += "\\u00";
  out.push_back(kHex[c >> 4]);
  out.push_back(kHex[c & 15]);
}

}  // namespace

std::string Printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F) AppendByteEscape(out, c);
    else out.push_back(ch);
  }
  return out;
}

std::string TerminalSafe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 && c != '\n' && c != '\t') {
      AppendByteEscape(out, c);
    } else if (c == 0x7F) {
      AppendUnicodeEscape(out, c);
    } else if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9F) {
      AppendUnicodeEscape(out, static_cast<unsigned char>(text[++i]));  // U+0080..U+009F in UTF-8
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

}  // namespace pb
