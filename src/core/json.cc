#include "core/json.h"

#include <string>

namespace pb {
namespace {

Error Invalid(std::string_view what, const std::string& message) {
  return MakeError(ErrorCode::InvalidConfig, std::string(what) + ": " + message);
}

// The offset of the first bracket that opens container number max_depth + 1, or npos. Brackets inside
// strings do not count; anything else malformed is left to the parser, which reports it precisely.
size_t FirstTooDeep(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (++depth > max_depth) return i;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default: break;
    }
  }
  return std::string_view::npos;
}

// nlohmann's DOM builder, with the parse error's position and text kept: parse(…, allow_exceptions=false)
// would only say "discarded".
class DomBuilder {
 public:
  explicit DomBuilder(Json& root) : dom_(root, /*allow_exceptions_=*/false) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(Json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(Json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(Json::number_float_t v, const Json::string_t& s) { return dom_.number_float(v, s); }
  bool string(Json::string_t& v) { return dom_.string(v); }
  bool binary(Json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) { return dom_.start_object(n); }
  bool key(Json::string_t& v) { return dom_.key(v); }
  bool end_object() { return dom_.end_object(); }
  bool start_array(std::size_t n) { return dom_.start_array(n); }
  bool end_array() { return dom_.end_array(); }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& /*last_token*/, const Exception& ex) {
    position_ = position;
    // "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error while parsing …":
    // keep what follows the location; the byte offset replaces it.
    std::string_view detail = ex.what();
    if (size_t colon = detail.find(": "); colon != std::string_view::npos) detail.remove_prefix(colon + 2);
    detail_ = ClipForMessage(detail, 300);  // "last read: '…'" quotes the input
    failed_ = true;
    return false;
  }

  bool failed() const { return failed_; }
  size_t position() const { return position_; }
  const std::string& detail() const { return detail_; }

 private:
  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  bool failed_ = false;
  size_t position_ = 0;
  std::string detail_;
};

}  // namespace

Result<Json> ParseJson(std::string_view text, std::string_view what, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes)
    return Invalid(what, std::to_string(text.size()) + " bytes, more than the " + std::to_string(limits.max_bytes) +
                             " a JSON document may have");
  if (size_t at = FirstTooDeep(text, limits.max_depth); at != std::string_view::npos)
    return Invalid(what,
                   "nesting deeper than " + std::to_string(limits.max_depth) + " levels at byte " + std::to_string(at));
  Json root;
  DomBuilder builder(root);
  const bool ok = Json::sax_parse(text.begin(), text.end(), &builder, nlohmann::detail::input_format_t::json,
                                  /*strict=*/true, /*ignore_comments=*/false);
  if (!ok || builder.failed()) {
    // The position is one past the byte that failed, counted from 1 by nlohmann; 0 when the text is empty.
    const size_t at = builder.position() > 0 ? builder.position() - 1 : 0;
    return Invalid(what, "not valid JSON at byte " + std::to_string(at) + ": " + builder.detail());
  }
  return root;
}

bool WithinDepth(const Json& value, size_t max_depth) {
  // Iterative walk: (container, depth) pairs on an explicit stack.
  std::vector<std::pair<const Json*, size_t>> stack{{&value, 1}};
  while (!stack.empty()) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    if (!node->is_structured()) continue;
    if (depth > max_depth) return false;
    for (const auto& child : *node)
      if (child.is_structured()) stack.emplace_back(&child, depth + 1);
  }
  return true;
}

}  // namespace pb
