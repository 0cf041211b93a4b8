// Strict UTF-8 validation (as Rust's str::from_utf8: no overlongs, no surrogates, max U+10FFFF).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pb {

// The code point whose encoding starts at text[i], with i moved past it; nullopt (i unchanged) when the bytes there
// are not one strict UTF-8 sequence (truncated, overlong, a surrogate, above U+10FFFF, or a stray continuation byte).
std::optional<uint32_t> DecodeUtf8(std::string_view text, size_t& i);

// Index of the first byte that starts an invalid sequence, or text.size() if all valid.
size_t FirstInvalidUtf8(std::string_view text);
inline bool IsValidUtf8(std::string_view text) { return FirstInvalidUtf8(text) == text.size(); }
void AppendUtf8(std::string& out, uint32_t code_point);

// `input` as it may appear in a message: whole up to `max_bytes`, else its first `max_bytes` (cut at a UTF-8
// boundary, so the message stays valid UTF-8 and JSON-encodable) followed by "… (N bytes)", so that a 10 MB key
// or argument does not make a 10 MB message. Every message that echoes input clips it here.
std::string ClipForMessage(std::string_view input, size_t max_bytes = 200);

}  // namespace pb
