// Strict UTF-8 validation (as Rust's str::from_utf8: no overlongs, no surrogates, max U+10FFFF).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pb {

// Index of the first byte that starts an invalid sequence, or text.size() if all valid.
size_t FirstInvalidUtf8(std::string_view text);
inline bool IsValidUtf8(std::string_view text) { return FirstInvalidUtf8(text) == text.size(); }
void AppendUtf8(std::string& out, uint32_t code_point);

}  // namespace pb
